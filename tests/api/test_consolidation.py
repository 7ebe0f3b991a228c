"""Consolidation: repeated episodic facts promoted to semantic memories and cold items evicted,
through `remember`/`expire`, screening and the tenant policy; audited, idempotent, content-free
events, the change page's evidence, tenant isolation and the API route."""

import json

from sqlalchemy import select, text

from app.db.models import ConsolidationClaim, Event, Memory
from app.repos.memory import consolidation as consolidation_repo
from app.services.memory import consolidation
from app.services.tenancy import users
from app.services.tenancy.tenant_config import set_policy
from tests.consolidation_data import VEGETARIAN, preference_and_noise, write_notes
from tests.harness import bearer, web_sign_in
from tests.schema_check import assert_error, assert_schema

ADMIN = {"kind": "test", "id": "pytest"}
STAGE_INFERRED = {"rules": [{"id": "inferred-needs-review", "match": {"operations": ["remember"],
                                                                      "sources": ["inferred"]},
                             "action": "require_approval"}]}
STAGE_EXPIRES = {"rules": [{"id": "expires-need-review", "match": {"operations": ["expire"]},
                            "action": "require_approval"}]}


def opt_in(ctx, tenant_id, **extra):
    return consolidation.set_config(ctx, tenant_id=tenant_id, actor=ADMIN, agents=["*"], **extra)


def rows(ctx, tenant_id, **where):
    with ctx.db.sessions() as session:
        stmt = select(Memory).where(Memory.tenant_id == tenant_id,
                                    *[getattr(Memory, k) == v for k, v in where.items()])
        return list(session.scalars(stmt))


def consolidated_events(ctx, tenant_id):
    with ctx.db.sessions() as session:
        return [e.payload for e in session.scalars(select(Event).where(
            Event.tenant_id == tenant_id, Event.type == "agent.memory.consolidated").order_by(Event.id))]


def audit_types(ctx, tenant_id):
    with ctx.db.sessions() as session:
        return [json.loads(r)["type"] for r in session.execute(text(
            "SELECT entry FROM audit_entries WHERE tenant_id = :t ORDER BY seq"), {"t": tenant_id}).scalars()]


def test_a_repeated_fact_becomes_a_screened_semantic_remember_linking_its_sources(client, ctx, tenant, agent):
    evidence, noise = preference_and_noise(ctx, tenant.id)
    opt_in(ctx, tenant.id)
    result = consolidation.consolidate_tenant(ctx, tenant.id)
    assert result["promoted"] == 1 and result["staged"] == 0, result
    [promotion] = result["promotions"]
    assert promotion["source_ids"] == sorted(evidence) and promotion["mentions"] == 4
    assert promotion["outcome"] == "promoted" and promotion["statement_from"] == "template"
    [semantic] = rows(ctx, tenant.id, type="semantic")
    assert semantic.id == promotion["memory_id"] and semantic.status == "live"
    assert semantic.content == "User prefers vegetarian menu." and semantic.source == "inferred"
    assert semantic.metadata_["consolidated_from"] == sorted(evidence) and "consolidated" in semantic.tags
    assert semantic.user_id == "user-1" and semantic.written_by == f"consolidation:{result['run_id']}"
    # the sources stay (they are recent); the old one-off notes were evicted (archived by an expire)
    assert {m.id for m in rows(ctx, tenant.id, type="episodic", status="live")} == set(evidence)
    assert {m.id for m in rows(ctx, tenant.id, status="archived")} == set(noise) and result["evicted"] == 4
    types = audit_types(ctx, tenant.id)
    assert "memory.remembered" in types and "consolidation.promoted" in types
    assert types.count("memory.expired.archive") == 4 and "consolidation.evicted" in types
    assert types[-1] == "consolidation.finished"
    # recall finds it like any memory
    hits = client.post("/v1/memories/recall", json={"agent_id": "assistant", "user_id": "user-1", "types": ["semantic"],
                                                    "query": "vegetarian food"}, headers=agent).json()["hits"]
    assert [h["id"] for h in hits] == [semantic.id]


