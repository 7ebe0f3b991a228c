"""The client's retry rules, with the server's answers scripted (a real server will not answer
429 or 503 on demand): which calls retry, how long they wait, which key they resend."""

from __future__ import annotations

import json

import httpx
import pytest

from memwarden import errors
from memwarden.client import Client, RetryPolicy


def scripted(*answers: httpx.Response):
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0)

    return httpx.MockTransport(handler), seen


def envelope(status: int, code: str, headers: dict | None = None) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": code, "details": {"x": 1}}},
                          headers=headers)


ENTRY = {"id": "mem_00000000000000000000000000", "agent_id": "a", "user_id": None, "type": "semantic",
         "content": "c", "metadata": {}, "tags": [], "confidence": 1.0, "source": None,
         "created_at": "2026-11-22T10:00:00.000000Z", "updated_at": "2026-11-22T10:00:00.000000Z",
         "expires_at": None, "status": "live"}


def client(transport, sleeps, retries=3) -> Client:
    mw = Client("http://memwarden.test", "mw_token", transport=transport, retry=RetryPolicy(max_retries=retries))
    mw._sleep = sleeps.append
    return mw


def test_write_retries_on_429_and_503_with_one_key_and_honours_retry_after():
    transport, seen = scripted(envelope(429, "rate_limited", {"Retry-After": "7"}), envelope(503, "unavailable"),
                               httpx.Response(201, json={"id": ENTRY["id"], "status": "live", "memory": ENTRY,
                                                         "redactions": []}))
    sleeps: list[float] = []
    result = client(transport, sleeps).remember(agent_id="a", content="c")
    assert result.memory.id == ENTRY["id"]
    assert len({r.headers["idempotency-key"] for r in seen}) == 1 and len(seen) == 3
    assert sleeps[0] >= 7 and len(sleeps) == 2
    assert json.loads(seen[0].content) == {"agent_id": "a", "type": "semantic", "content": "c"}
    assert seen[0].headers["authorization"] == "Bearer mw_token"


def test_gives_up_after_max_retries_with_the_typed_error():
    transport, seen = scripted(*[envelope(429, "rate_limited", {"Retry-After": "1"})] * 3)
    sleeps: list[float] = []
    with pytest.raises(errors.RateLimited) as caught:
        client(transport, sleeps, retries=2).get(ENTRY["id"])
    assert caught.value.retry_after == 1.0 and caught.value.details == {"x": 1} and len(seen) == 3


def test_client_errors_are_not_retried_and_map_by_code():
    for status, code, cls in [(422, "validation_error", errors.ValidationError),
                              (422, "idempotency_key_reused", errors.IdempotencyKeyReused),
                              (422, "secret_leakage", errors.SecretLeakage), (403, "policy_denied", errors.PolicyDenied),
                              (409, "conflict", errors.Conflict), (404, "not_found", errors.NotFound),
                              (418, "teapot", errors.MemwardenError)]:
        transport, seen = scripted(envelope(status, code))
        with pytest.raises(cls) as caught:
            client(transport, []).remember(agent_id="a", content="c")
        assert caught.value.code == code and caught.value.status == status and len(seen) == 1


def test_reads_send_no_idempotency_key_and_each_write_gets_its_own():
    transport, seen = scripted(httpx.Response(200, json={"hits": [], "latency_ms": 1}),
                               httpx.Response(200, json={"status": "done", "forgotten": []}),
                               httpx.Response(200, json={"status": "done", "forgotten": []}))
    mw = client(transport, [])
    mw.recall(agent_id="a", query="q")
    mw.forget(agent_id="a", ids=["x"])
    mw.forget(agent_id="a", ids=["x"])
    assert "idempotency-key" not in seen[0].headers
    assert seen[1].headers["idempotency-key"] != seen[2].headers["idempotency-key"]
