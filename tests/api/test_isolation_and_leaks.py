"""Nothing pending, rejected, forgotten, expired or foreign ever leaks into reads — even when it is
the nearest vector — and keys see only their tenant and allowed agents."""

import time

import pytest
from sqlalchemy import text

from tests.harness import bearer
from tests.schema_check import assert_error

SECRET_FACT = "The vault combination for Project Nimbus is stored with Quinn."


@pytest.fixture
def other_tenant_key(make_tenant, make_key):
    return make_key(tenant_id=make_tenant().id)


def _remember(client, headers, content, agent="agent-a", status=201, **extra):
    response = client.post("/v1/memories/remember", json={"agent_id": agent, "type": "semantic",
                                                           "content": content, **extra}, headers=headers)
    assert response.status_code == status, response.text
    return response.json()


def _recall_ids(client, headers, query, agent="agent-a", **extra):
    response = client.post("/v1/memories/recall", json={"agent_id": agent, "query": query, "min_score": -1,
                                                         "k": 50, **extra}, headers=headers)
    assert response.status_code == 200, response.text
    return [h["id"] for h in response.json()["hits"]]


def _list_ids(client, headers, agent="agent-a", **params):
    response = client.get("/v1/memories", params={"agent_id": agent, **params}, headers=headers)
    assert response.status_code == 200, response.text
    return [m["id"] for m in response.json()["items"]]


def test_cross_tenant_reads_are_404_and_recall_is_empty(client, make_key, other_tenant_key):
    mine = bearer(make_key())
    theirs = bearer(other_tenant_key)
    memory_id = _remember(client, mine, SECRET_FACT)["id"]
    assert_error(client.get(f"/v1/memories/{memory_id}", headers=theirs), 404, "not_found")
    assert_error(client.get(f"/v1/memories/{memory_id}/history", headers=theirs), 404, "not_found")
    assert_error(client.delete(f"/v1/memories/{memory_id}", headers=theirs), 404, "not_found")
    assert _recall_ids(client, theirs, SECRET_FACT) == []
    assert _list_ids(client, theirs) == []
    forget = client.post("/v1/memories/forget", json={"agent_id": "agent-a", "ids": [memory_id]}, headers=theirs)
    assert forget.json()["forgotten"] == []
    merge = client.post("/v1/memories/merge", json={"agent_id": "agent-a", "canonical": memory_id,
                                                     "duplicates": [memory_id[:-1] + ("1" if memory_id[-1] == "0" else "0")]},
                        headers=theirs)
    assert_error(merge, 404, "not_found")
    assert client.get(f"/v1/memories/{memory_id}", headers=mine).status_code == 200


def test_agent_allow_list_403_for_named_agent_and_404_by_id(client, make_key):
    writer = bearer(make_key(agents="*"))
    support_only = bearer(make_key(agents="support-*"))
    billing_id = _remember(client, writer, "Invoice 7 was paid late.", agent="billing")["id"]
    assert_error(client.post("/v1/memories/recall", json={"agent_id": "billing", "query": "invoice"},
                             headers=support_only), 403, "forbidden")
    assert_error(client.post("/v1/memories/remember", json={"agent_id": "billing", "type": "semantic",
                                                            "content": "x"}, headers=support_only), 403, "forbidden")
    assert_error(client.get("/v1/memories", params={"agent_id": "billing"}, headers=support_only), 403, "forbidden")
    assert_error(client.get(f"/v1/memories/{billing_id}", headers=support_only), 404, "not_found")
    _remember(client, support_only, "Ticket 9 is about login issues.", agent="support-eu")


def test_scopes_read_only_key_cannot_write(client, make_key):
    reader = bearer(make_key(scopes="memory:read"))
    assert_error(client.post("/v1/memories/remember", json={"agent_id": "a", "type": "semantic", "content": "x"},
                             headers=reader), 403, "forbidden")
    assert client.post("/v1/memories/recall", json={"agent_id": "a", "query": "x"}, headers=reader).status_code == 200


def test_pending_rejected_forgotten_and_expired_never_leak_even_as_nearest(client, ctx, make_key):
    headers = bearer(make_key())
    live = _remember(client, headers, "Project Nimbus launches in March.")["id"]
    pending = _remember(client, headers, SECRET_FACT, status=202, approval_required=True)["id"]
    rejected = _remember(client, headers, SECRET_FACT + " (copy)", status=202, approval_required=True)["id"]
    forgotten = _remember(client, headers, SECRET_FACT + " Really.")["id"]
    expiring = _remember(client, headers, SECRET_FACT + " Briefly.",
                         expires_at=int(time.time() * 1000) + 1500)["id"]
    client.post("/v1/memories/forget", json={"agent_id": "agent-a", "ids": [forgotten]}, headers=headers)
    with ctx.db.sessions.begin() as session:
        session.execute(text("UPDATE memories SET status = 'rejected' WHERE id = :id"), {"id": rejected})
    assert expiring in _recall_ids(client, headers, SECRET_FACT)
    time.sleep(1.6)

    hidden = {pending, rejected, forgotten, expiring}
    assert _recall_ids(client, headers, SECRET_FACT) == [live]
    for fusion in ("max", "weighted"):
        assert set(_recall_ids(client, headers, SECRET_FACT, fusion=fusion)) == {live}
    assert _list_ids(client, headers) == [live]
    for memory_id in hidden:
        assert_error(client.get(f"/v1/memories/{memory_id}", headers=headers), 404, "not_found")


