"""Approving a remember retires the live facts it replaces, on every path, unless the reviewer keeps
both (`app.services.memory.supersession`); approvals that need confirmation are refused without it
(`app.services.review.confirmation`)."""

import pytest

from tests.schema_check import assert_error, assert_schema


def _remember(client, headers, content, agent_id="agent-s", **extra):
    body = client.post("/v1/memories/remember", json={"agent_id": agent_id, "type": "semantic", "content": content,
                                                      **extra}, headers=headers)
    assert body.status_code in (201, 202), body.text
    return body.json()


def _live(client, headers, agent_id="agent-s"):
    return {m["content"] for m in client.get("/v1/memories", params={"agent_id": agent_id}, headers=headers).json()["items"]}


def _approve(client, reviewer, change_id, **body):
    response = client.post(f"/v1/changes/{change_id}/approve", json=body, headers=reviewer)
    assert response.status_code == 200, response.text
    return assert_schema("change", response.json())


def test_a_move_is_flagged_and_approving_it_retires_where_they_lived(client, agent, reviewer):
    _remember(client, agent, "Heidi lives in Oslo.")
    staged = _remember(client, agent, "Heidi moved to Brooklyn last month.", approval_required=True)
    change = client.get(f"/v1/changes/{staged['change_id']}", headers=reviewer).json()
    assert "contradiction" in [f["name"] for f in change["risk_flags"]]
    diff = client.get(f"/v1/changes/{staged['change_id']}/diff", headers=reviewer).json()["diff"]
    assert [m["content"] for m in diff["replaces"]] == ["Heidi lives in Oslo."]
    body = _approve(client, reviewer, staged["change_id"], confirm_risk=True)
    assert [r["reason"] for r in body["result"]["retired"]] == ["contradiction"]
    assert _live(client, agent) == {"Heidi moved to Brooklyn last month."}


def test_approving_a_flagged_contradiction_without_supersedes_retires_it_unless_keep_both(client, agent, reviewer):
    old = _remember(client, agent, "Quinn lives in Paris.")["id"]
    first = _remember(client, agent, "Quinn lives in Madrid.", approval_required=True)
    kept = _approve(client, reviewer, first["change_id"], confirm_risk=True, keep_both=True)
    assert kept["result"]["kept_by_choice"] == [old] and "retired" not in kept["result"]
    assert _live(client, agent) == {"Quinn lives in Paris.", "Quinn lives in Madrid."}
    second = _remember(client, agent, "Quinn moved to Rome in October.", approval_required=True)
    body = _approve(client, reviewer, second["change_id"], confirm_risk=True)
    assert {r["id"] for r in body["result"]["retired"]} == {old, first["id"]}  # every contradicted one
    assert body["result"]["superseded"] in (old, first["id"])
    assert _live(client, agent) == {"Quinn moved to Rome in October."}


def test_keep_both_with_supersedes_is_a_validation_error(client, agent, reviewer):
    old = _remember(client, agent, "Ravi works at Acme.")["id"]
    staged = _remember(client, agent, "Ravi joined Globex.", approval_required=True)
    assert_error(client.post(f"/v1/changes/{staged['change_id']}/approve",
                             json={"keep_both": True, "supersedes": old, "confirm_risk": True}, headers=reviewer),
                 422, "validation_error")
    assert_error(client.post(f"/v1/changes/{staged['change_id']}/approve", json={"keep_both": "yes"},
                             headers=reviewer), 422, "validation_error")


def test_a_medium_risk_approval_needs_confirmation_on_the_api(client, agent, reviewer):
    _remember(client, agent, "Sven lives in Bergen.")
    staged = _remember(client, agent, "Sven lives in Tromsø.", approval_required=True)
    assert client.get(f"/v1/changes/{staged['change_id']}", headers=reviewer).json()["risk_level"] == "medium"
    error = assert_error(client.post(f"/v1/changes/{staged['change_id']}/approve", json={}, headers=reviewer),
                         422, "confirmation_required")
    assert error["details"]["confirm"] == ["risk"] and "contradiction" in error["details"]["risk_flags"]
    assert client.get(f"/v1/changes/{staged['change_id']}", headers=reviewer).json()["status"] == "pending"


def test_a_staged_hard_delete_needs_confirmation(client, agent, reviewer):
    memory = _remember(client, agent, "Tove's locker code is 4411.")["id"]
    staged = client.post("/v1/memories/forget", json={"agent_id": "agent-s", "ids": [memory], "hard_delete": True,
                                                       "approval_required": True}, headers=agent).json()
    error = assert_error(client.post(f"/v1/changes/{staged['change_id']}/approve", json={}, headers=reviewer),
                         422, "confirmation_required")
    assert "hard_delete" in error["details"]["confirm"]
    assert "Tove's locker code is 4411." in _live(client, agent)
    _approve(client, reviewer, staged["change_id"], confirm_risk=True)
    assert "Tove's locker code is 4411." not in _live(client, agent)


