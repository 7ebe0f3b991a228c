"""Read budgets: a key is returned at most N distinct memories per window;
the read that would pass it is a 429 `read_budget_exceeded` with `Retry-After` that returns
nothing, the first refusal of a window is one `read_budget.exceeded` audit entry and event, and
the key is flagged. (The exfiltration against a live serve is
`tests/integration/test_read_audit_live.py`.)"""

from sqlalchemy import text

from app.services.audit.audit import chain_for
from app.services.audit.read_budgets import window_of
from app.services.tenancy.tenant_config import set_read_budget
from app.core.timefmt import parse_ts
from tests.harness import bearer
from tests.schema_check import assert_error

ACTOR = {"kind": "test", "id": "pytest"}


def _remember_many(client, headers, n, agent_id="budget-a"):
    ids = []
    for i in range(n):
        response = client.post("/v1/memories/remember", json={"agent_id": agent_id, "type": "semantic",
                                                               "content": f"Fact number {i} about the harbour."},
                               headers=headers)
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    return ids


def _count(ctx, sql, **params):
    with ctx.db.sessions() as session:
        return session.execute(text(sql), params).scalar()


def test_a_key_is_stopped_at_its_budget_and_rereads_are_free(client, ctx, tenant, make_key):
    set_read_budget(ctx, tenant_id=tenant.id, actor=ACTOR, per_key=5)
    writer = bearer(make_key())
    hook = client.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": ["read_budget.exceeded"]},
                       headers=bearer(make_key(scopes="events:read")))
    assert hook.status_code == 201, hook.text
    ids = _remember_many(client, writer, 8)
    token = make_key(scopes="memory:read")
    reader, key_id = bearer(token), "_".join(token.split("_")[1:3])
    for memory_id in ids[:5]:
        assert client.get(f"/v1/memories/{memory_id}", headers=reader).status_code == 200
    assert client.get(f"/v1/memories/{ids[0]}", headers=reader).status_code == 200  # seen: counts once
    refused = client.get(f"/v1/memories/{ids[5]}", headers=reader)
    body = assert_error(refused, 429, "read_budget_exceeded")
    assert "Fact number" not in refused.text
    assert body["details"]["limit"] == 5 and body["details"]["budget"] == "per_key"
    start, end = parse_ts(body["details"]["window_start"]), parse_ts(body["details"]["window_end"])
    assert window_of(start, ctx.settings.read_budget_window_seconds) == (start, end)
    assert 1 <= int(refused.headers["retry-after"]) <= ctx.settings.read_budget_window_seconds
    # A page that would pass the budget is refused whole; one within it still passes.
    assert_error(client.get("/v1/memories", params={"agent_id": "budget-a"}, headers=reader), 429,
                 "read_budget_exceeded")
    assert client.get(f"/v1/memories/{ids[1]}", headers=reader).status_code == 200
    # Another key of the tenant has its own budget.
    assert client.get(f"/v1/memories/{ids[5]}", headers=writer).status_code == 200

    chain = chain_for(tenant.id)
    assert _count(ctx, "SELECT count(*) FROM audit_entries WHERE chain_id = :c AND event_type = 'read_budget.exceeded'",
                  c=chain) == 1
    assert _count(ctx, "SELECT count(*) FROM events WHERE tenant_id = :t AND type = 'read_budget.exceeded' "
                       "AND payload->>'keyId' = :k", t=tenant.id, k=key_id) == 1
    assert _count(ctx, "SELECT read_budget_exceeded_at IS NOT NULL FROM api_keys WHERE id = :k", k=key_id)
    assert _count(ctx, "SELECT count(*) FROM webhook_deliveries d JOIN events e ON e.tenant_id = d.tenant_id "
                       "AND e.id = d.event_id WHERE d.webhook_id = :w AND e.type = 'read_budget.exceeded'",
                  w=hook.json()["id"]) == 1  # the webhook is owed the event (delivery: tests of webhooks)
    # The access log names exactly what the key got: the five, never the refused ones.
    got = _count(ctx, "SELECT array_agg(DISTINCT m) FROM read_records r, unnest(r.memory_ids) m "
                      "WHERE r.tenant_id = :t AND r.key_id = :k", t=tenant.id, k=key_id)
    assert sorted(got) == sorted(ids[:5])


def test_the_agent_budget_spans_keys_and_zero_turns_it_off(client, ctx, tenant, make_key):
    set_read_budget(ctx, tenant_id=tenant.id, actor=ACTOR, per_key=0, per_agent=3)
    ids = _remember_many(client, bearer(make_key()), 4)
    first, second = bearer(make_key(scopes="memory:read")), bearer(make_key(scopes="memory:read"))
    for memory_id in ids[:2]:
        assert client.get(f"/v1/memories/{memory_id}", headers=first).status_code == 200
    assert client.get(f"/v1/memories/{ids[2]}", headers=second).status_code == 200
    body = assert_error(client.get(f"/v1/memories/{ids[3]}", headers=second), 429, "read_budget_exceeded")
    assert body["details"]["budget"] == "per_agent"
    set_read_budget(ctx, tenant_id=tenant.id, actor=ACTOR, per_agent=0)
    assert client.get(f"/v1/memories/{ids[3]}", headers=second).status_code == 200


def test_a_recall_that_would_pass_the_budget_is_refused(client, ctx, tenant, make_key):
    set_read_budget(ctx, tenant_id=tenant.id, actor=ACTOR, per_key=2)
    _remember_many(client, bearer(make_key()), 4)
    reader = bearer(make_key(scopes="memory:read"))
    response = client.post("/v1/memories/recall", json={"agent_id": "budget-a", "query": "harbour facts",
                                                        "min_score": -1, "k": 3}, headers=reader)
    assert_error(response, 429, "read_budget_exceeded")
    # The budget is taken on the recall's own connection; its first refusal still leaves its entry.
    assert _count(ctx, "SELECT count(*) FROM audit_entries WHERE chain_id = :c AND event_type = 'read_budget.exceeded'",
                  c=chain_for(tenant.id)) == 1
    one = client.post("/v1/memories/recall", json={"agent_id": "budget-a", "query": "harbour facts",
                                                   "min_score": -1, "k": 2}, headers=reader)
    assert one.status_code == 200 and len(one.json()["hits"]) == 2


def test_ended_windows_are_purged_and_the_current_one_kept(ctx, tenant):
    from datetime import timedelta

    from app.core.timefmt import utcnow
    from app.repos.audit import reads
    from app.services.audit.read_budgets import purge_ended

    current, _ = window_of(utcnow(), ctx.settings.read_budget_window_seconds)
    with ctx.db.reader() as conn:
        for start in (current - timedelta(seconds=ctx.settings.read_budget_window_seconds), current):
            assert reads.take_budget(conn, tenant_id=tenant.id, principals=["key:key_p"], limits=[10],
                                     window_start=start, ids=["mem_a", "mem_b"]).allowed
    purge_ended(ctx)
    assert _count(ctx, "SELECT count(*) FROM read_budget_windows WHERE tenant_id = :t", t=tenant.id) == 1
    assert _count(ctx, "SELECT count(*) FROM read_budget_seen WHERE tenant_id = :t AND window_start = :w",
                  t=tenant.id, w=current) == 2
    assert _count(ctx, "SELECT count(*) FROM read_budget_seen WHERE tenant_id = :t", t=tenant.id) == 2
