"""OpenWOP memory surfaces (contract §7; RFC 0004 memory layer, RFC 0057 write attribution):
attribution events on the SSE stream, opaque refs, run-start snapshot reads, webhooks.
Test names follow OpenWOP's conformance scenarios where one exists."""

import hashlib
import hmac
import json
import time
from datetime import timedelta

import pytest
from sqlalchemy import text

from app.core.timefmt import format_ts, utcnow
from app.services.events import webhooks
from tests.harness import bearer
from tests.http_receiver import Receiver
from tests.schema_check import assert_error, assert_schema
from tests.sse import parse_sse

FORGED_REF = "mref_" + "A" * 32


@pytest.fixture
def agent(make_key):
    return bearer(make_key(scopes="memory:read,memory:write,events:read"))


def _events(client, headers, after=None, **params):
    """The stream's backlog (`once=1`), each event checked against the `event` schema."""
    query = {"once": "1", **params}
    if after is not None:
        query["after"] = str(after)
    response = client.get("/v1/events", params=query, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.text)
    for event in events:
        assert_schema("event", event)
    return events


def _written(events):
    return [e for e in events if e["type"] == "memory.written"]


def _remember(client, headers, content, expect=201, **extra):
    body = {"agent_id": "agent-a", "type": "semantic", "content": content, **extra}
    response = client.post("/v1/memories/remember", json=body, headers=headers)
    assert response.status_code == expect, response.text
    return response.json()


def _ref(client, headers, agent_id="agent-a", user_id=None):
    params = {"agent_id": agent_id, **({"user_id": user_id} if user_id else {})}
    response = client.get("/v1/refs", params=params, headers=headers)
    assert response.status_code == 200, response.text
    return assert_schema("ref.response", response.json())["memoryRef"]


# --- memory attribution (RFC 0057) ---------------------------------------------------------------

def test_memory_attribution_shape(client, agent):
    written = _remember(client, agent, "Quentin prefers aisle seats.", user_id="u-1", node_id="node-7",
                        run_id="run-ext-1", tags=["travel", "seating"])
    events = _written(_events(client, agent))
    assert len(events) == 1
    data = events[0]["data"]
    assert set(data) <= {"memoryRef", "memoryId", "nodeId", "agentId", "tags"}
    assert data == {"memoryRef": _ref(client, agent, user_id="u-1"), "memoryId": written["id"],
                    "nodeId": "node-7", "agentId": "agent-a", "tags": ["travel", "seating"]}
    # Without a node or tags those keys are simply absent.
    _remember(client, agent, "Quentin lives in Lyon.")
    plain = _written(_events(client, agent))[-1]["data"]
    assert set(plain) == {"memoryRef", "memoryId", "agentId"}
    assert plain["memoryRef"] == _ref(client, agent) != data["memoryRef"]


def test_memory_attribution_no_content(client, ctx, tenant, agent):
    secret_words = "Rosalind's locker combination is 31-07-44"
    _remember(client, agent, secret_words, metadata={"note": "zebra-umbrella"}, tags=["lockers"])
    ref = _ref(client, agent)
    posted = client.post(f"/v1/refs/{ref}/entries", json={"content": "Rosalind parks on level 3 (ultraviolet).",
                                                          "metadata": {"hint": "quasar-mitten"}}, headers=agent)
    assert posted.status_code == 201, posted.text
    raw = client.get("/v1/events", params={"once": "1"}, headers=agent).text
    with ctx.db.sessions() as session:
        stored = json.dumps(session.execute(text("SELECT payload FROM events WHERE tenant_id = :t"),
                                            {"t": tenant.id}).scalars().all())
    assert len(_written(parse_sse(raw))) == 2
    for haystack in (raw, stored):
        for needle in ("Rosalind", "31-07-44", "zebra-umbrella", "ultraviolet", "quasar-mitten", "content"):
            assert needle not in haystack