CHANGES_OF_STATE = [
    ("a move", "Ana lives in Lisbon.", "Ana packed up her things and calls Porto home now, after the new job."),
    ("an employer change", "Tomás works at Iberdrola.", "Tomás quit Iberdrola; these days he is with Repsol."),
    ("a new number", "The user's mobile number is 0612 345 678.", "The user got a new mobile number: 0698 765 432."),
    ("a new owner", "The red bike belongs to Omar.", "Omar sold the red bike; it is Lina's now."),
    ("a new dentist", "The user's dentist is Dr. Brandt.", "The user changed dentists and now sees Dr. Okafor."),
]


def test_approving_a_change_of_state_on_the_api_retires_the_old_fact(client, agent, reviewer):
    for n, (what, old, new) in enumerate(CHANGES_OF_STATE):
        agent_id = f"agent-state-{n}"
        kept = _remember(client, agent, old, agent_id=agent_id, source="user")["id"]
        staged = _remember(client, agent, new, agent_id=agent_id, source="user", approval_required=True)
        # The reader by meaning decides what approving retires (the diff's plan), not what screening stages.
        diff = client.get(f"/v1/changes/{staged['change_id']}/diff", headers=reviewer).json()["diff"]
        assert [m["id"] for m in diff["replaces"]] == [kept], what
        body = _approve(client, reviewer, staged["change_id"], confirm_risk=True)
        assert body["result"]["retired"] == [{"id": kept, "reason": "contradiction"}], what
        assert _live(client, agent, agent_id) == {new}, what


def test_a_compatible_look_alike_is_not_flagged_and_approving_it_keeps_both(client, agent, reviewer):
    for n, new in enumerate(("Ana is spending two weeks in Porto on holiday.", "Ana now loves Lisbon's trams.",
                             "Ana's sister now lives in Porto.")):
        agent_id = f"agent-alike-{n}"
        _remember(client, agent, "Ana lives in Lisbon.", agent_id=agent_id, source="user")
        staged = _remember(client, agent, new, agent_id=agent_id, source="user", approval_required=True)
        change = client.get(f"/v1/changes/{staged['change_id']}", headers=reviewer).json()
        assert "contradiction" not in [f["name"] for f in change["risk_flags"]], new
        diff = client.get(f"/v1/changes/{staged['change_id']}/diff", headers=reviewer).json()["diff"]
        assert diff["replaces"] == [], new
        body = _approve(client, reviewer, staged["change_id"], confirm_risk=True)
        assert "retired" not in body["result"], new
        assert _live(client, agent, agent_id) == {"Ana lives in Lisbon.", new}


@pytest.mark.parametrize("model_on", [True, False])
def test_a_change_said_in_other_words_retires_what_it_changes(client, ctx, agent, reviewer, model_on):
    # No shared frame for the rules ("payroll provider is" against "switched payroll over to"): the
    # contradiction model ties the change the write reports to the live fact; switched off, the
    # reviewer's plan names nothing and both stay live.
    if not model_on:
        ctx.__dict__["contradiction_model"] = None  # the cached property, as MEMWARDEN_CONTRADICTION_MODEL=false
    old = _remember(client, agent, "Our payroll provider is Gusto.", agent_id="agent-p")["id"]
    kept = _remember(client, agent, "The office coffee supplier is Bean Bros.", agent_id="agent-p")["id"]
    staged = _remember(client, agent, "We switched payroll over to Rippling last quarter.", agent_id="agent-p",
                       approval_required=True)
    diff = client.get(f"/v1/changes/{staged['change_id']}/diff", headers=reviewer).json()["diff"]
    assert [m["id"] for m in diff["replaces"]] == ([old] if model_on else [])
    body = _approve(client, reviewer, staged["change_id"], confirm_risk=True)
    assert body["result"].get("retired") == ([{"id": old, "reason": "contradiction"}] if model_on else None)
    live = {m["id"] for m in client.get("/v1/memories", params={"agent_id": "agent-p"}, headers=agent).json()["items"]}
    assert live == ({kept, staged["id"]} if model_on else {old, kept, staged["id"]})


@pytest.mark.parametrize("kind", ["semantic", "episodic"])
def test_a_new_value_with_no_word_of_change_retires_a_state_but_not_a_record(client, agent, reviewer, kind):
    # "Jenkins is gone, ..." names no change the rules know; the model reads one. Between facts of
    # state the old one is retired; between records of events neither makes the other untrue.
    agent_id = f"agent-ci-{kind}"
    old = client.post("/v1/memories/remember", json={"agent_id": agent_id, "type": kind, "content": "CI runs on Jenkins."},
                      headers=agent).json()["id"]
    staged = client.post("/v1/memories/remember", json={
        "agent_id": agent_id, "type": kind, "content": "Jenkins is gone, everything builds on GitHub Actions.",
        "approval_required": True}, headers=agent).json()
    diff = client.get(f"/v1/changes/{staged['change_id']}/diff", headers=reviewer).json()["diff"]
    assert [m["id"] for m in diff["replaces"]] == ([old] if kind == "semantic" else [])
    body = _approve(client, reviewer, staged["change_id"], confirm_risk=True)
    assert body["result"].get("retired") == ([{"id": old, "reason": "contradiction"}] if kind == "semantic" else None)
