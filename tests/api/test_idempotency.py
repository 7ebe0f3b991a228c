"""`Idempotency-Key` on `/v1` writes and decisions, against the real PostgreSQL: a retry replays
the first answer and writes nothing again; a reused key with another request is refused."""

import json

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from app.services.runtime import idempotency
from tests.harness import bearer, unique
from tests.schema_check import assert_error

REMEMBER = "/v1/memories/remember"


def _with_key(headers, key):
    return {**headers, "Idempotency-Key": key}


def _count(ctx, sql, **params):
    with ctx.db.sessions() as session:
        return session.execute(text(sql), params).scalar_one()


def _memories(ctx, tenant_id):
    return _count(ctx, "SELECT count(*) FROM memories WHERE tenant_id = :t", t=tenant_id)


def _audit(ctx, tenant_id, event_type):
    return _count(ctx, "SELECT count(*) FROM audit_entries WHERE tenant_id = :t AND event_type = :e",
                  t=tenant_id, e=event_type)


def _post_raw(client, path, body: dict, headers, *, sort_keys=False, indent=None):
    """POST a JSON body serialised as given (a retry may re-serialise the same object differently)."""
    raw = json.dumps(body, sort_keys=sort_keys, indent=indent)
    return client.post(path, content=raw, headers={**headers, "Content-Type": "application/json"})


def test_retried_remember_returns_the_first_answer_and_writes_once(client, ctx, tenant, agent):
    key = unique("remember")
    body = {"agent_id": "agent-a", "type": "semantic", "content": "Ana prefers tea.", "tags": ["drinks"]}
    first = _post_raw(client, REMEMBER, body, _with_key(agent, key))
    assert first.status_code == 201, first.text
    assert "idempotent-replayed" not in first.headers
    # Same object, other key order and whitespace: still the same request.
    retry = _post_raw(client, REMEMBER, body, _with_key(agent, key), sort_keys=True, indent=2)
    assert retry.status_code == 201
    assert retry.content == first.content
    assert retry.headers["content-type"] == first.headers["content-type"]
    assert retry.headers["idempotent-replayed"] == "true"
    assert _memories(ctx, tenant.id) == 1
    assert _audit(ctx, tenant.id, "memory.remembered") == 1
    # The answer was stored with the write, in its tenant.
    assert _count(ctx, "SELECT count(*) FROM idempotency_keys WHERE tenant_id = :t AND key = :k",
                  t=tenant.id, k=key) == 1
    # Without the key, the same body is a new write.
    assert client.post(REMEMBER, json=body, headers=agent).status_code == 201
    assert _memories(ctx, tenant.id) == 2


def test_the_answer_commits_with_the_write_or_neither_does(client, ctx, tenant, agent, monkeypatch):
    """If storing the answer fails, the write is undone too: a committed write always has its
    stored answer, so a retry after a crash between commit and reply can only replay."""
    def connection_lost(*args, **kwargs):
        raise OperationalError("INSERT INTO idempotency_keys", {}, Exception("server closed the connection"))

    monkeypatch.setattr(idempotency, "store", connection_lost)
    body = {"agent_id": "agent-a", "type": "semantic", "content": "Hal speaks Finnish."}
    assert_error(client.post(REMEMBER, json=body, headers=_with_key(agent, unique("lost"))), 503, "unavailable")
    assert _memories(ctx, tenant.id) == 0
    assert _audit(ctx, tenant.id, "memory.remembered") == 0


def test_same_key_with_another_body_or_path_is_refused_and_changes_nothing(client, ctx, tenant, agent):
    key = unique("reuse")
    body = {"agent_id": "agent-a", "type": "semantic", "content": "Ben lives in Porto."}
    assert client.post(REMEMBER, json=body, headers=_with_key(agent, key)).status_code == 201
    other = client.post(REMEMBER, json={**body, "content": "Ben lives in Lisbon."}, headers=_with_key(agent, key))
    error = assert_error(other, 422, "idempotency_key_reused")
    assert error["details"][0]["path"] == "/headers/Idempotency-Key"
    forget = client.post("/v1/memories/forget", json={"agent_id": "agent-a", "filter": {"x": "y"}},
                         headers=_with_key(agent, key))
    assert_error(forget, 422, "idempotency_key_reused")
    assert _memories(ctx, tenant.id) == 1
    assert _audit(ctx, tenant.id, "memory.remembered") == 1


def test_same_key_from_another_api_key_of_the_tenant_is_a_different_request(client, ctx, tenant, agent, make_key):
    key = unique("shared")
    body = {"agent_id": "agent-a", "type": "semantic", "content": "Cleo owns a bike."}
    assert client.post(REMEMBER, json=body, headers=_with_key(agent, key)).status_code == 201
    second_key = bearer(make_key(scopes="memory:write"))
    assert_error(client.post(REMEMBER, json=body, headers=_with_key(second_key, key)), 422, "idempotency_key_reused")


def test_keys_are_tenant_scoped(client, ctx, tenant, agent, make_tenant, make_key):
    key = unique("tenant")
    body = {"agent_id": "agent-a", "type": "semantic", "content": "Dana's desk is by the window."}
    mine = client.post(REMEMBER, json=body, headers=_with_key(agent, key))
    other_tenant = make_tenant()
    theirs = client.post(REMEMBER, json=body,
                         headers=_with_key(bearer(make_key(tenant_id=other_tenant.id)), key))
    assert mine.status_code == theirs.status_code == 201
    assert mine.json()["id"] != theirs.json()["id"]
    assert "idempotent-replayed" not in theirs.headers
    assert _memories(ctx, other_tenant.id) == 1


