"""A change keeps its context: the agent's reason for a forget, merge or expire, and, once decided,
the diff and proposed memory its reviewer saw (`GET /v1/changes/{id}`), erased by a hard delete."""

from sqlalchemy import text

from tests.schema_check import assert_schema


def _live(client, headers, content, agent_id="agent-a"):
    response = client.post("/v1/memories/remember", json={"agent_id": agent_id, "type": "semantic",
                                                           "content": content}, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _stage(client, headers, content):
    response = client.post("/v1/memories/remember", json={"agent_id": "agent-a", "type": "semantic",
                                                           "content": content, "approval_required": True},
                           headers=headers)
    assert response.status_code == 202, response.text
    return response.json()


def _change(client, headers, change_id):
    response = client.get(f"/v1/changes/{change_id}", headers=headers)
    assert response.status_code == 200, response.text
    return assert_schema("change", response.json())


def test_forget_merge_and_expire_keep_the_agents_reason(client, agent):
    a, b = _live(client, agent, "Gus lives in Oslo."), _live(client, agent, "Gus lives in Oslo, Norway.")
    staged = {
        "forget": client.post("/v1/memories/forget", json={
            "agent_id": "agent-a", "ids": [a], "reason": "GDPR erasure request", "approval_required": True},
            headers=agent),
        "merge": client.post("/v1/memories/merge", json={
            "agent_id": "agent-a", "canonical": b, "duplicates": [a], "reason": "same fact twice",
            "approval_required": True}, headers=agent),
        "expire": client.post("/v1/memories/expire", json={
            "agent_id": "agent-a", "policy": {"confidence_below": 0.5}, "reason": "stale low-confidence notes",
            "approval_required": True}, headers=agent),
    }
    reasons = {op: _change(client, agent, r.json()["change_id"])["agent_reason"] for op, r in staged.items()}
    assert reasons == {"forget": "GDPR erasure request", "merge": "same fact twice",
                       "expire": "stale low-confidence notes"}
    remembered = _stage(client, agent, "Gus likes rye bread.")
    assert _change(client, agent, remembered["change_id"])["agent_reason"] is None


def test_a_decided_change_keeps_the_diff_and_content_its_reviewer_saw(client, agent, reviewer):
    old = _live(client, agent, "Hana works at Acme Corp.")
    staged = _stage(client, agent, "Hana works at Globex.")
    pending = _change(client, agent, staged["change_id"])
    assert pending["proposed"]["content"] == "Hana works at Globex." and "diff" not in pending
    approved = client.post(f"/v1/changes/{staged['change_id']}/approve", json={"supersedes": old, "confirm_risk": True},
                           headers=reviewer)  # a flagged contradiction is medium risk: confirmed
    assert approved.status_code == 200, approved.text
    # Live memory moves on: the superseded fact is gone and the new one is edited by a later write.
    client.post("/v1/memories/forget", json={"agent_id": "agent-a", "ids": [staged["id"]]}, headers=agent)
    decided = _change(client, agent, staged["change_id"])
    assert decided["proposed"] == {"content": "Hana works at Globex.", "metadata": {}, "tags": [],
                                   "type": "semantic"}
    assert decided["diff"]["closest"]["id"] == old
    assert decided["diff"]["closest"]["content"] == "Hana works at Acme Corp."
    assert decided["diff"]["flags"]["contradiction"]["memory_id"] == old
    assert decided["result"] == {"memory_id": staged["id"], "superseded": old,
                                 "retired": [{"id": old, "reason": "contradiction"}]}
    assert decided["decided_by_name"] is None  # an API key has no display name


def test_a_rejected_change_keeps_its_diff_too(client, agent, reviewer):
    staged = _stage(client, agent, "Ivo's locker code is 4512.")
    client.post(f"/v1/changes/{staged['change_id']}/reject", json={"reason": "not needed"}, headers=reviewer)
    decided = _change(client, agent, staged["change_id"])
    assert decided["status"] == "rejected" and decided["proposed"]["content"] == "Ivo's locker code is 4512."
    assert decided["diff"]["operation"] == "remember"


def test_a_hard_delete_erases_every_copy_decided_changes_keep(client, ctx, tenant, agent, reviewer):
    staged = _stage(client, agent, "Jon's home address is 12 Elm Street.")
    client.post(f"/v1/changes/{staged['change_id']}/approve", json={}, headers=reviewer)
    assert _change(client, agent, staged["change_id"])["proposed"]["content"].startswith("Jon's home")
    erase = client.post("/v1/memories/forget", json={"agent_id": "agent-a", "ids": [staged["id"]],
                                                     "hard_delete": True, "reason": "GDPR erasure request",
                                                     "approval_required": True}, headers=agent)
    decided = client.post(f"/v1/changes/{erase.json()['change_id']}/approve", json={"confirm_risk": True},
                          headers=reviewer)  # a permanent delete is always confirmed
    assert decided.status_code == 200, decided.text
    after = _change(client, agent, staged["change_id"])
    assert "proposed" not in after and "diff" not in after
    erase_change = _change(client, agent, erase.json()["change_id"])
    assert erase_change["agent_reason"] == "GDPR erasure request"
    assert [m["content"] for m in erase_change["diff"]["affected"]] == [None]
    with ctx.db.sessions() as session:
        kept = session.execute(text("SELECT decided_view::text FROM changes WHERE tenant_id = :t"),
                               {"t": tenant.id}).scalars().all()
    assert not any("12 Elm Street" in (v or "") for v in kept)


def test_a_multi_memory_forget_can_be_approved_for_some_memories_only(client, agent, reviewer):
    a, b, c = (_live(client, agent, f"Kai's note number {i} about the garden.") for i in range(3))
    staged = client.post("/v1/memories/forget", json={"agent_id": "agent-a", "ids": [a, b, c],
                                                      "approval_required": True}, headers=agent).json()
    url = f"/v1/changes/{staged['change_id']}/approve"
    foreign = client.post(url, json={"memory_ids": [a, "mem_notinthischange"]}, headers=reviewer)
    assert foreign.status_code == 422 and foreign.json()["error"]["code"] == "validation_error"
    body = client.post(url, json={"memory_ids": [a, b]}, headers=reviewer).json()
    assert body["status"] == "approved" and body["result"] == {"affected": [a, b], "kept": [c]}
    assert client.get(f"/v1/memories/{c}", headers=agent).status_code == 200
    assert client.get(f"/v1/memories/{a}", headers=agent).status_code == 404
    remembered = _stage(client, agent, "Kai waters the garden on Sundays.")
    wrong = client.post(f"/v1/changes/{remembered['change_id']}/approve", json={"memory_ids": [a]}, headers=reviewer)
    assert wrong.status_code == 422


def test_a_merge_diff_marks_the_canonical_memory_and_unrelated_items(client, agent, reviewer):
    canonical = _live(client, agent, "Lea lives in Vienna, Austria.")
    same = _live(client, agent, "Lea lives in Vienna.")
    other = _live(client, agent, "The quarterly tax filing deadline is April 15.")
    staged = client.post("/v1/memories/merge", json={"agent_id": "agent-a", "canonical": canonical,
                                                     "duplicates": [same, other], "approval_required": True},
                         headers=agent).json()
    diff = client.get(f"/v1/changes/{staged['change_id']}/diff", headers=reviewer).json()["diff"]
    items = {m["id"]: m for m in diff["before"]}
    assert diff["before"][0]["id"] == canonical and items[canonical]["canonical"] is True
    assert items[same]["similarity"] > items[other]["similarity"]
    assert diff["unrelated"] == [other]


FSM = {"name": "refund", "initial": "requested", "states": ["requested", "approved", "paid"],
       "transitions": [{"trigger": "approve", "source": "requested", "dest": "approved", "conditions": "manager_ok"},
                       {"trigger": "pay", "source": "approved", "dest": "paid"}]}


def test_a_widened_procedure_is_a_transition_table_diff_not_a_duplicate(client, agent, reviewer):
    import json

    live = client.post("/v1/memories/remember", json={"agent_id": "agent-a", "type": "procedural",
                                                       "content": json.dumps(FSM)}, headers=agent).json()["id"]
    wider = {**FSM, "transitions": [{"trigger": "approve", "source": "*", "dest": "approved"},
                                    FSM["transitions"][1]]}
    staged = client.post("/v1/memories/remember", json={
        "agent_id": "agent-a", "type": "procedural", "content": json.dumps(wider), "approval_required": True},
        headers=agent).json()
    diff = client.get(f"/v1/changes/{staged['change_id']}/diff", headers=reviewer).json()["diff"]
    assert diff["flags"]["duplicate"] is False
    table = diff["fsm"]
    assert table["against"] == live and table["widens"] is True and table["added"] == [] == table["removed"]
    assert table["changed"] == [{"before": {"trigger": "approve", "source": ["requested"], "dest": "approved",
                                            "guards": ["if manager_ok"]},
                                 "after": {"trigger": "approve", "source": ["*"], "dest": "approved", "guards": []},
                                 "widens": True}]


def test_the_diff_endpoint_of_a_decided_change_stays_in_its_schema(client, agent, reviewer):
    staged = _stage(client, agent, "Mo's desk is by the window.")
    client.post(f"/v1/changes/{staged['change_id']}/reject", json={"reason": "no"}, headers=reviewer)
    body = assert_schema("change-diff.response", client.get(f"/v1/changes/{staged['change_id']}/diff",
                                                            headers=reviewer).json())
    assert "diff" not in body and body["change"]["status"] == "rejected"