def test_one_agent_recall_stays_full_when_other_agents_rows_are_nearer(client, ctx, make_key, tenant):
    """Other agents' rows identical to the query fill the global top-k; ours must still come back."""
    headers = bearer(make_key())
    ours = [_remember(client, headers, text_, agent="lonely")["id"] for text_ in
            ("Rooftop garden watering is on Tuesdays.", "The rooftop garden has tomatoes.")]
    query = "When is the rooftop garden watered?"
    vector = ctx.embedder.embed([query])[0].tolist()
    with ctx.db.sessions.begin() as session:  # 100,000 rows of other agents, all (nearly) the query itself
        # A little noise per row: 100,000 identical vectors are a pathological HNSW build, not a realistic one.
        session.execute(text("""
            INSERT INTO memories (id, tenant_id, agent_id, type, content, embedding, status, live_from)
            SELECT 'mem_' || lpad(g::text, 26, '0'), :t, 'crowd-' || (g % 500), 'semantic', :q,
                   CAST(:v AS vector) + CAST(array_fill(((g % 97) - 48) / 20000.0, ARRAY[384]) AS vector),
                   'live', now()
            FROM generate_series(1, 100000) g"""), {"t": tenant.id, "q": query, "v": str(vector)})
    hits = _recall_ids(client, headers, query, agent="lonely", k=5)
    assert hits[:2] == [ours[0], ours[1]] or set(hits) == set(ours)
    assert len(hits) == 2


def test_registered_secret_and_shapes_are_redacted_before_storing(client, ctx, make_key, tenant):
    from app.services.tenancy.tenant_config import register_secret

    headers = bearer(make_key())
    register_secret(ctx, tenant_id=tenant.id, label="db_password", value="hunter2-Blue-Falcon",
                    actor={"kind": "test", "id": "t"})
    body = _remember(client, headers, "Prod DB password is hunter2-Blue-Falcon, key AKIAIOSFODNN7EXAMPLE.",
                     tags=["token ghp_0123456789abcdefghijABCDEFGHIJ012345"],
                     metadata={"note": {"card": "4111 1111 1111 1111"}})
    stored = body["memory"]
    assert "hunter2" not in str(stored) and "AKIA" not in str(stored) and "4111" not in str(stored)
    assert "<REDACTED:registered_secret>" in stored["content"]
    assert "<REDACTED:aws_access_key>" in stored["content"]
    assert {r["field"] for r in body["redactions"]} >= {"content", "tags/0", "metadata/note/card"}
    assert all(set(r) == {"field", "label"} for r in body["redactions"])
    with ctx.db.sessions() as session:
        raw = session.execute(text("SELECT content, tags::text, metadata::text FROM memories WHERE id = :id"),
                              {"id": body["id"]}).one()
        audit = session.execute(text("SELECT convert_from(entry, 'UTF8') FROM audit_entries WHERE tenant_id = :t"),
                                {"t": tenant.id}).scalars().all()
    assert "hunter2" not in "".join(raw) and "4111 1111" not in "".join(raw)
    assert not any("Prod DB" in e or "hunter2" in e for e in audit)


def test_reject_mode_refuses_secrets_with_secret_leakage(client, ctx, make_key, tenant):
    from app.services.tenancy.tenant_config import set_redaction_mode

    headers = bearer(make_key())
    set_redaction_mode(ctx, tenant_id=tenant.id, mode="reject", actor={"kind": "test", "id": "t"})
    response = client.post("/v1/memories/remember", json={
        "agent_id": "a", "type": "semantic", "content": "my key is sk_live_abcdefghijklmnopqrstuvwx"}, headers=headers)
    error = assert_error(response, 422, "secret_leakage")
    assert error["details"] == [{"field": "content", "label": "stripe_key"}]
    assert "sk_live" not in response.text
    assert _list_ids(client, headers, agent="a") == []


def test_default_policy_stages_hard_deletes_for_review(client, make_key):
    headers = bearer(make_key())
    memory_id = _remember(client, headers, "Paul's shoe size is 44.")["id"]
    response = client.post("/v1/memories/forget", json={"agent_id": "agent-a", "ids": [memory_id],
                                                         "hard_delete": True}, headers=headers)
    assert response.status_code == 202 and response.json()["matched"] == 1
    assert _list_ids(client, headers) == [memory_id]  # still live until a reviewer approves


def test_audit_log_never_holds_content_only_digests(client, ctx, make_key, tenant):
    from app.services.tenancy.tenant_config import set_policy

    set_policy(ctx, tenant_id=tenant.id, doc={"rules": []}, actor={"kind": "test", "id": "t"})
    headers = bearer(make_key())
    memory_id = _remember(client, headers, "Olivia's therapist appointment is on Friday.")["id"]
    client.post("/v1/memories/forget", json={"agent_id": "agent-a", "ids": [memory_id], "hard_delete": True},
                headers=headers)
    with ctx.db.sessions() as session:
        entries = session.execute(text("SELECT convert_from(entry, 'UTF8') FROM audit_entries WHERE tenant_id = :t"),
                                  {"t": tenant.id}).scalars().all()
        row = session.execute(text("SELECT content, embedding, digest_key, hard_deleted FROM memories WHERE id = :id"),
                              {"id": memory_id}).one()
    assert not any("therapist" in e or "Olivia" in e for e in entries)
    assert any('"content_digest":"' in e for e in entries)
    assert row == (None, None, None, True)
    history = client.get(f"/v1/memories/{memory_id}/history", headers=headers).json()
    assert [e["type"] for e in history["events"]] == ["memory.remembered", "memory.hard_deleted"]