def test_memory_attribution_tenant_scoped(client, agent, make_key, make_tenant):
    other = make_tenant()
    other_key = bearer(make_key(scopes="memory:read,memory:write,events:read", tenant_id=other.id))
    _remember(client, agent, "Tenant one fact.")
    assert _written(_events(client, other_key)) == []
    _remember(client, other_key, "Tenant two fact.")
    mine, theirs = _events(client, agent), _events(client, other_key)
    assert len(_written(mine)) == 1 and len(_written(theirs)) == 1
    assert mine[0]["data"]["memoryRef"] != theirs[0]["data"]["memoryRef"]
    # Ids are per tenant: each tenant's log starts at 1.
    assert mine[0]["id"] == theirs[0]["id"] == 1
    # Within a tenant, a key sees only events about agents it may act for.
    _remember(client, agent, "Agent b fact.", agent_id="agent-b")
    only_a = bearer(make_key(scopes="events:read", agents="agent-a"))
    assert [e["data"]["agentId"] for e in _written(_events(client, only_a))] == ["agent-a"]


def test_memory_attribution_emits_on_write(client, agent, reviewer):
    live = _remember(client, agent, "Ulrich drinks green tea.")
    assert [e["data"]["memoryId"] for e in _written(_events(client, agent))] == [live["id"]]

    staged = _remember(client, agent, "Ulrich is allergic to peanuts.", expect=202, approval_required=True,
                       node_id="n-2")
    after_stage = _events(client, agent)
    assert [e["type"] for e in after_stage][-1] == "change.proposed"
    assert after_stage[-1]["data"] == {"changeId": staged["change_id"], "operation": "remember",
                                       "agentId": "agent-a", "memoryIds": [staged["id"]]}
    assert len(_written(after_stage)) == 1  # nothing for the staged write yet

    approved = client.post(f"/v1/changes/{staged['change_id']}/approve", json={}, headers=reviewer)
    assert approved.status_code == 200, approved.text
    after_approve = _events(client, agent, after=after_stage[-1]["id"])
    assert [e["type"] for e in after_approve] == ["memory.written", "change.approved"]
    assert after_approve[0]["data"]["memoryId"] == staged["id"] and after_approve[0]["data"]["nodeId"] == "n-2"
    # Once: a second decision is refused and emits nothing.
    assert client.post(f"/v1/changes/{staged['change_id']}/approve", json={}, headers=reviewer).status_code == 409
    everything = _events(client, agent)
    assert [e["data"]["memoryId"] for e in _written(everything)] == [live["id"], staged["id"]]

    rejected = _remember(client, agent, "Ulrich hates tea.", expect=202, approval_required=True)
    client.post(f"/v1/changes/{rejected['change_id']}/reject", json={"reason": "contradiction"}, headers=reviewer)
    tail = _events(client, agent, after=everything[-1]["id"])
    assert [e["type"] for e in tail] == ["change.proposed", "change.rejected"]

    # A merge rewrites the canonical memory: one write event for it.
    dup = _remember(client, agent, "Ulrich likes green tea.")
    merged = client.post("/v1/memories/merge", json={"agent_id": "agent-a", "canonical": live["id"],
                                                     "duplicates": [dup["id"]]}, headers=agent)
    assert merged.status_code == 200, merged.text
    last = _events(client, agent)[-1]
    assert last["type"] == "memory.written" and last["data"]["memoryId"] == live["id"]


def test_memory_attribution_replay_stable(client, agent):
    for i in range(5):
        _remember(client, agent, f"Replay fact number {i}.", node_id=f"n{i}")
    first, second = _events(client, agent), _events(client, agent)
    assert first == second and len(first) == 5
    assert [e["id"] for e in first] == sorted({e["id"] for e in first})
    # Resuming after an id returns exactly the rest, by `after` or by Last-Event-ID (which wins).
    assert _events(client, agent, after=first[1]["id"]) == first[2:]
    resumed = client.get("/v1/events", params={"once": "1", "after": "0"},
                         headers={**agent, "Last-Event-ID": str(first[3]["id"])})
    assert parse_sse(resumed.text) == first[4:]
    assert _events(client, agent, limit="2") == first[:2]


def test_event_stream_needs_its_scope_and_a_sane_cursor(client, make_key, agent):
    memory_only = bearer(make_key(scopes="memory:read,memory:write"))
    assert_error(client.get("/v1/events", params={"once": "1"}, headers=memory_only), 403, "forbidden")
    assert_error(client.get("/v1/events", params={"once": "1"}, headers={**agent, "Last-Event-ID": "abc"}),
                 422, "validation_error")
    assert_error(client.get("/v1/events", params={"after": "-1"}, headers=agent), 422, "validation_error")
    assert_error(client.get("/v1/events", params={"bogus": "1"}, headers=agent), 422, "validation_error")