@pytest.mark.parametrize("bad_key, why", [
    ("", "empty"),
    ("k" * 256, "longer than 255"),
    ("tab\there", "control character"),
    ("caf\xe9", "not ASCII"),
])
def test_invalid_keys_are_refused_before_anything_is_written(client, ctx, tenant, agent, bad_key, why):
    headers = {**agent, "Idempotency-Key": bad_key.encode("latin-1")}
    response = client.post(REMEMBER, json={"agent_id": "agent-a", "type": "semantic", "content": why},
                           headers=headers)
    error = assert_error(response, 422, "validation_error")
    assert error["details"][0]["path"] == "/headers/Idempotency-Key"
    assert _memories(ctx, tenant.id) == 0


def test_longest_allowed_key_works(client, ctx, tenant, agent):
    key = "~" + "K" * 253 + " "
    body = {"agent_id": "agent-a", "type": "semantic", "content": "Eli runs on Sundays."}
    assert client.post(REMEMBER, json=body, headers=_with_key(agent, key)).status_code == 201
    assert client.post(REMEMBER, json=body, headers=_with_key(agent, key)).headers["idempotent-replayed"] == "true"
    assert _memories(ctx, tenant.id) == 1


def test_retried_decision_replays_and_is_decided_once(client, ctx, tenant, agent, reviewer):
    staged = client.post(REMEMBER, json={"agent_id": "agent-a", "type": "semantic", "content": "Fay is vegan.",
                                         "approval_required": True}, headers=agent)
    assert staged.status_code == 202, staged.text
    change = staged.json()["change_id"]
    key = unique("approve")
    first = client.post(f"/v1/changes/{change}/approve", json={"reason": "ok"}, headers=_with_key(reviewer, key))
    assert first.status_code == 200, first.text
    retry = client.post(f"/v1/changes/{change}/approve", json={"reason": "ok"}, headers=_with_key(reviewer, key))
    assert (retry.status_code, retry.content) == (200, first.content)
    assert retry.headers["idempotent-replayed"] == "true"
    assert _audit(ctx, tenant.id, "change.approved") == 1
    # A new request (no key) really runs: the change is already decided.
    assert_error(client.post(f"/v1/changes/{change}/approve", json={"reason": "ok"}, headers=reviewer),
                 409, "conflict")


def test_errors_are_not_stored_so_a_retry_runs_again(client, ctx, tenant, agent, reviewer):
    key = unique("reject")
    missing = client.post("/v1/changes/chg_doesnotexist/reject", json={"reason": "no"},
                          headers=_with_key(reviewer, key))
    assert_error(missing, 404, "not_found")
    assert _count(ctx, "SELECT count(*) FROM idempotency_keys WHERE tenant_id = :t", t=tenant.id) == 0
    assert_error(client.post("/v1/changes/chg_doesnotexist/reject", json={"reason": "no"},
                             headers=_with_key(reviewer, key)), 404, "not_found")


def test_workspace_put_replays_status_and_etag(client, ctx, tenant, make_key):
    writer = _with_key(bearer(make_key(scopes="workspace:read,workspace:write")), unique("ws"))
    first = client.put("/v1/host/workspace/files/notes/plan.md", json={"content": "step one"}, headers=writer)
    assert first.status_code == 201, first.text
    retry = client.put("/v1/host/workspace/files/notes/plan.md", json={"content": "step one"}, headers=writer)
    assert (retry.status_code, retry.content) == (201, first.content)
    assert retry.headers["etag"] == first.headers["etag"]
    assert _count(ctx, "SELECT count(*) FROM workspace_versions WHERE tenant_id = :t", t=tenant.id) == 1


def test_expired_keys_run_again_and_are_purged(client, ctx, tenant, agent):
    key = unique("old")
    body = {"agent_id": "agent-a", "type": "semantic", "content": "Gus moved to Oslo."}
    first = client.post(REMEMBER, json=body, headers=_with_key(agent, key))
    with ctx.db.sessions.begin() as session:
        session.execute(text("UPDATE idempotency_keys SET expires_at = now() - interval '1 second' "
                             "WHERE tenant_id = :t"), {"t": tenant.id})
    again = client.post(REMEMBER, json=body, headers=_with_key(agent, key))
    assert again.status_code == 201 and again.json()["id"] != first.json()["id"]
    assert _memories(ctx, tenant.id) == 2
    with ctx.db.sessions.begin() as session:
        session.execute(text("UPDATE idempotency_keys SET expires_at = now() - interval '1 second' "
                             "WHERE tenant_id = :t"), {"t": tenant.id})
    assert idempotency.purge_expired(ctx) >= 1
    assert _count(ctx, "SELECT count(*) FROM idempotency_keys WHERE tenant_id = :t", t=tenant.id) == 0


def test_openapi_documents_the_header_on_writes(client):
    spec = client.get("/openapi.json").json()
    remember = spec["paths"][REMEMBER]["post"]
    assert any(p["name"] == "Idempotency-Key" and p["in"] == "header" for p in remember.get("parameters", []))
    listing = spec["paths"]["/v1/memories"]["get"]
    assert not any(p["name"] == "Idempotency-Key" for p in listing.get("parameters", []))
