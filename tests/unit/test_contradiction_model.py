"""The shipped contradiction model (`app.nli`) and how the contradiction reader uses it: only to
tie a change the write reports (in a word of change, or as the model reads it) to a live fact the
rules could not tie it to."""

import pytest

from app import nli
from app.core import attributes
from app.core.screening import contradiction
from app.embeddings import get_embedder


@pytest.fixture(scope="module")
def model():
    scorer = nli.get_scorer()
    assert scorer is not None, "the contradiction model's wheel is a dependency"
    return scorer


def _replaces(new, old, model=None):
    embedder = get_embedder()
    vectors = embedder.embed([new, old])
    meaning = attributes.meaning(embedder.embed, embedder.name, vectors[0], [vectors[1]])
    return contradiction.replaces(new, old, meaning=meaning.pair(0), model=model)


def test_the_export_is_read_at_each_pairs_own_length(model):
    assert nli._model is not None and nli._model._fixed is None  # the 160-token input dimension was freed
    moved, unrelated = model([("Heidi lives in Oslo.", "Heidi moved to Brooklyn last month."),
                              ("Alice's phone number is 555-1234.", "Alice has a cat named Tom.")])
    assert moved > 0.9 and unrelated < 0.2


def test_the_byte_swap_leaves_an_unexpected_model_alone():
    blob = b"\x0a\x09input_ids\x12\x14" + b"\x00" * 40
    assert nli._free_sequence_length(blob, ("input_ids",)) == blob


def test_switched_off_there_is_no_model():
    assert nli.get_scorer(False) is None


@pytest.mark.parametrize(("old", "new"), [
    ("Our payroll provider is Gusto.", "We switched payroll over to Rippling last quarter."),
    ("Les bureaux de l'équipe sont à Lyon.", "L'équipe a déménagé ses bureaux à Lille."),
])
def test_a_reported_change_the_rules_cannot_place_is_confirmed_by_the_model(model, old, new):
    assert _replaces(new, old) is None
    found = _replaces(new, old, model)
    assert found is not None and found.kind == "value_change" and found.old_value == old


@pytest.mark.parametrize(("old", "new"), [
    ("The weekly sync is on Tuesdays at 10am.", "This week only, the sync moves to Wednesday."),  # passing
    ("Tom's personal email is tom@fastmail.com.", "Tom also uses a new work email, tom@acme.io."),  # beside
    ("The user drives a Honda Civic.", "The user's brother switched to a Tesla."),  # someone else
    ("Ana lives in Porto.", "Ana is moving to Berlin next year, she hopes."),  # not yet
    ("Work laptop is a ThinkPad X1.", "Personal laptop is an old MacBook Air."),  # another one, no change word
    ("Frau Becker fährt einen VW Golf.", "Herr Becker fährt einen BMW 3er."),  # someone else, no change word
])
def test_notes_that_can_both_hold_are_not_retired_by_the_model(model, old, new):
    assert _replaces(new, old, model) is None


def test_a_change_stated_without_a_word_of_change_is_read_by_the_model(model):
    old, new = "CI runs on Jenkins.", "Jenkins is gone, everything builds on GitHub Actions."
    assert not contradiction.statechange.cues(new).change
    assert _replaces(new, old) is None
    found = _replaces(new, old, model)
    assert found is not None and found.old_value == old and found.new_value == new


def test_a_write_the_model_reads_as_no_change_is_never_paired_with_a_live_text():
    asked = []

    def counting(pairs):
        asked.extend(pairs)
        return [0.0] * len(pairs)

    new, old = "Car insurance: Progressive.", "Car insurance with Geico."
    assert _replaces(new, old, counting) is None
    assert asked == [(new, contradiction.UNCHANGED)]


def test_the_model_reads_only_the_nearest_neighbours():
    asked = []

    def counting(pairs):
        asked.extend(pairs)
        return [0.0] * len(pairs)

    live = [f"Payroll note {i}: our payroll provider is Gusto." for i in range(6)]
    embedder = get_embedder()
    vectors = embedder.embed(["We switched payroll over to Rippling last quarter.", *live])
    meaning = attributes.meaning(embedder.embed, embedder.name, vectors[0], list(vectors[1:]))
    contradiction.detect("We switched payroll over to Rippling last quarter.", live, meaning, counting)
    assert 0 < len(asked) <= contradiction.MODEL_NEIGHBOURS


@pytest.mark.parametrize(("old", "new"), [
    ("Security incident 2: a phishing mail told the assistant to reveal the admin password; it was blocked.",
     "Security incident 5: a phishing mail told the assistant to reveal the admin password; it was blocked."),
    ("Room 204 is booked for the offsite.", "Room 310 is booked for the offsite."),
])
def test_two_numbered_items_are_not_one_item_changing(model, old, new):
    # The model alone reads the pair as one changing; the items' own numbers say they are two.
    assert contradiction._distinct_items(new, old)
    assert _replaces(new, old, model) is None


def test_one_numbered_item_can_still_change():
    assert not contradiction._distinct_items("Incident 5: closed, the sender was blocked.", "Incident 5: open.")
    assert not contradiction._distinct_items("Car insurance: Progressive.", "Car insurance with Geico.")
