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


DESMOND = ("Desmond climbed Kilimanjaro last October with his brother.",
           "Desmond teaches chemistry at a secondary school in Leicester.",
           "Desmond breeds koi carp in a pond behind his house.",
           "Desmond has held a Leicester City season ticket for twenty years.",
           "Desmond is diabetic and checks his glucose before every meal.",
           "Desmond plays bass guitar in a reggae covers band.",
           "Desmond's twin daughters turned eleven in June.",
           "Desmond rebuilt the engine of a 1972 Triumph motorcycle in his garage.")
INGRID = ("Ingrid runs a small bakery in Tromsø that opens at five in the morning.",
          "Ingrid rides a fat-tyre bike across the snow every weekend.",
          "Ingrid's cat Mosse is a seventeen-year-old Norwegian Forest cat.",
          "Ingrid collects first editions of Agatha Christie novels.",
          "Ingrid had knee surgery in March and still walks with a cane.",
          "Ingrid's sister lives in Reykjavik and works as a vet.",
          "Ingrid is saving for a sauna cabin on the edge of the fjord.",
          "Ingrid sings alto in the cathedral choir.")


def test_category_question_over_facts_that_all_name_the_person(api):
    """Scopes from the calibration set (v3): every fact names its person, so a question naming the
    person is close to all of them. The scope-residual similarity (the query and each fact with the
    scope's centroid taken away) lets a category question through to the one fact of that category,
    and keeps out a question whose answer is not stored; the lift alone (v2 gate) did neither here."""
    remember, recall = api
    desmond = [remember(fact, "desmond") for fact in DESMOND]
    ingrid = [remember(fact, "ingrid") for fact in INGRID]
    # "pets" over "breeds koi carp": no shared word; lift 0.35 (v2 gate 0.36), residual gate 0.63 >= 0.595
    assert recall("what pets does Desmond keep?", "desmond")[0] == desmond[2]
    assert recall("what instrument does Desmond play?", "desmond")[0] == desmond[5]
    assert recall("does Desmond speak French?", "desmond") == []
    # Close to every Ingrid fact (best 0.55, lift 0.37 >= 0.36 under v2), residual gate 0.57 < 0.595
    assert recall("is Ingrid a professional photographer?", "ingrid") == []
    assert recall("what sport does Ingrid do?", "ingrid")[0] == ingrid[1]