# --- refs (RFC 0004) -----------------------------------------------------------------------------

def test_refs_are_stable_opaque_and_per_scope(client, agent):
    ref = _ref(client, agent, user_id="u-1")
    assert ref == _ref(client, agent, user_id="u-1")
    assert ref.startswith("mref_") and "agent-a" not in ref and "u-1" not in ref
    assert len({ref, _ref(client, agent, user_id="u-2"), _ref(client, agent), _ref(client, agent, "agent-b")}) == 4


def test_ref_entries_write_read_delete(client, agent):
    ref = _ref(client, agent, user_id="u-9")
    expires = format_ts(utcnow() + timedelta(days=2))
    posted = client.post(f"/v1/refs/{ref}/entries", json={"content": "Vera takes the 8:15 train.", "tags": ["commute"],
                                                          "expiresAt": expires, "nodeId": "plan-1"}, headers=agent)
    assert posted.status_code == 201, posted.text
    entry = assert_schema("ref-entry", posted.json())
    assert entry["content"] == "Vera takes the 8:15 train." and entry["tags"] == ["commute"]
    assert entry["expiresAt"] == expires
    listed = assert_schema("ref-entries.response", client.get(f"/v1/refs/{ref}/entries", headers=agent).json())
    assert listed == {"entries": [entry], "nextCursor": None}
    one = client.get(f"/v1/refs/{ref}/entries/{entry['id']}", headers=agent)
    assert assert_schema("ref-entry", one.json()) == entry
    # The write went through remember: it is a user-scoped semantic memory of agent-a.
    memory = client.get(f"/v1/memories/{entry['id']}", headers=agent).json()
    assert (memory["agent_id"], memory["user_id"], memory["type"]) == ("agent-a", "u-9", "semantic")
    # The user's ref does not see another user's entries.
    other = client.post(f"/v1/refs/{_ref(client, agent, user_id='u-10')}/entries", json={"content": "Other."},
                        headers=agent).json()
    assert_error(client.get(f"/v1/refs/{ref}/entries/{other['id']}", headers=agent), 404, "not_found")
    assert_error(client.delete(f"/v1/refs/{ref}/entries/{other['id']}", headers=agent), 404, "not_found")

    deleted = client.delete(f"/v1/refs/{ref}/entries/{entry['id']}", headers=agent)
    assert assert_schema("delete.response", deleted.json()) == {"deleted": True, "id": entry["id"]}
    assert_error(client.get(f"/v1/refs/{ref}/entries/{entry['id']}", headers=agent), 404, "not_found")
    assert client.get(f"/v1/refs/{ref}/entries", headers=agent).json()["entries"] == []


def test_ref_write_follows_redaction_and_review(client, agent, reviewer):
    ref = _ref(client, agent)
    redacted = client.post(f"/v1/refs/{ref}/entries",
                           json={"content": "deploy key AKIAIOSFODNN7EXAMPLE for prod"}, headers=agent)
    assert redacted.status_code == 201 and "AKIAIOSFODNN7EXAMPLE" not in redacted.text
    staged = client.post(f"/v1/refs/{ref}/entries", json={"content": "Wim is vegetarian.", "approvalRequired": True},
                         headers=agent)
    assert staged.status_code == 202, staged.text
    body = assert_schema("ref-pending.response", staged.json())

    def ids():
        return [e["id"] for e in client.get(f"/v1/refs/{ref}/entries", headers=agent).json()["entries"]]

    assert body["id"] not in ids()
    assert_error(client.get(f"/v1/refs/{ref}/entries/{body['id']}", headers=agent), 404, "not_found")
    client.post(f"/v1/changes/{body['changeId']}/approve", json={}, headers=reviewer)
    assert body["id"] in ids()


