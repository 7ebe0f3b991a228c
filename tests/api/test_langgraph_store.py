"""`memwarden.langgraph.MemwardenStore` (a LangGraph BaseStore) against a real `memwarden serve`."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langgraph.store.base")

from memwarden.client import Client  # noqa: E402
from memwarden.langgraph import HeldWrite, MemwardenStore  # noqa: E402


@pytest.fixture
def clients(live_server, live_key):
    with Client(live_server, live_key("memory:read,memory:write")) as agent, \
            Client(live_server, live_key("review:decide,memory:read")) as reviewer:
        yield agent, reviewer


def test_put_get_search_delete_through_the_memory_api(clients):
    agent, _ = clients
    store = MemwardenStore(agent, agent_id="lg-agent", user_index=1)
    store.put(("memories", "ana"), "food", {"content": "Ana is vegetarian and loves lentil soup.", "kind": "diet"})
    store.put(("memories", "ana"), "city", {"content": "Ana lives in Porto.", "kind": "place", "years": 3})
    store.put(("memories", "bo"), "city", {"content": "Bo lives in Oslo.", "kind": "place", "years": 9})
    store.put(("notes",), "n1", {"text": "not a content string", "n": 1})

    item = store.get(("memories", "ana"), "city")
    assert item.value == {"content": "Ana lives in Porto.", "kind": "place", "years": 3}
    assert item.namespace == ("memories", "ana") and item.key == "city" and item.created_at.tzinfo
    assert store.get(("notes",), "n1").value == {"text": "not a content string", "n": 1}
    assert store.get(("memories", "ana"), "missing") is None
    assert {m.user_id for m in agent.iter_memories(agent_id="lg-agent")} == {"ana", "bo", None}

    hits = store.search(("memories", "ana"), query="what does Ana eat?", limit=2)
    assert hits and hits[0].key == "food" and hits[0].score is not None
    assert {h.namespace for h in store.search(("memories",), query="where does someone live", limit=10)} <= {
        ("memories", "ana"), ("memories", "bo")}
    places = store.search(("memories",), filter={"kind": "place"})
    assert {(i.namespace[1], i.key) for i in places} == {("ana", "city"), ("bo", "city")}
    assert [i.key for i in store.search(("memories",), filter={"years": {"$gt": 5}})] == ["city"]
    assert [i.namespace for i in store.search(("memories",), filter={"years": {"$gt": 5}})] == [("memories", "bo")]

    store.put(("memories", "ana"), "city", {"content": "Ana moved to Lisbon.", "kind": "place", "years": 0})
    assert store.get(("memories", "ana"), "city").value["content"] == "Ana moved to Lisbon."
    assert len([i for i in store.search(("memories", "ana")) if i.key == "city"]) == 1  # superseded, not duplicated

    assert store.list_namespaces() == [("memories", "ana"), ("memories", "bo"), ("notes",)]
    assert store.list_namespaces(prefix=("memories",), max_depth=1) == [("memories",)]
    assert store.list_namespaces(suffix=("bo",)) == [("memories", "bo")]

    store.delete(("memories", "bo"), "city")
    assert store.get(("memories", "bo"), "city") is None
    assert asyncio.run(store.aget(("memories", "ana"), "food")).value["kind"] == "diet"


def test_a_staged_put_is_invisible_until_approved(clients):
    agent, reviewer = clients
    store = MemwardenStore(agent, agent_id="lg-gov", approval_required=True)
    with pytest.warns(HeldWrite) as held:
        store.put(("prefs",), "tone", {"content": "Always answer in French."})
    assert store.get(("prefs",), "tone") is None
    (change,) = list(agent.iter_changes(agent_id="lg-gov"))
    assert held[0].message.change_id == change.id
    reviewer.approve(change.id, reason="user asked for it", confirm_risk=True)
    assert store.get(("prefs",), "tone").value == {"content": "Always answer in French."}


def test_search_ranks_by_similarity_without_a_relevance_gate(clients):
    """A value without a `content` string was embedded as JSON and the gate dropped every hit."""
    agent, _ = clients
    store = MemwardenStore(agent, agent_id="lg-rank")
    store.put(("users", "ada"), "diet", {"text": "Ada is vegetarian and never eats fish."})
    store.put(("users", "ada"), "job", {"text": "Ada works as a structural engineer.", "years": 7})
    store.put(("users", "ada"), "pet", {"note": {"text": "Ada has a grey cat called Bolt."}})

    hits = store.search(("users",), query="what does the user eat?")
    assert [h.key for h in hits][:1] == ["diet"] and len(hits) == 3  # everything in scope, best first
    assert all(-1 <= h.score <= 1 for h in hits) and [h.score for h in hits] == sorted(
        (h.score for h in hits), reverse=True)  # cosine similarity, as InMemoryStore scores
    assert [h.key for h in store.search(("users",), query="what does the user eat?", limit=1, offset=1)] == \
        [hits[1].key]
    # The embedded text is the value's strings, not its JSON.
    assert {m.content for m in agent.iter_memories(agent_id="lg-rank")} == {
        "Ada is vegetarian and never eats fish.", "Ada works as a structural engineer.", "Ada has a grey cat called Bolt."}

    assert MemwardenStore(agent, agent_id="lg-rank", min_score=0.99).search(("users",), query="what does the user eat?") == []
    with pytest.raises(ValueError, match="fields"):
        MemwardenStore(agent, agent_id="lg-rank", index={"dims": 3, "embed": lambda texts: texts})


def test_index_false_and_index_paths(clients):
    agent, _ = clients
    store = MemwardenStore(agent, agent_id="lg-index", index={"fields": ["title"]})
    store.put(("docs",), "soup", {"title": "Lentil soup recipe", "body": "Boil lentils with cumin.", "n": 1})
    store.put(("docs",), "bike", {"title": "Fixing a bicycle chain", "body": "Use a chain tool."})
    store.put(("docs",), "secret", {"title": "Lentil stew", "body": "Not for search."}, index=False)
    store.put(("docs",), "tagged", {"title": "Untitled", "summary": "Cooking beans"}, index=["summary"])
    store.put(("docs",), "empty", {"body": "no title here"})  # nothing at the index paths: unindexed

    contents = {m.metadata["lg_key"]: m.content for m in agent.iter_memories(agent_id="lg-index")}
    assert contents["soup"] == "Lentil soup recipe" and contents["tagged"] == "Cooking beans"
    assert store.get(("docs",), "soup").value == {"title": "Lentil soup recipe", "body": "Boil lentils with cumin.", "n": 1}

    ranked = store.search(("docs",), query="lentils", limit=10)
    assert ranked[0].key == "soup"
    assert {h.key for h in ranked if h.score is not None} == {"soup", "bike", "tagged"}
    assert [h.score for h in ranked[3:]] == [None, None]  # unindexed items follow, unscored
    assert {h.key for h in ranked[3:]} == {"secret", "empty"}
    assert [h.key for h in store.search(("docs",), query="lentils", limit=2)] == [h.key for h in ranked[:2]]
    assert "secret" in {i.key for i in store.search(("docs",))}  # still listed and readable
    assert MemwardenStore(agent, agent_id="lg-index", min_score=0.99).search(("docs",), query="lentils") == []
    assert store.search(("docs",), query="lentils", filter={"n": 1})[0].key == "soup"

    store.put(("docs",), "soup", None)  # put(None) deletes
    assert store.get(("docs",), "soup") is None
    assert "soup" not in {h.key for h in store.search(("docs",), query="lentils")}


def test_a_held_put_warns_with_its_change_and_once_approved_replaces_the_old_value(clients):
    import warnings

    from memwarden.langgraph import HeldWrite

    agent, reviewer = clients
    MemwardenStore(agent, agent_id="lg-held", user_index=1).put(("prefs", "gus"), "hobby",
                                                                {"content": "Gus enjoys chess."})
    held = MemwardenStore(agent, agent_id="lg-held", user_index=1, approval_required=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert held.put(("prefs", "gus"), "hobby", {"content": "Gus enjoys chess and gardening."}) is None
    warned = [w.message for w in caught if isinstance(w.message, HeldWrite)]
    assert len(warned) == 1 and warned[0].key == "hobby" and warned[0].change_id.startswith("chg_")
    assert held.held == {(("prefs", "gus"), "hobby"): warned[0].change_id}
    assert held.get(("prefs", "gus"), "hobby").value == {"content": "Gus enjoys chess."}  # held: old stays

    decided = reviewer.approve(warned[0].change_id, confirm_risk=True)
    assert decided.status == "approved"
    found = [(i.key, i.value["content"]) for i in held.search(("prefs",), query="what does Gus enjoy")]
    assert found == [("hobby", "Gus enjoys chess and gardening.")]
    assert held.forget_held(("prefs", "gus"), "hobby") == warned[0].change_id and held.held == {}
