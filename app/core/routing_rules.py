"""Pure rules of the router (memory backends): which agents a backend takes, and how ranked
results from several stores become one list."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from app.core import fusion

RRF_K = 60
FUSIONS = ("rrf", "max", "weighted")
_AGENTS = re.compile(r"[A-Za-z0-9_.:@*?-]{1,200}")


def agents_like(pattern: str) -> str:
    """A backend's agent glob (`*` and `?` only) as the LIKE pattern the outbox trigger matches;
    ValueError for anything else, so the trigger and `agent_matches` can never disagree."""
    if not _AGENTS.fullmatch(pattern):
        raise ValueError("use letters, digits, _ . : @ - and the wildcards * and ?")
    return pattern.replace("_", "\\_").replace("*", "%").replace("?", "_")


def agent_matches(agent_id: str, pattern: str) -> bool:
    """The same match as the trigger's LIKE of `agents_like(pattern)`."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, agent_id, re.DOTALL) is not None


def fuse(method: str, rankings: Sequence[Sequence[tuple[str, float]]],
         weights: Sequence[float]) -> dict[str, float]:
    """Fuse best-first (id, similarity) lists from several stores into one score per id.

    `rrf` uses ranks only (k = 60), so a store that puts an item first cannot outweigh two stores
    that agree; `max` takes each id's best similarity; `weighted` sums similarity × store weight."""
    if method == "rrf":
        return fusion.rrf([[i for i, _ in ranking] for ranking in rankings], k=RRF_K)
    scores = [dict(ranking) for ranking in rankings]
    if method == "max":
        return fusion.max_fusion(scores)
    if method == "weighted":
        return fusion.weighted(scores, list(weights))
    raise ValueError(f"unknown fusion {method!r}")


def ranked(fused: Mapping[str, float]) -> list[str]:
    """Ids best first (ties by id, so results are reproducible)."""
    return sorted(fused, key=lambda i: (-fused[i], i))


@dataclass
class StoreRanking:
    """One backend's answer: best-first (its own id, similarity), its fusion weight, and which of its
    ids are governed (its id → the Memwarden id it was delivered for, with unchanged content)."""

    name: str
    hits: Sequence[tuple[str, float]]
    governed: Mapping[str, str]
    weight: float = 1.0


@dataclass
class Fused:
    ids: list[str]
    """Memwarden ids, best first, at most k."""
    scores: dict[str, float]
    found_in: dict[str, list[str]] = field(default_factory=dict)
    """Memwarden id → the stores that returned it."""
    dropped: int = 0
    """Backend hits with no governed record (dropped before fusion)."""


def fuse_governed(method: str, local_name: str, local: Sequence[tuple[str, float]], stores: Sequence[StoreRanking],
                  k: int, drop_ungoverned: bool = True) -> Fused:
    """The router's recall fusion: each backend's hits mapped to Memwarden ids through what was
    delivered (a hit with no governed record is dropped and counted; with `drop_ungoverned` off —
    only for the fusion benchmark's baseline — it competes under its own id), then fused with the
    built-in store's ranking and cut to k."""
    rankings = [list(local)]
    weights = [1.0]
    found_in: dict[str, list[str]] = {i: [local_name] for i, _ in local}
    dropped = 0
    for store in stores:
        ranking = []
        for ref, similarity in store.hits:
            memory_id = store.governed.get(ref)
            if memory_id is None:
                if drop_ungoverned:
                    dropped += 1
                    continue
                memory_id = ref
            ranking.append((memory_id, similarity))
            found_in.setdefault(memory_id, []).append(store.name)
        rankings.append(ranking)
        weights.append(store.weight)
    scores = fuse(method, rankings, weights)
    return Fused(ranked(scores)[:k], scores, found_in, dropped)