def test_ref_isolation_forged_foreign_and_malformed(client, agent, make_key, make_tenant):
    mine = _ref(client, agent)
    entry = client.post(f"/v1/refs/{mine}/entries", json={"content": "Mine only."}, headers=agent).json()
    other = make_tenant()
    foreign_key = bearer(make_key(scopes="memory:read,memory:write", tenant_id=other.id))
    theirs = _ref(client, foreign_key)
    for key, ref in ((foreign_key, mine), (agent, theirs), (agent, FORGED_REF), (agent, "mref_short"),
                     (agent, "not-a-ref"), (agent, mine.upper())):
        assert_error(client.get(f"/v1/refs/{ref}/entries", headers=key), 404, "not_found")
        assert_error(client.post(f"/v1/refs/{ref}/entries", json={"content": "x"}, headers=key), 404, "not_found")
        assert_error(client.get(f"/v1/refs/{ref}/entries/{entry['id']}", headers=key), 404, "not_found")
        assert_error(client.delete(f"/v1/refs/{ref}/entries/{entry['id']}", headers=key), 404, "not_found")
    # Same tenant, but the key may not act for the ref's agent: as if it did not exist.
    b_only = bearer(make_key(scopes="memory:read,memory:write", agents="agent-b"))
    assert_error(client.get(f"/v1/refs/{mine}/entries", headers=b_only), 404, "not_found")
    assert_error(client.get("/v1/refs", params={"agent_id": "agent-a"}, headers=b_only), 403, "forbidden")
    assert client.get(f"/v1/refs/{mine}/entries", headers=agent).json()["entries"][0]["id"] == entry["id"]


def test_run_snapshot_reads(client, ctx, agent):
    ref = _ref(client, agent)

    def post(content, **extra):
        return client.post(f"/v1/refs/{ref}/entries", json={"content": content, **extra}, headers=agent).json()

    before = post("Xena started at the Oslo office.")
    time.sleep(0.01)
    run = client.post("/v1/runs", json={"agent_id": "agent-a"}, headers=agent)
    assert run.status_code == 201, run.text
    run = assert_schema("run.response", run.json())
    time.sleep(0.01)
    during = post("Xena moved to the Bergen office.", runId=run["runId"], nodeId="step-3")
    client.delete(f"/v1/refs/{ref}/entries/{before['id']}", headers=agent)


    def ids(**query):
        return [e["id"] for e in client.get(f"/v1/refs/{ref}/entries", params=query, headers=agent).json()["entries"]]

    assert ids() == [during["id"]]
    assert ids(run_id=run["runId"]) == [before["id"]]  # deleted after the run started: still seen
    assert ids(snapshot=run["snapshot"]) == [before["id"]]
    got = client.get(f"/v1/refs/{ref}/entries/{before['id']}", params={"run_id": run["runId"]}, headers=agent)
    assert got.status_code == 200 and got.json()["id"] == before["id"]
    with ctx.db.sessions() as session:
        row = session.execute(text("SELECT run_id, node_id FROM memories WHERE id = :i"), {"i": during["id"]}).one()
    assert tuple(row) == (run["runId"], "step-3")
    assert_error(client.get(f"/v1/refs/{ref}/entries", params={"run_id": "run_" + "0" * 26}, headers=agent),
                 404, "not_found")
    assert_error(client.get(f"/v1/refs/{ref}/entries", params={"run_id": run["runId"], "snapshot": run["snapshot"]},
                            headers=agent), 422, "validation_error")
    assert_error(client.get(f"/v1/refs/{ref}/entries", params={"snapshot": "yesterday"}, headers=agent),
                 422, "validation_error")


# --- webhooks ------------------------------------------------------------------------------------

@pytest.fixture
def receiver():
    r = Receiver([500])
    yield r
    r.close()


def test_webhook_signed_delivery_with_retry_and_log(client, ctx, agent, receiver):
    created = client.post("/v1/webhooks", json={"url": receiver.url, "events": ["memory.written"]}, headers=agent)
    assert created.status_code == 201, created.text
    hook = assert_schema("webhook.response", created.json())
    secret = hook.pop("secret")
    listed = client.get("/v1/webhooks", headers=agent)
    assert assert_schema("webhooks.response", listed.json())["items"] == [hook] and secret not in listed.text

    written = _remember(client, agent, "Yusuf's favourite band is Ghost Orchid.", tags=["music"])
    _remember(client, agent, "Staged, never delivered.", expect=202, approval_required=True)
    assert webhooks.deliver_due(ctx) == 1  # the receiver answers 500 first
    log = assert_schema("webhook-deliveries.response",
                        client.get(f"/v1/webhooks/{hook['id']}/deliveries", headers=agent).json())["items"]
    assert [(d["status"], d["attempts"], d["statusCode"]) for d in log] == [("pending", 1, 500)]
    assert webhooks.deliver_due(ctx) == 0  # backing off
    assert webhooks.deliver_due(ctx, now=utcnow() + timedelta(seconds=webhooks.backoff_seconds(1) + 1)) == 1
    log = client.get(f"/v1/webhooks/{hook['id']}/deliveries", headers=agent).json()["items"]
    assert [(d["status"], d["attempts"], d["statusCode"]) for d in log] == [("delivered", 2, 204)]

    assert len(receiver.requests) == 2 and receiver.requests[0][1] == receiver.requests[1][1]
    headers, body = receiver.requests[-1]
    assert headers["x-memwarden-signature"] == "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    event = assert_schema("event", json.loads(body))
    assert event["type"] == "memory.written" and event["data"]["memoryId"] == written["id"]
    assert b"Ghost Orchid" not in body
    assert event == {**_written(_events(client, agent))[0], "createdAt": event["createdAt"]}

    deleted = client.delete(f"/v1/webhooks/{hook['id']}", headers=agent)
    assert assert_schema("webhook-delete.response", deleted.json())["deleted"] is True
    assert_error(client.get(f"/v1/webhooks/{hook['id']}/deliveries", headers=agent), 404, "not_found")