def test_the_event_carries_ids_and_counts_only(ctx, tenant):
    _, noise = preference_and_noise(ctx, tenant.id)
    opt_in(ctx, tenant.id)
    result = consolidation.consolidate_tenant(ctx, tenant.id)
    [event] = consolidated_events(ctx, tenant.id)
    assert set(event) == {"memoryRef", "agentId", "consolidationRunId", "trigger", "promotedIds", "stagedChangeIds",
                          "evictedIds", "evictionChangeIds", "promotedCount", "stagedCount", "evictedCount",
                          "sourceCount"}
    assert event["promotedIds"] == [result["promotions"][0]["memory_id"]] and event["promotedCount"] == 1
    assert sorted(event["evictedIds"]) == sorted(noise) and event["evictedCount"] == 4 and event["sourceCount"] == 4
    dumped = json.dumps(event).lower()
    assert "vegetarian" not in dumped and "parking" not in dumped
    assert_schema("event", {"id": 1, "type": "agent.memory.consolidated", "data": event,
                            "createdAt": "2026-01-01T00:00:00Z"})


def test_a_rerun_promotes_and_evicts_nothing_twice(ctx, tenant):
    preference_and_noise(ctx, tenant.id)
    opt_in(ctx, tenant.id)
    first = consolidation.consolidate_tenant(ctx, tenant.id)
    second = consolidation.consolidate_tenant(ctx, tenant.id)
    assert first["promoted"] == 1 and first["evicted"] == 4
    assert (second["promoted"], second["staged"], second["evicted"], second["promotions"]) == (0, 0, 0, [])
    assert len(rows(ctx, tenant.id, type="semantic")) == 1 and len(consolidated_events(ctx, tenant.id)) == 1
    # new evidence of the same fact is not a second promotion: used sources are never used again
    write_notes(ctx, tenant.id, [(0.5, VEGETARIAN[0]), (2.5, VEGETARIAN[1]), (4.5, VEGETARIAN[2])])
    third = consolidation.consolidate_tenant(ctx, tenant.id)
    assert third["promoted"] == 1  # a later, separate body of evidence (its own claim)
    with ctx.db.sessions() as session:
        claims = list(session.scalars(select(ConsolidationClaim).where(ConsolidationClaim.tenant_id == tenant.id,
                                                                       ConsolidationClaim.kind == "promote")))
    used = [i for c in claims for i in c.source_ids]
    assert len(used) == len(set(used)) == 7


def test_the_claim_is_a_database_constraint(ctx, tenant):
    args = {"tenant_id": tenant.id, "key": "k" * 64, "kind": "promote", "run_id": "cns_x", "agent_id": "a",
            "user_id": None, "source_ids": ["mem_1"], "evidence": {}}
    with ctx.db.sessions.begin() as session:
        assert consolidation_repo.claim(session, **args) is True
        assert consolidation_repo.claim(session, **{**args, "run_id": "cns_y"}) is False


def test_a_policy_rule_stages_the_promotion_and_the_page_shows_escaped_evidence(client, ctx, tenant, make_key):
    hostile = "<script>alert(1)</script> the user asked for a vegetarian menu."
    evidence = write_notes(ctx, tenant.id, [(1, VEGETARIAN[0]), (3, VEGETARIAN[1]), (5, hostile)])
    set_policy(ctx, tenant_id=tenant.id, actor=ADMIN, doc=STAGE_INFERRED)
    opt_in(ctx, tenant.id)
    result = consolidation.consolidate_tenant(ctx, tenant.id)
    assert result["staged"] == 1 and result["promoted"] == 0
    [staged] = rows(ctx, tenant.id, type="semantic")
    assert staged.status == "pending"
    reviewer = bearer(make_key(scopes="review:decide,memory:read"))
    change_id = result["promotions"][0]["change_id"]
    diff = client.get(f"/v1/changes/{change_id}/diff", headers=reviewer).json()["diff"]
    assert diff["policy_rule"] == "inferred-needs-review"
    assert sorted(m["id"] for m in diff["evidence"]) == sorted(evidence)
    assert diff["consolidation"]["mentions"] == 3 and diff["consolidation"]["score"] > 0
    assert consolidated_events(ctx, tenant.id)[0]["stagedChangeIds"] == [change_id]

    users.create_user(ctx, username=f"rev-{tenant.name}", password="reviewer password 1", tenant_id=tenant.id,
                      role="reviewer", actor=ADMIN)
    assert web_sign_in(client, f"rev-{tenant.name}", "reviewer password 1").status_code == 303
    page = client.get(f"/review/{change_id}")
    assert page.status_code == 200
    assert 'data-testid="consolidation-evidence"' in page.text and page.text.count('data-testid="evidence-row"') == 3
    assert "<script>alert(1)</script>" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text

    approved = client.post(f"/v1/changes/{change_id}/approve", json={"seen_state": diff["fingerprint"]},
                           headers=reviewer)
    assert approved.status_code == 200, approved.text
    assert rows(ctx, tenant.id, type="semantic")[0].status == "live"
    assert consolidation.consolidate_tenant(ctx, tenant.id)["promotions"] == []


