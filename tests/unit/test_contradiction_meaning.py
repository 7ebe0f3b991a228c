"""The contradiction reader by meaning (`app.core.screening.contradiction.changed_state`) with the
shipped local embedder: moves, employer changes, new numbers and owners replace; look-alikes do not."""

import numpy as np
import pytest

from app.core import attributes
from app.core.screening import contradiction
from app.embeddings import get_embedder


@pytest.fixture(scope="module")
def embedder():
    return get_embedder("local")


def _flag(embedder, new: str, old: str):
    vectors = embedder.embed([new, old])
    return contradiction.detect(new, [old], attributes.meaning(embedder.embed, embedder.name, vectors[0], [vectors[1]]))


@pytest.mark.parametrize("old, new", [
    ("Ana lives in Lisbon.", "Ana packed up her things and is settled in Porto now."),
    ("Tomás works at Iberdrola.", "Tomás quit Iberdrola; these days he is with Repsol."),
    ("The user's mobile number is 0612 345 678.", "The user got a new mobile number: 0698 765 432."),
    ("The red bike belongs to Omar.", "Omar sold the red bike; it is Lina's now."),
    ("The user's dentist is Dr. Brandt.", "The user changed dentists and now sees Dr. Okafor."),
])
def test_a_change_of_state_replaces(embedder, old, new):
    assert _flag(embedder, new, old) is not None


@pytest.mark.parametrize("old, new", [
    ("Ana lives in Lisbon.", "Ana is spending two weeks in Porto on holiday."),
    ("Tomás works at Iberdrola.", "Tomás also teaches a night class at the university."),
    ("The user drives a Golf.", "The user's sister now drives a Polo."),
    ("Ana lives in Lisbon.", "Ana now loves Lisbon's trams."),
    ("The user lives in Oslo.", "The user switched to Neovim."),
    ("Tom's mobile number is +1 415 555 0132.", "Tom also has a work phone: +1 415 555 0777."),
])
def test_a_look_alike_does_not(embedder, old, new):
    assert _flag(embedder, new, old) is None


def test_without_meaning_the_frames_still_read_and_the_change_of_state_is_not_guessed():
    assert contradiction.detect("Heidi moved to Brooklyn.", ["Heidi lives in Oslo."]) is not None
    assert contradiction.detect("Ana packed up her things and calls Porto home now.", ["Ana lives in Lisbon."]) is None


def test_any_encoder_plugs_in_and_a_vector_of_another_length_is_ignored(embedder):
    calls = []

    def encoder(texts):
        calls.append(len(texts))
        return embedder.embed(texts)

    vectors = embedder.embed(["Ana is settled in Porto now.", "Ana lives in Lisbon."])
    found = attributes.meaning(encoder, "test-encoder", vectors[0], [vectors[1], np.ones(3, dtype=np.float32)])
    assert found.live[0] is not None and found.live[1] is None
    assert found.content.attribute == "residence"
    attributes.meaning(encoder, "test-encoder", vectors[0], [vectors[1]])
    assert calls == [sum(len(v) for v in attributes.ATTRIBUTES.values())]  # prototypes embedded once per model
    assert attributes.meaning(None, "x", vectors[0], [vectors[1]]) is None