def test_webhook_gives_up_after_the_last_attempt_and_rejects_bad_urls(client, ctx, agent, make_key):
    dead = Receiver([503] * webhooks.MAX_ATTEMPTS)
    try:
        hook = client.post("/v1/webhooks", json={"url": dead.url}, headers=agent).json()
        _remember(client, agent, "Zofia plays chess.")
        later = utcnow()
        for _ in range(webhooks.MAX_ATTEMPTS):
            later += timedelta(hours=2)
            webhooks.deliver_due(ctx, now=later)
        log = client.get(f"/v1/webhooks/{hook['id']}/deliveries", headers=agent).json()["items"]
        assert [(d["status"], d["attempts"]) for d in log] == [("failed", webhooks.MAX_ATTEMPTS)]
        assert webhooks.deliver_due(ctx, now=later + timedelta(days=1)) == 0
    finally:
        dead.close()
    for url in ("ftp://example.com/x", "not a url", "javascript:alert(1)", "http://", "http://[::1"):
        assert_error(client.post("/v1/webhooks", json={"url": url}, headers=agent), 422, "validation_error")
    memory_only = bearer(make_key(scopes="memory:read,memory:write"))
    assert_error(client.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/x"}, headers=memory_only),
                 403, "forbidden")


def test_event_stream_keeps_alive_and_ends_when_the_key_is_revoked(ctx, make_key, monkeypatch):
    import asyncio

    from app.api import events as events_api
    from app.services.tenancy.apikeys import authenticate, revoke_key

    monkeypatch.setattr(events_api, "HEARTBEAT_SECONDS", 0.2)
    monkeypatch.setattr(events_api, "POLL_SECONDS", 0.05)
    principal = authenticate(ctx, make_key(scopes="events:read"))

    async def consume():
        chunks = []
        async for chunk in events_api._stream(ctx, None, principal, after=0, limit=None, once=False):
            chunks.append(chunk)
            if len(chunks) == 2:  # the stream is suspended here, so the database is ours
                revoke_key(ctx, tenant_id=principal.tenant_id, key_id=principal.key_id,
                           actor={"kind": "test", "id": "pytest"})
        return chunks

    chunks = asyncio.run(asyncio.wait_for(consume(), 10))
    assert chunks == [": keepalive\n\n"] * 2  # then the revoked key's stream ended by itself


def test_webhooks_to_internal_addresses_are_refused_by_default(ctx, make_key):
    """No SSRF: a tenant's key cannot point deliveries at the operator's loopback or private network."""
    from starlette.testclient import TestClient

    from app.main import create_app
    from app.services.runtime.context import AppContext

    strict_ctx = AppContext(ctx.settings.with_changes(webhook_allow_private=False), ctx.db)
    strict = create_app(strict_ctx.settings, ctx=strict_ctx)
    headers = {"Authorization": f"Bearer {make_key(scopes='events:read')}"}
    with TestClient(strict) as client:
        for url in ("http://127.0.0.1:9/hook", "http://10.0.0.5/hook", "http://[::1]/hook",
                    "http://169.254.169.254/latest/meta-data"):
            response = client.post("/v1/webhooks", json={"url": url}, headers=headers)
            assert response.status_code == 422, (url, response.text)
            assert "non-public" in response.json()["error"]["message"]
