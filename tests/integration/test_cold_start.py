"""The first request after a start, against a freshly started `memwarden serve`, never answers 500.

The rest of the suite runs against warm processes (the session's live server has served hundreds
of requests before most tests run), so a lazy initialisation that races, or that only fails before
something else has warmed it, is invisible there. Each case here starts its own server and sends
its request first, as an attacker probing a server right after a deploy would — several at once,
since a burst is what makes a lazy loader race (passlib's argon2 backend did: the first sign-ins
after a start answered 500 and, by failing only for unknown accounts, told which names exist).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
from typing import Callable, Iterator

import httpx
import pytest

from app.services.tenancy.apikeys import create_key
from app.services.tenancy.tenants import create_tenant
from sqlalchemy import text

from app.services.tenancy.users import create_user
from tests.harness import start_server, stop_server, unique

ACTOR = {"kind": "test", "id": "pytest"}
PASSWORD = "correct horse battery"
BURST = 6
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world(committed_ctx) -> dict[str, str]:
    tenant = create_tenant(committed_ctx, name=unique("cold"), actor=ACTOR)
    key = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read,memory:write,audit:read",
                     agents="*", actor=ACTOR).token
    user = create_user(committed_ctx, username=unique("cold-off"), password=PASSWORD, tenant_id=tenant.id,
                       role="reviewer", actor=ACTOR)
    with committed_ctx.db.sessions.begin() as session:  # no service disables an account; an admin's SQL does
        session.execute(text("UPDATE users SET disabled_at = now() WHERE id = :u"), {"u": user.id})
    reviewer = create_user(committed_ctx, username=unique("cold-on"), password=PASSWORD, tenant_id=tenant.id,
                           role="reviewer", actor=ACTOR)
    return {"key": key, "disabled": user.username, "reviewer": reviewer.username}


@contextlib.contextmanager
def fresh_server(settings) -> Iterator[str]:
    proc, base_url = start_server(settings)
    try:
        yield base_url
    finally:
        stop_server(proc)


def _burst(send: Callable[[int], httpx.Response]) -> list[httpx.Response]:
    with concurrent.futures.ThreadPoolExecutor(BURST) as pool:
        return list(pool.map(send, range(BURST)))


def _sign_in(base_url: str, username: str, password: str) -> httpx.Response:
    with httpx.Client(base_url=base_url, timeout=30) as http:
        page = http.get("/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        return http.post("/login", data={"username": username, "password": password, "next": "/review",
                                         "csrf_token": token}, follow_redirects=False)


def test_first_sign_ins_after_a_start_refuse_unknown_disabled_and_over_long_alike(settings, world):
    attempts = [(unique("nobody"), PASSWORD), (world["disabled"], PASSWORD), (world["reviewer"], "x" * 5000),
                (unique("nobody"), "x" * 5000), (world["reviewer"], "wrong password here"), (unique("nobody"), "")]
    with fresh_server(settings) as base_url:
        answers = _burst(lambda i: _sign_in(base_url, *attempts[i]))
        good = _sign_in(base_url, world["reviewer"], PASSWORD)
    statuses = [a.status_code for a in answers]
    # Every refusal is the same answer: the page again with the one message, whoever the name is.
    assert all(status < 500 for status in statuses), statuses
    assert len(set(statuses)) == 1 and statuses[0] in (400, 401, 422), statuses
    assert all("wrong username or password" in a.text for a in answers)
    assert good.status_code == 303 and good.headers["location"].endswith("/review")


def _remember(base_url: str, key: str, i: int) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/memories/remember", headers={"Authorization": f"Bearer {key}"}, timeout=60,
                      json={"agent_id": "cold-agent", "type": "semantic", "content": f"Cold fact number {i}."})


def test_first_remembers_after_a_start_are_stored(settings, world):
    with fresh_server(settings) as base_url:
        answers = _burst(lambda i: _remember(base_url, world["key"], i))
    assert [a.status_code for a in answers] == [201] * BURST, [a.text[:200] for a in answers]
    assert all(a.json()["status"] == "live" for a in answers)


def test_first_recalls_after_a_start_answer(settings, world, live_server):
    # Seeded through the session's warm server (same database): only the recalls must meet a cold one.
    seeded = {_remember(live_server, world["key"], i).json()["id"] for i in range(2)}
    with fresh_server(settings) as base_url:
        answers = _burst(lambda i: httpx.post(
            f"{base_url}/v1/memories/recall", headers={"Authorization": f"Bearer {world['key']}"}, timeout=60,
            json={"agent_id": "cold-agent", "query": "cold fact", "k": 3}))
    assert [a.status_code for a in answers] == [200] * BURST, [a.text[:200] for a in answers]
    assert all(seeded & {hit["id"] for hit in a.json()["hits"]} for a in answers)


def test_first_audit_exports_after_a_start_answer(settings, world):
    with fresh_server(settings) as base_url:
        answers = _burst(lambda i: httpx.get(f"{base_url}/v1/audit/export",
                                             headers={"Authorization": f"Bearer {world['key']}"}, timeout=60))
    assert [a.status_code for a in answers] == [200] * BURST, [a.text[:200] for a in answers]
    assert all(a.text.strip() and a.text.count("\n") >= 1 for a in answers)


def _mcp(base_url: str, key: str, i: int) -> httpx.Response:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {key}"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "cold-probe", "version": "1"}}}
    first = httpx.post(f"{base_url}/mcp", json=init, headers=headers, timeout=60)
    if first.status_code != 200:
        return first
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "recall", "arguments": {"agent_id": "cold-agent", "query": f"cold {i}", "k": 2}}}
    session = first.headers.get("mcp-session-id")
    return httpx.post(f"{base_url}/mcp", json=call, timeout=60,
                      headers={**headers, **({"mcp-session-id": session} if session else {})})


def _rpc_result(response: httpx.Response) -> dict:
    """The JSON-RPC message of a streamable-HTTP answer (plain JSON or one SSE `data:` line)."""
    import json

    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return response.json()


def test_first_mcp_calls_after_a_start_answer(settings, world):
    with fresh_server(settings) as base_url:
        answers = _burst(lambda i: _mcp(base_url, world["key"], i))
    assert [a.status_code for a in answers] == [200] * BURST, [a.text[:300] for a in answers]
    for answer in answers:
        message = _rpc_result(answer)
        assert "error" not in message, message
        assert message["result"]["isError"] is False, message
        assert isinstance(message["result"]["structuredContent"]["hits"], list)