def test_eviction_never_touches_an_item_recalled_within_the_window(client, ctx, tenant, agent):
    old = write_notes(ctx, tenant.id, [(20, "Renewed the parking permit for the Porto office."),
                                       (21, "Printed the boarding pass for Madrid.")], confidence=0.5)
    hits = client.post("/v1/memories/recall", json={"agent_id": "assistant", "user_id": "user-1", "k": 1,
                                                    "query": "parking permit Porto office"}, headers=agent).json()["hits"]
    assert [h["id"] for h in hits] == [old[0]]
    opt_in(ctx, tenant.id, protect_recalled_days=7)
    result = consolidation.consolidate_tenant(ctx, tenant.id)
    assert result["evicted"] == 1 and result["evictions"][0]["memory_ids"] == [old[1]]
    assert {m.id: m.status for m in rows(ctx, tenant.id)} == {old[0]: "live", old[1]: "archived"}


def test_a_staged_eviction_rechecks_recalls_when_approved(client, ctx, tenant, agent, reviewer):
    old = write_notes(ctx, tenant.id, [(20, "Renewed the parking permit for the Porto office."),
                                       (21, "Printed the boarding pass for Madrid.")], confidence=0.5)
    set_policy(ctx, tenant_id=tenant.id, actor=ADMIN, doc=STAGE_EXPIRES)
    opt_in(ctx, tenant.id)
    result = consolidation.consolidate_tenant(ctx, tenant.id)
    assert result["evictions_staged"] == 2 and result["evicted"] == 0
    [change] = client.get("/v1/changes", params={"operation": "expire"}, headers=reviewer).json()["items"]
    diff = client.get(f"/v1/changes/{change['id']}/diff", headers=reviewer).json()["diff"]
    assert {m["id"]: m["evicted_because"]["reason"] for m in diff["affected"]} == {i: "cold" for i in old}
    users.create_user(ctx, username=f"rev-{tenant.name}", password="reviewer password 1", tenant_id=tenant.id,
                      role="reviewer", actor=ADMIN)
    assert web_sign_in(client, f"rev-{tenant.name}", "reviewer password 1").status_code == 303
    page = client.get(f"/review/{change['id']}").text
    assert page.count('data-testid="evicted-because"') == 2 and "consolidation: cold, score" in page
    client.cookies.clear()
    # recalled after it was staged: the expire's own predicate spares it at approval
    client.post("/v1/memories/recall", json={"agent_id": "assistant", "user_id": "user-1", "k": 1,
                                             "query": "parking permit Porto office"}, headers=agent)
    diff = client.get(f"/v1/changes/{change['id']}/diff", headers=reviewer).json()["diff"]
    assert [m["id"] for m in diff["affected"]] == [old[1]]
    approved = client.post(f"/v1/changes/{change['id']}/approve",
                           json={"seen_state": diff["fingerprint"], "confirm_risk": True}, headers=reviewer)
    assert approved.status_code == 200, approved.text
    assert approved.json()["result"]["affected"] == [old[1]]
    assert {m.id: m.status for m in rows(ctx, tenant.id)} == {old[0]: "live", old[1]: "archived"}


def test_only_an_opted_in_tenant_and_agent_are_consolidated_and_a_dry_run_changes_nothing(ctx, tenant):
    preference_and_noise(ctx, tenant.id)
    refused = None
    try:
        consolidation.consolidate_tenant(ctx, tenant.id)
    except Exception as exc:  # noqa: BLE001 - the error's type and reason are what is checked
        refused = exc
    assert refused is not None and refused.status == 409 and refused.details["reason"] == "not_opted_in"
    before = [(m.id, m.status, m.updated_at) for m in rows(ctx, tenant.id)]
    dry = consolidation.consolidate_tenant(ctx, tenant.id, dry_run=True)
    assert len(dry["promotions"]) == 1 and len(dry["evictions"][0]["memory_ids"]) == 4 and dry["promoted"] == 0
    assert [(m.id, m.status, m.updated_at) for m in rows(ctx, tenant.id)] == before
    assert consolidated_events(ctx, tenant.id) == []
    consolidation.set_config(ctx, tenant_id=tenant.id, actor=ADMIN, agents=["other-*"])
    assert consolidation.consolidate_tenant(ctx, tenant.id)["windows"] == 0
    assert [(m.id, m.status, m.updated_at) for m in rows(ctx, tenant.id)] == before


