"""Rank fusion for hybrid recall."""

from __future__ import annotations

import pytest

from app.core.fusion import graph_boost, max_fusion, normalise, rrf, weighted


def test_rrf_scores_and_order() -> None:
    fused = rrf([["a", "b", "c"], ["b", "d"]], k=60)
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["d"] == pytest.approx(1 / 62)
    assert sorted(fused, key=fused.__getitem__, reverse=True)[:2] == ["b", "a"]


def test_rrf_counts_repeats_once_and_handles_empty() -> None:
    assert rrf([["a", "a", "b"]], k=0) == {"a": 1.0, "b": 1 / 3}
    assert rrf([]) == {}
    with pytest.raises(ValueError):
        rrf([["a"]], k=-1)


def test_max_fusion() -> None:
    fused = max_fusion([{"a": 0.2, "b": 0.9}, {"a": 0.7, "c": -0.1}])
    assert fused == {"a": 0.7, "b": 0.9, "c": -0.1}


def test_weighted() -> None:
    fused = weighted([{"a": 1.0, "b": 0.5}, {"b": 1.0}], [0.7, 0.3])
    assert fused == pytest.approx({"a": 0.7, "b": 0.65})
    with pytest.raises(ValueError):
        weighted([{"a": 1.0}], [0.5, 0.5])


def test_normalise() -> None:
    assert normalise({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert normalise({"a": 5.0, "b": 5.0}) == {"a": 1.0, "b": 1.0}
    assert normalise({}) == {}


def test_graph_boost_only_boosts_linked_items_of_the_result_set() -> None:
    scores = {"a": 1.0, "b": 0.5, "c": 0.2}
    edges = [("a", "x"), ("x", "b"), ("c", "y")]  # a and b linked through x, outside the set; c only to y
    assert graph_boost(scores, edges, 1) == (scores, {})  # two links apart: out of reach of one hop
    boosted, supporting = graph_boost(scores, edges, 2)
    assert boosted == {"a": pytest.approx(1.0 * (1 + 0.1 / 3)), "b": pytest.approx(0.5 * (1 + 0.1 / 3)), "c": 0.2}
    assert supporting == {"b": ["a"], "a": ["b"]} and "x" not in boosted and "y" not in boosted


def test_graph_boost_uses_the_shortest_distance_and_ignores_self_links() -> None:
    boosted, supporting = graph_boost({"a": 1.0, "b": 1.0}, [("a", "b"), ("a", "x"), ("x", "b"), ("a", "a")], 3)
    assert boosted == {"a": pytest.approx(1.05), "b": pytest.approx(1.05)}
    assert supporting == {"b": ["a"], "a": ["b"]}
