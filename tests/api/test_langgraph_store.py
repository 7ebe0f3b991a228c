"""`memwarden.langgraph.MemwardenStore` (a LangGraph BaseStore) against a real `memwarden serve`."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langgraph.store.base")

from memwarden.client import Client  # noqa: E402
from memwarden.langgraph import MemwardenStore  # noqa: E402


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
    store.put(("prefs",), "tone", {"content": "Always answer in French."})
    assert store.get(("prefs",), "tone") is None
    (change,) = list(agent.iter_changes(agent_id="lg-gov"))
    reviewer.approve(change.id, reason="user asked for it")
    assert store.get(("prefs",), "tone").value == {"content": "Always answer in French."}
