"""Rank fusion for hybrid recall (pure).

Three ways to combine several result lists (e.g. vector and keyword search)
into one score per id; higher is better in every case:

* ``rrf``: reciprocal rank fusion. Uses ranks only, so input scales do not
  matter. Each list adds ``1 / (k + rank)`` (rank from 1), so a fused score lies
  in ``(0, n_lists / (k + 1)]``; with k=60 and two lists at most ~0.0328.
* ``max_fusion``: best score of each id across lists. Only meaningful when the
  lists share a scale (e.g. all cosine similarities, or all ``normalise``d).
* ``weighted``: weighted sum, an id missing from a list contributing 0. With
  inputs in [0, 1] and weights summing to 1 the result lies in [0, 1].

``normalise`` min-max scales one list to [0, 1] before ``max_fusion`` or
``weighted`` when the raw scales differ (BM25 vs cosine).

``graph_boost`` is memorywire's graph-hop boost of items linked to other items of the same result set.
"""

from __future__ import annotations

from typing import Hashable, Mapping, Sequence, TypeVar

Id = TypeVar("Id", bound=Hashable)


def rrf(rankings: Sequence[Sequence[Id]], k: int = 60) -> dict[Id, float]:
    """Reciprocal rank fusion of best-first id lists; repeats within a list count once."""
    if k < 0:
        raise ValueError("k must be non-negative")
    fused: dict[Id, float] = {}
    for ranking in rankings:
        seen: set[Id] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused


def max_fusion(scores_by_list: Sequence[Mapping[Id, float]]) -> dict[Id, float]:
    """Each id's highest score over all lists (lists must share a scale)."""
    fused: dict[Id, float] = {}
    for scores in scores_by_list:
        for item, score in scores.items():
            if item not in fused or score > fused[item]:
                fused[item] = score
    return fused


def weighted(
    scores_by_list: Sequence[Mapping[Id, float]], weights: Sequence[float]
) -> dict[Id, float]:
    """Weighted sum of per-list scores; an id absent from a list scores 0 there."""
    if len(scores_by_list) != len(weights):
        raise ValueError("need exactly one weight per score list")
    fused: dict[Id, float] = {}
    for scores, weight in zip(scores_by_list, weights):
        for item, score in scores.items():
            fused[item] = fused.get(item, 0.0) + weight * score
    return fused


def normalise(scores: Mapping[Id, float]) -> dict[Id, float]:
    """Min-max scale scores to [0, 1]; if all are equal, every id gets 1.0."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return {item: 1.0 for item in scores}
    return {item: (score - low) / (high - low) for item, score in scores.items()}


GRAPH_BOOST = 0.1
"""memorywire's graph-hop boost factor (its spec §5): a linked item's score is multiplied by
``1 + GRAPH_BOOST / (1 + hop distance)``."""


def graph_boost(scores: Mapping[Id, float], edges: Sequence[tuple[Id, Id]], hops: int,
                factor: float = GRAPH_BOOST) -> tuple[dict[Id, float], dict[Id, list[Id]]]:
    """memorywire's graph-hop boost over a result set: for every item (anchor) and every other item
    within `hops` undirected `edges` of it, that other item's score is multiplied by
    ``1 + factor / (1 + distance)``. Only items already in `scores` are boosted; paths may pass
    through ids outside it. Returns the new scores and, per boosted item, the anchors that boosted it
    (memorywire's `supporting`), in the order of `scores`."""
    neighbours: dict[Id, set[Id]] = {}
    for a, b in edges:
        if a != b:
            neighbours.setdefault(a, set()).add(b)
            neighbours.setdefault(b, set()).add(a)
    boosted = dict(scores)
    supporting: dict[Id, list[Id]] = {}
    for anchor in scores:
        for item, distance in _within(anchor, neighbours, hops).items():
            if item in scores:
                boosted[item] *= 1.0 + factor / (1.0 + distance)
                supporting.setdefault(item, []).append(anchor)
    return boosted, supporting


def _within(start: Id, neighbours: Mapping[Id, set[Id]], hops: int) -> dict[Id, int]:
    """Every id reachable from `start` in 1..`hops` steps, with its shortest distance."""
    distance = {start: 0}
    frontier = [start]
    for step in range(1, hops + 1):
        frontier = [n for node in frontier for n in neighbours.get(node, ()) if n not in distance]
        for node in frontier:
            distance.setdefault(node, step)
    return {node: d for node, d in distance.items() if d > 0}
