"""Under a burst of concurrent requests `serve` answers every one within a bound, never a 500
and never a 30 s wait for a pooled connection, and an unrelated tenant's request is not stalled.

Requests with an `Idempotency-Key` hold one connection for their whole transaction while they
await work on the thread pool; without a cap on how many may do so at once, 60 of them took
every pooled connection while the threads that would finish them waited for one.
Now such requests wait for one of a bounded number of slots, and a request that cannot get a
slot or a connection within `MEMWARDEN_DB_POOL_TIMEOUT_SECONDS` is shed with 503 `unavailable`
and `Retry-After`."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest

from tests.harness import start_server, stop_server, unique

pytestmark = pytest.mark.slow

CONCURRENT = 200
POOL_TIMEOUT = 5
# Every request must be answered within this: the pool wait bound plus the time the slowest
# admitted request takes on a loaded 2-core machine. Before the fix, requests waited 30 s for a
# connection and then answered 500.
ANSWER_BOUND_SECONDS = 25


def _requests(tenant_key: str, n: int) -> list[tuple[str, str, dict]]:
    """A mixed burst: half idempotent writes, the rest plain writes and reads."""
    auth = {"Authorization": f"Bearer {tenant_key}"}
    shaped = []
    for i in range(n):
        body = {"agent_id": f"agent-{i % 4}", "type": "semantic", "content": f"Load fact {i}: item {uuid.uuid4().hex}."}
        if i % 2 == 0:
            shaped.append(("POST", "/v1/memories/remember",
                           {"headers": {**auth, "Idempotency-Key": uuid.uuid4().hex}, "json": body}))
        elif i % 6 == 1:
            shaped.append(("POST", "/v1/memories/remember", {"headers": auth, "json": body}))
        elif i % 6 == 3:
            shaped.append(("POST", "/v1/memories/recall",
                           {"headers": auth, "json": {"agent_id": f"agent-{i % 4}", "query": "load fact item"}}))
        else:
            shaped.append(("GET", "/v1/memories", {"headers": auth, "params": {"agent_id": f"agent-{i % 4}"}}))
    return shaped


async def _burst(base_url: str, shaped, bystander_key: str):
    limits = httpx.Limits(max_connections=CONCURRENT + 10, max_keepalive_connections=CONCURRENT + 10)
    async with httpx.AsyncClient(base_url=base_url, timeout=120, limits=limits) as http:
        async def one(method, path, kwargs):
            started = time.monotonic()
            response = await http.request(method, path, **kwargs)
            return response, time.monotonic() - started

        async def bystander():
            await asyncio.sleep(0.5)  # while the burst is in flight
            return await one("GET", "/v1/whoami", {"headers": {"Authorization": f"Bearer {bystander_key}"}})

        results = await asyncio.gather(*(one(m, p, k) for m, p, k in shaped), bystander())
        return results[:-1], results[-1]


def test_a_burst_with_idempotency_keys_is_answered_without_500s_or_pool_stalls(settings, committed_ctx):
    from app.services.tenancy.apikeys import create_key
    from app.services.tenancy.tenants import create_tenant

    actor = {"kind": "test", "id": "pytest"}
    busy = create_tenant(committed_ctx, name=unique("busy"), actor=actor)
    other = create_tenant(committed_ctx, name=unique("other"), actor=actor)
    busy_key = create_key(committed_ctx, tenant_id=busy.id, scopes="memory:read,memory:write", agents="*",
                          actor=actor).token
    other_key = create_key(committed_ctx, tenant_id=other.id, scopes="memory:read", agents="*", actor=actor).token

    proc, base_url = start_server(settings, MEMWARDEN_DB_POOL_TIMEOUT_SECONDS=str(POOL_TIMEOUT))
    try:
        for round_no in range(2):
            results, (bystander, bystander_took) = asyncio.run(_burst(base_url, _requests(busy_key, CONCURRENT),
                                                                      other_key))
            codes = [r.status_code for r, _ in results]
            slowest = max(took for _, took in results)
            print(f"round {round_no}: {dict(sorted((c, codes.count(c)) for c in set(codes)))}, slowest {slowest:.1f} s, "
                  f"another tenant's whoami {bystander_took:.2f} s")
            assert 500 not in codes, (round_no, [r.text for r, _ in results if r.status_code >= 500][:3])
            # 202: screening may stage a write for review, a normal answer too
            assert set(codes) <= {200, 201, 202, 503}, sorted(set(codes))
            for response, _ in results:
                if response.status_code == 503:  # shed load, in the envelope, with a hint when to retry
                    assert response.json()["error"]["code"] == "unavailable"
                    assert int(response.headers["Retry-After"]) >= 1
            assert slowest < ANSWER_BOUND_SECONDS, (round_no, slowest)
            assert bystander.status_code in {200, 503}
            assert bystander_took < ANSWER_BOUND_SECONDS
            # Most of the burst is served, not shed.
            assert codes.count(503) < CONCURRENT // 2, codes.count(503)
    finally:
        stop_server(proc)
