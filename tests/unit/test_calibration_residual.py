"""The scope-residual similarity recall's gate adds to the lift (`app.core.relevance`): from four
dot products it must equal the cosine of the centred vectors, which calibration and the search
each compute their own way."""

import numpy as np
import pytest

from app.core.relevance import residual_similarity


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def test_equals_the_cosine_of_the_centred_vectors():
    rng = np.random.default_rng(7)
    shared = rng.normal(size=32) * 3  # what every memory of the scope has in common (the name)
    facts = _unit(shared + rng.normal(size=(8, 32)))
    query = _unit(shared + rng.normal(size=32))
    centroid = facts.mean(axis=0)
    for fact in facts:
        direct = (query - centroid) @ (fact - centroid) / (
            np.linalg.norm(query - centroid) * np.linalg.norm(fact - centroid))
        got = residual_similarity(float(query @ fact), float(query @ centroid), float(fact @ centroid),
                                  float(centroid @ centroid))
        assert got == pytest.approx(float(direct), abs=1e-9)


def test_shared_direction_is_discounted():
    # Query and fact share only the scope's common direction: close in cosine, unrelated once centred.
    shared, topic_a, topic_b, other = np.eye(4)
    facts = _unit(np.array([shared + 0.5 * topic_a, shared + 0.5 * other, shared - 0.5 * other]))
    query = _unit(shared + 0.5 * topic_b)
    centroid = facts.mean(axis=0)
    fact = facts[1]
    assert query @ fact > 0.7
    assert residual_similarity(float(query @ fact), float(query @ centroid), float(fact @ centroid),
                               float(centroid @ centroid)) < 0.2


def test_a_one_memory_scope_has_no_residual():
    fact = _unit(np.array([1.0, 2.0, 2.0]))
    query = _unit(np.array([1.0, 0.0, 0.0]))
    assert residual_similarity(float(query @ fact), float(query @ fact), 1.0, 1.0) == 0.0
