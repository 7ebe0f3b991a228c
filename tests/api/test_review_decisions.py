"""Decisions through the JSON API with `review:decide` keys: every path and its audit events."""

from sqlalchemy import text

from app.services.tenancy.tenant_config import set_policy
from tests.harness import bearer
from tests.schema_check import assert_error, assert_schema


def _stage(client, headers, content, agent_id="agent-a", **extra):
    response = client.post("/v1/memories/remember", json={"agent_id": agent_id, "type": "semantic",
                                                           "content": content, "approval_required": True, **extra},
                           headers=headers)
    assert response.status_code == 202, response.text
    return response.json()


def _live(client, headers, content, agent_id="agent-a"):
    response = client.post("/v1/memories/remember", json={"agent_id": agent_id, "type": "semantic",
                                                           "content": content}, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _recall(client, headers, query):
    body = client.post("/v1/memories/recall", json={"agent_id": "agent-a", "query": query}, headers=headers).json()
    return [(h["id"], h["content"]) for h in body["hits"]]


def _diff(client, headers, change_id):
    response = client.get(f"/v1/changes/{change_id}/diff", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["diff"]


def _audit_types(ctx, tenant_id):
    """The tenant's audit event types in order, without read records (`memory.read`: a recall the
    test makes between two decisions is recorded too, and is not what these tests are about)."""
    with ctx.db.sessions() as session:
        return session.execute(text("SELECT event_type FROM audit_entries WHERE tenant_id = :t "
                                    "AND event_type <> 'memory.read' ORDER BY seq"),
                               {"t": tenant_id}).scalars().all()


def test_approve_makes_it_recallable_and_is_audited(client, ctx, tenant, agent, reviewer):
    live_id = _live(client, agent, "Xavier's favourite colour is green.")
    staged = _stage(client, agent, "Xavier's favourite colour is purple.")
    diff = _diff(client, reviewer, staged["change_id"])
    assert diff["closest"]["id"] == live_id
    assert diff["flags"]["contradiction"]["old_value"] == "green"
    assert {"op": "insert", "text": "purple"} in diff["segments"] or any(
        s["op"] == "insert" and "purple" in s["text"] for s in diff["segments"])
    response = client.post(f"/v1/changes/{staged['change_id']}/approve",
                           json={"seen_state": diff["fingerprint"], "confirm_risk": True}, headers=reviewer)
    body = assert_schema("change", response.json())
    assert body["status"] == "approved" and body["decided_by"].startswith("api_key:")
    assert staged["id"] in [i for i, _ in _recall(client, agent, "Xavier favourite colour")]
    status = client.get(f"/v1/changes/{staged['change_id']}", headers=agent).json()
    assert status["status"] == "approved"
    # The flagged contradiction is retired by the approval itself: green is no longer live.
    assert body["result"]["retired"] == [{"id": live_id, "reason": "contradiction"}]
    assert _audit_types(ctx, tenant.id)[-3:] == ["memory.committed", "memory.superseded", "change.approved"]


def test_reject_needs_a_reason_and_the_memory_never_appears(client, ctx, tenant, agent, reviewer):
    staged = _stage(client, agent, "Yara's password hint is her cat's name.")
    assert_error(client.post(f"/v1/changes/{staged['change_id']}/reject", json={}, headers=reviewer),
                 422, "validation_error")
    rejected = client.post(f"/v1/changes/{staged['change_id']}/reject", json={"reason": "not a fact"},
                           headers=reviewer).json()
    assert rejected["status"] == "rejected" and rejected["reason"] == "not a fact"
    assert _audit_types(ctx, tenant.id)[-1] == "change.rejected"
    assert _recall(client, agent, "Yara password hint") == []
    assert_error(client.get(f"/v1/memories/{staged['id']}", headers=agent), 404, "not_found")
    again = client.post(f"/v1/changes/{staged['change_id']}/approve", json={}, headers=reviewer)
    assert assert_error(again, 409, "conflict")["details"]["reason"] == "already_decided"


def test_approve_with_edits_is_revalidated_and_redacted(client, agent, reviewer):
    staged = _stage(client, agent, "Zoe's API key is in the vault.")
    edits = {"content": "Zoe's key is AKIAIOSFODNN7EXAMPLE and she rotates it monthly.", "tags": ["security"],
             "type": "episodic"}
    body = client.post(f"/v1/changes/{staged['change_id']}/approve", json={"edits": edits}, headers=reviewer).json()
    assert body["status"] == "approved"
    entry = client.get(f"/v1/memories/{staged['id']}", headers=agent).json()
    assert entry["content"] == "Zoe's key is <REDACTED:aws_access_key> and she rotates it monthly."
    assert entry["tags"] == ["security"] and entry["type"] == "episodic"
    assert _recall(client, agent, "how often does Zoe rotate her key")[0][0] == staged["id"]
    bad = _stage(client, agent, "Another fact.")
    assert_error(client.post(f"/v1/changes/{bad['change_id']}/approve", json={"edits": {"type": "factual"}},
                             headers=reviewer), 422, "validation_error")


def test_stale_review_is_refused_with_the_fresh_diff(client, ctx, tenant, agent, reviewer):
    staged = _stage(client, agent, "Adam's flight leaves at 9am.")
    old = _diff(client, reviewer, staged["change_id"])
    newer = _live(client, agent, "Adam's flight leaves at 11am.")  # live state moves under the reviewer
    response = client.post(f"/v1/changes/{staged['change_id']}/approve", json={"seen_state": old["fingerprint"]},
                           headers=reviewer)
    error = assert_error(response, 409, "conflict")
    assert error["details"]["reason"] == "stale_review"
    assert error["details"]["diff"]["closest"]["id"] == newer
    ok = client.post(f"/v1/changes/{staged['change_id']}/approve",
                     json={"seen_state": error["details"]["fingerprint"], "supersedes": newer}, headers=reviewer)
    assert ok.json()["result"] == {"memory_id": staged["id"], "superseded": newer,
                                   "retired": [{"id": newer, "reason": "chosen"}]}
    assert [i for i, _ in _recall(client, agent, "Adam flight time")] == [staged["id"]]
    assert _audit_types(ctx, tenant.id)[-3:] == ["memory.committed", "memory.superseded", "change.approved"]


def test_merge_into_existing_memory(client, ctx, tenant, agent, reviewer):
    target = _live(client, agent, "Bella speaks French.")
    staged = _stage(client, agent, "Bella also speaks Italian.")
    body = client.post(f"/v1/changes/{staged['change_id']}/approve", json={"merge_into": target},
                       headers=reviewer).json()
    assert body["result"] == {"memory_id": target, "merged_into": target}
    entry = client.get(f"/v1/memories/{target}", headers=agent).json()
    assert entry["content"] == "Bella speaks French.\nBella also speaks Italian."
    assert_error(client.get(f"/v1/memories/{staged['id']}", headers=agent), 404, "not_found")
    assert _audit_types(ctx, tenant.id)[-3:] == ["memory.merged", "memory.merged_into", "change.approved"]


def test_two_person_rule_needs_two_distinct_reviewers(client, ctx, tenant, agent, make_key):
    set_policy(ctx, tenant_id=tenant.id, actor={"kind": "test", "id": "t"}, doc={"rules": [
        {"id": "finance-two-person", "match": {"agents": ["finance-*"]}, "action": "require_approval",
         "approvals_required": 2}]})
    first, second = (bearer(make_key(scopes="review:decide,memory:read")) for _ in range(2))
    response = client.post("/v1/memories/remember", json={"agent_id": "finance-bot", "type": "semantic",
                                                           "content": "Q3 budget is 1.2M."}, headers=agent)
    change_id = response.json()["change_id"]
    one = client.post(f"/v1/changes/{change_id}/approve", json={}, headers=first).json()
    assert one["status"] == "pending" and len(one["approvals"]) == 1
    same = client.post(f"/v1/changes/{change_id}/approve", json={}, headers=first)
    assert assert_error(same, 409, "conflict")["details"]["reason"] == "same_reviewer"
    two = client.post(f"/v1/changes/{change_id}/approve", json={}, headers=second).json()
    assert two["status"] == "approved" and len(two["approvals"]) == 2
    assert client.get("/v1/memories", params={"agent_id": "finance-bot"}, headers=agent).json()["items"]


def test_staged_forget_resolves_against_live_state_when_approved(client, agent, reviewer):
    a, b = _live(client, agent, "Cleo likes tea."), _live(client, agent, "Cleo likes coffee.")
    response = client.post("/v1/memories/forget", json={"agent_id": "agent-a", "ids": [a, b], "hard_delete": True},
                           headers=agent)
    change_id = response.json()["change_id"]
    diff = _diff(client, reviewer, change_id)
    assert diff["count"] == 2 and {m["id"] for m in diff["affected"]} == {a, b}
    client.post("/v1/memories/forget", json={"agent_id": "agent-a", "ids": [b]}, headers=agent)  # b goes first
    # a hard delete is confirmed
    body = client.post(f"/v1/changes/{change_id}/approve", json={"confirm_risk": True}, headers=reviewer).json()
    assert body["result"] == {"affected": [a]}
    assert _recall(client, agent, "What does Cleo like?") == []


def test_withdraw_by_the_agent_and_scopes(client, agent, reviewer, make_key):
    staged = _stage(client, agent, "Dan's tax id is pending confirmation.")
    assert_error(client.post(f"/v1/changes/{staged['change_id']}/approve", json={}, headers=agent), 403, "forbidden")
    other_agent = bearer(make_key(agents="someone-else"))
    assert_error(client.post(f"/v1/changes/{staged['change_id']}/withdraw", headers=other_agent), 404, "not_found")
    body = client.post(f"/v1/changes/{staged['change_id']}/withdraw", headers=agent).json()
    assert body["status"] == "withdrawn"
    assert_error(client.post(f"/v1/changes/{staged['change_id']}/approve", json={}, headers=reviewer),
                 409, "conflict")


def test_changes_of_another_tenant_are_404(client, agent, make_tenant, make_key):
    staged = _stage(client, agent, "Eve's secret project.")
    foreign = bearer(make_key(scopes="review:decide,memory:read", tenant_id=make_tenant().id))
    for call in (lambda: client.get(f"/v1/changes/{staged['change_id']}", headers=foreign),
                 lambda: client.post(f"/v1/changes/{staged['change_id']}/approve", json={}, headers=foreign)):
        assert_error(call(), 404, "not_found")
    assert client.get("/v1/changes", headers=foreign).json()["items"] == []


def test_list_changes_oldest_first(client, agent):
    ids = [_stage(client, agent, f"Queued fact {i}.")["change_id"] for i in range(3)]
    body = assert_schema("changes.response", client.get("/v1/changes", headers=agent).json())
    assert [c["id"] for c in body["items"]] == ids and body["total"] == 3


def test_every_page_of_changes_reports_the_whole_total(client, agent):
    ids = [_stage(client, agent, f"Paged fact {i}.")["change_id"] for i in range(3)]
    first = assert_schema("changes.response", client.get("/v1/changes", params={"limit": 2}, headers=agent).json())
    second = assert_schema("changes.response", client.get(
        "/v1/changes", params={"limit": 2, "cursor": first["next_cursor"]}, headers=agent).json())
    assert [c["id"] for c in first["items"] + second["items"]] == ids
    assert first["total"] == second["total"] == 3
