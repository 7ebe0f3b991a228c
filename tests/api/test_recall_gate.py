"""The default answerability gate through the API: it must not gate out a scope whose memories are
all about the query's topic, nor a generic question ("the user") over facts that name the person,
while a question nothing in scope answers still comes back empty."""

import pytest

from tests.harness import bearer


@pytest.fixture
def api(client, make_key):
    headers = bearer(make_key(scopes="memory:read,memory:write"))

    def remember(content, user_id):
        response = client.post("/v1/memories/remember", headers=headers, json={
            "agent_id": "gate", "user_id": user_id, "type": "semantic", "content": content})
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def recall(query, user_id):
        response = client.post("/v1/memories/recall", headers=headers,
                               json={"agent_id": "gate", "user_id": user_id, "query": query})
        assert response.status_code == 200, response.text
        return [h["id"] for h in response.json()["hits"]]

    return remember, recall


def test_homogeneous_scope_is_not_gated_out(api):
    remember, recall = api
    ids = [remember(f"Fact {i}: the {i}-th shelf holds spare fuses", "stores") for i in range(1, 13)]
    # No memory stands out (lift ~0.01), but each holds every word of the query: keyword evidence.
    hits = recall("where are the spare fuses?", "stores")
    assert len(hits) == 5 and set(hits) <= set(ids)
    # Same topic, one word not stored anywhere: no full-text match, no lift, so nothing.
    assert recall("where are the spare batteries?", "stores") == []
    assert recall("what is the capital of Peru?", "stores") == []


def test_generic_question_finds_the_named_fact(api):
    remember, recall = api
    diet = remember("Ada is vegetarian and never eats fish.", "ada")
    for fact in ("Ada works as a structural engineer in Leeds.", "Ada plays the cello in an amateur orchestra.",
                 "Ada's daughter starts school in September.", "Ada is allergic to penicillin."):
        remember(fact, "ada")
    assert recall("what does the user eat?", "ada")[0] == diet
    assert recall("what car does the user drive?", "ada") == []