def test_the_api_route_is_scoped_and_tenant_isolated(client, ctx, tenant, make_tenant, make_key):
    evidence, _ = preference_and_noise(ctx, tenant.id)
    other = make_tenant()
    other_evidence, _ = preference_and_noise(ctx, other.id)
    opt_in(ctx, tenant.id)
    assert_error(client.post("/v1/consolidate", json={}, headers=bearer(make_key(scopes="memory:read,memory:write"))),
                 403, "forbidden")
    limited = bearer(make_key(scopes="admin", agents="assistant"))
    assert_error(client.post("/v1/consolidate", json={}, headers=limited), 403, "forbidden")
    assert_error(client.post("/v1/consolidate", json={"agent_id": "someone-else"}, headers=limited), 403, "forbidden")
    assert_error(client.post("/v1/consolidate", json={"dry_run": "yes"}, headers=limited), 422, "validation_error")
    assert_error(client.post("/v1/consolidate", json={"tenant": other.id}, headers=limited), 422, "validation_error")
    response = client.post("/v1/consolidate", json={"agent_id": "assistant"}, headers=limited)
    assert response.status_code == 200, response.text
    body = assert_schema("consolidate.response", response.json())
    assert body["promoted"] == 1 and body["promotions"][0]["source_ids"] == sorted(evidence)
    assert "vegetarian" not in response.text.lower()
    # the other tenant (not opted in) is untouched, and its own admin key is refused
    assert rows(ctx, other.id, type="semantic") == [] and len(rows(ctx, other.id, status="live")) == 8
    other_admin = bearer(make_key(scopes="admin", tenant_id=other.id))
    assert_error(client.post("/v1/consolidate", json={}, headers=other_admin), 409, "conflict")
    dry = client.post("/v1/consolidate", json={"dry_run": True}, headers=other_admin).json()
    assert dry["promotions"][0]["source_ids"] == sorted(other_evidence)
    assert all(i not in evidence for p in dry["promotions"] for i in p["source_ids"])


def test_the_capability_document_advertises_consolidation(client):
    v1 = client.get("/.well-known/openwop").json()
    expected = {"trigger": "host-managed", "idempotent": True, "event": "agent.memory.consolidated",
                "operations": ["remember", "expire"], "infersCommitments": False}
    assert v1["memory"]["consolidation"] == {"supported": True, **expected}
    assert client.get("/.well-known/openwop", headers={"OpenWOP-Version": "2.0"}).json()["memory"]["consolidation"] \
        == expected


def test_settings_are_validated_and_audited(ctx, tenant):
    for bad in ({"similarity": 2}, {"evict_action": "shred"}, {"min_mentions": 1}, {"interval_minutes": 0}):
        try:
            consolidation.set_config(ctx, tenant_id=tenant.id, actor=ADMIN, **bad)
        except Exception as exc:  # noqa: BLE001
            assert exc.status == 422, bad
        else:
            raise AssertionError(f"accepted {bad}")
    config = opt_in(ctx, tenant.id, interval_minutes=30, enabled=True)
    assert config.covers("anything") and config.interval_minutes == 30
    assert audit_types(ctx, tenant.id).count("tenant.settings_changed") == 1


def test_a_dry_run_predicts_the_pass_and_a_live_promotion_evicts_its_cold_sources(ctx, tenant):
    old_evidence = write_notes(ctx, tenant.id, [(15 + 2 * i, text) for i, text in enumerate(VEGETARIAN)])
    noise = write_notes(ctx, tenant.id, [(22, "Filed the receipt from the bakery.")], confidence=0.5)
    opt_in(ctx, tenant.id)
    dry = consolidation.consolidate_tenant(ctx, tenant.id, dry_run=True)
    real = consolidation.consolidate_tenant(ctx, tenant.id)
    assert [p["source_ids"] for p in real["promotions"]] == [p["source_ids"] for p in dry["promotions"]] \
        == [sorted(old_evidence)]
    assert real["evictions"][0]["reasons"] == dry["evictions"][0]["reasons"] == {
        **{i: "consolidated" for i in old_evidence}, noise[0]: "cold"}
    assert {m.id for m in rows(ctx, tenant.id, status="archived")} == {*old_evidence, *noise}
    [semantic] = rows(ctx, tenant.id, status="live")
    assert semantic.type == "semantic" and semantic.metadata_["consolidated_from"] == sorted(old_evidence)
