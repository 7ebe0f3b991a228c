"""memorywire's conformance scenarios, by name, through HTTP against the real database."""

import pytest
from sqlalchemy import text

from tests.harness import bearer
from tests.schema_check import assert_error, assert_schema


@pytest.fixture
def api(client, make_key):
    token = make_key(scopes="memory:read,memory:write")

    class Api:
        headers = bearer(token)

        def post(self, path, body, status=None):
            response = client.post(f"/v1/memories/{path}", json=body, headers=self.headers)
            if status is not None:
                assert response.status_code == status, response.text
            return response

        def remember(self, content, agent="agent-a", **extra):
            body = self.post("remember", {"agent_id": agent, "type": extra.pop("type", "semantic"),
                                          "content": content, **extra}, 201).json()
            assert_schema("remember.response", body)
            return body["id"]

        def recall(self, query, agent="agent-a", **extra):
            body = self.post("recall", {"agent_id": agent, "query": query, **extra}, 200).json()
            assert_schema("recall.response", body)
            return body["hits"]

        def get(self, path, **params):
            return client.get(f"/v1/{path}", params=params, headers=self.headers)

    return Api()


def _age(ctx, memory_id, days):
    with ctx.db.sessions.begin() as session:
        session.execute(text("UPDATE memories SET created_at = now() - make_interval(days => :d), "
                             "live_from = now() - make_interval(days => :d) WHERE id = :id"),
                        {"d": days, "id": memory_id})


def test_basic_remember_recall(api):
    memory_id = api.remember("Alice is allergic to peanuts.", user_id="alice")
    hits = api.recall("What is Alice allergic to?")
    assert hits[0]["id"] == memory_id
    assert hits[0]["content"] == "Alice is allergic to peanuts."


def test_user_filter(api):
    alice = api.remember("Prefers window seats on flights.", user_id="alice")
    bob = api.remember("Prefers aisle seats on flights.", user_id="bob")
    ids = [h["id"] for h in api.recall("seat preference on flights", user_id="alice")]
    assert alice in ids and bob not in ids


def test_type_filter(api):
    semantic = api.remember("The office coffee machine is on the third floor.")
    episodic = api.remember("On Monday the coffee machine on the third floor broke.", type="episodic")
    ids = [h["id"] for h in api.recall("coffee machine third floor", types=["episodic"])]
    assert ids == [episodic] and semantic not in ids


def test_forget_by_ids(api):
    keep = api.remember("Carol likes hiking in the Alps.")
    drop = api.remember("Carol likes hiking in the Pyrenees.")
    body = api.post("forget", {"agent_id": "agent-a", "ids": [drop]}, 200).json()
    assert_schema("forget.response", body)
    assert body["forgotten"] == [drop]
    ids = [h["id"] for h in api.recall("Carol hiking")]
    assert keep in ids and drop not in ids
    assert_error(api.get(f"memories/{drop}"), 404, "not_found")


def test_forget_without_scope_rejected(api):
    api.remember("Dave owns a red bicycle.")
    for body in ({"agent_id": "agent-a"}, {"agent_id": "agent-a", "ids": []}, {"agent_id": "agent-a", "filter": {}}):
        error = assert_error(api.post("forget", body), 422, "validation_error")
        assert {d["path"] for d in error["details"]} == {"/ids", "/filter"}
    assert len(api.recall("Dave bicycle")) == 1


def test_empty_expire_policy_rejected_missing_policy(api):
    error = assert_error(api.post("expire", {"agent_id": "agent-a"}), 422, "validation_error")
    assert any("policy" in d["message"] for d in error["details"])


def test_empty_expire_policy_rejected_empty_object(api):
    api.remember("Erin's passport expires in 2031.")
    error = assert_error(api.post("expire", {"agent_id": "agent-a", "policy": {}}), 422, "validation_error")
    assert error["details"][0]["path"] == "/policy"
    assert len(api.recall("Erin passport")) == 1


def test_expire_by_age(api, ctx):
    old = api.remember("Frank's old phone number ended in 42.")
    new = api.remember("Frank's new phone number ends in 77.")
    _age(ctx, old, 40)
    body = api.post("expire", {"agent_id": "agent-a", "policy": {"older_than_days": 30}}, 200).json()
    assert_schema("expire.response", body)
    assert body == {"status": "done", "affected": [old], "action": "forget"}
    ids = [h["id"] for h in api.recall("Frank phone number")]
    assert ids == [new]


def test_merge_keep_canonical(api):
    canonical = api.remember("Grace works at Initech as an engineer.", tags=["work"])
    duplicate = api.remember("Grace is an engineer at Initech.", tags=["job"])
    body = api.post("merge", {"agent_id": "agent-a", "canonical": canonical, "duplicates": [duplicate]}, 200).json()
    assert_schema("merge.response", body)
    assert body["memory"]["id"] == canonical and body["merged"] == [duplicate]
    assert body["memory"]["content"] == "Grace works at Initech as an engineer."
    ids = [h["id"] for h in api.recall("Where does Grace work?")]
    assert ids == [canonical]
    history = api.get(f"memories/{duplicate}/history").json()
    assert [e["type"] for e in history["events"]] == ["memory.remembered", "memory.merged_into"]
    assert history["events"][-1]["data"]["canonical"] == canonical


def test_approval_required_pending_invisible(api):
    response = api.post("remember", {"agent_id": "agent-a", "type": "semantic", "approval_required": True,
                                     "content": "Heidi's locker code is in the blue notebook."}, 202)
    body = assert_schema("pending.response", response.json())
    assert body["status"] == "pending" and body["change_id"].startswith("chg_")
    assert api.recall("Heidi locker code", min_score=-1) == []
    assert api.get("memories", agent_id="agent-a").json()["items"] == []
    assert_error(api.get(f"memories/{body['id']}"), 404, "not_found")


def test_capabilities_declared(api):
    caps = api.get("capabilities").json()
    assert {"semantic", "episodic", "procedural", "emotional", "vector", "fts", "recall_tracking"} <= set(
        caps["capabilities"])
    assert set(caps["fusion"]) == {"rrf", "max", "weighted"}


def test_health(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}


def test_recall_returns_score(api):
    api.remember("Ivan speaks Portuguese and Japanese.")
    hits = api.recall("Which languages does Ivan speak?")
    assert isinstance(hits[0]["score"], float) and hits[0]["score"] > 0
    assert 0 < hits[0]["similarity"] <= 1


def test_fresher_than_filter(api, ctx):
    stale = api.remember("Judy's favourite restaurant was Luigi's.")
    fresh = api.remember("Judy's favourite restaurant is now Sakura.")
    _age(ctx, stale, 10)
    ids = [h["id"] for h in api.recall("Judy favourite restaurant", fresher_than_days=5)]
    assert ids == [fresh]


def test_many_remembers_then_recall(api):
    facts = [f"Warehouse {i} stores {item}." for i, item in enumerate(
        ["bananas", "bolts", "laptops", "tyres", "paint", "cement", "coffee", "paper", "glass", "cable"] * 5)]
    ids = [api.remember(fact) for fact in facts]
    hits = api.recall("Which warehouse stores laptops?", k=10)
    assert ids[2] in [h["id"] for h in hits[:5]]
    assert api.get("memories", agent_id="agent-a", limit=1000).json()["items"][0]["id"] == ids[-1]
