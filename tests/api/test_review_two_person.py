"""A two-person change's outcome is chosen with its last approval (the two-person rule on every
path). An earlier approval only records its reviewer: edits, merge_into, supersedes and
memory_ids sent with it are refused (422) rather than silently dropped, which left the first
reviewer believing their edit or choice would apply."""

import pytest

from app.services.tenancy.tenant_config import set_policy
from tests.harness import bearer
from tests.schema_check import assert_error

ACTOR = {"kind": "test", "id": "t"}


@pytest.fixture
def pair(ctx, tenant, make_key):
    set_policy(ctx, tenant_id=tenant.id, actor=ACTOR, doc={"rules": [
        {"id": "pairs", "match": {"agents": ["pair-*"]}, "action": "require_approval", "approvals_required": 2}]})
    return [bearer(make_key(scopes="review:decide,memory:read")) for _ in range(2)]


def test_an_earlier_approval_refuses_outcome_choices_and_the_last_one_applies_them(client, ctx, tenant, agent, pair):
    first, second = pair
    old = client.post("/v1/memories/remember", headers=agent, json={
        "agent_id": "pair-bot", "type": "semantic", "content": "Quinn lives in Paris."}).json()
    staged = client.post("/v1/memories/remember", headers=agent, json={
        "agent_id": "pair-bot", "type": "semantic", "content": "Quinn lives in Madrid."}).json()
    assert old["status"] == "pending"  # the rule stages every write of pair-*: both approve it first
    for key in pair:
        assert client.post(f"/v1/changes/{old['change_id']}/approve", json={}, headers=key).status_code == 200
    url = f"/v1/changes/{staged['change_id']}/approve"
    for body in ({"supersedes": old["id"]}, {"edits": {"content": "Quinn lives in Lisbon."}},
                 {"merge_into": old["id"]}):
        error = assert_error(client.post(url, json=body, headers=first), 422, "validation_error")
        assert "last approval" in error["message"]
    change = client.get(f"/v1/changes/{staged['change_id']}", headers=agent).json()
    assert change["status"] == "pending" and change["approvals"] == []  # nothing recorded by the refusals
    assert client.post(url, json={}, headers=first).json()["status"] == "pending"
    done = client.post(url, json={"supersedes": old["id"]}, headers=second).json()
    assert done["status"] == "approved" and done["result"]["superseded"] == old["id"]


def test_an_earlier_approval_of_a_forget_refuses_a_choice_of_memories(client, agent, pair):
    first, _ = pair
    ids = []
    for i in range(2):
        staged = client.post("/v1/memories/remember", headers=agent, json={
            "agent_id": "pair-bot", "type": "semantic", "content": f"Pia's note {i}."}).json()
        for key in pair:
            client.post(f"/v1/changes/{staged['change_id']}/approve", json={}, headers=key)
        ids.append(staged["id"])
    forget = client.post("/v1/memories/forget", headers=agent, json={"agent_id": "pair-bot", "ids": ids}).json()
    assert forget["status"] == "pending"
    assert_error(client.post(f"/v1/changes/{forget['change_id']}/approve", json={"memory_ids": ids[:1]},
                             headers=first), 422, "validation_error")
