"""The blast radius of a set of memories, from the steps of the lineage walk (pure).

The walk (`app.repos.memory.derivations.walk`) yields, per root, every memory it reached with the depth,
the time the root's content could first be in it, and the step before. Several paths may reach
one memory; the one kept is the earliest (then the shortest, then the smallest ids), and its path
is rebuilt by following each step's parent. A memory reached only past the depth bound marks its
root `truncated`: the radius shown is then a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable


@dataclass(frozen=True)
class Reached:
    """One memory derived (transitively) from a root: the path from the root to it, the kind and
    maker (`vias`: change or run) of each edge, and when the root's content could first be in it."""

    memory_id: str
    depth: int
    tainted_at: datetime
    path: tuple[str, ...]
    kinds: tuple[str, ...]
    vias: tuple[str | None, ...]


@dataclass(frozen=True)
class Radius:
    """What each root reached (`by_root`: root → memory id → Reached; the root itself excluded),
    and the roots whose walk hit the depth bound with memories left beyond it."""

    by_root: dict[str, dict[str, Reached]]
    truncated: frozenset[str]
    max_depth: int

    def derived_ids(self) -> set[str]:
        """Every memory reached from some root (roots reached from another root included)."""
        return {m for reached in self.by_root.values() for m in reached}

    def first_tainted(self) -> dict[str, datetime]:
        """Each memory of the radius (roots too) → the earliest time any root's content was in it."""
        out: dict[str, datetime] = {}
        for reached in self.by_root.values():
            for item in reached.values():
                if item.memory_id not in out or item.tainted_at < out[item.memory_id]:
                    out[item.memory_id] = item.tainted_at
        return out


def _key(step: Any) -> tuple[Any, ...]:
    return (step.root_id, step.memory_id, step.depth, step.tainted_at)


def radius(steps: Iterable[Any], max_depth: int) -> Radius:
    """The radius of the walk's `steps` (each with root_id, memory_id, depth, tainted_at, parent,
    parent_tainted_at, kind, edge_via), walked to `max_depth` + 1 so that a memory beyond the
    bound is seen (and dropped, marking its root truncated)."""
    index: dict[tuple[Any, ...], Any] = {}
    best: dict[tuple[str, str], Any] = {}
    beyond: dict[str, set[str]] = {}
    roots: set[str] = set()
    for step in steps:
        if step.depth == 0:
            roots.add(step.root_id)
        if step.depth > max_depth:
            beyond.setdefault(step.root_id, set()).add(step.memory_id)
            continue
        key = _key(step)
        order = (step.parent or "", step.kind or "", step.edge_via or "")
        if key not in index or order < (index[key].parent or "", index[key].kind or "", index[key].edge_via or ""):
            index[key] = step
        pair = (step.root_id, step.memory_id)
        rank = (step.tainted_at, step.depth)
        if pair not in best or rank < (best[pair].tainted_at, best[pair].depth):
            best[pair] = step
    by_root: dict[str, dict[str, Reached]] = {root: {} for root in roots}
    for (root, memory), step in sorted(best.items(), key=lambda item: item[0]):
        if step.depth == 0:
            continue
        step = index[_key(step)]
        path, kinds, vias = [step.memory_id], [step.kind], [step.edge_via]
        cur = step
        while cur.depth > 1:
            cur = index[(root, cur.parent, cur.depth - 1, cur.parent_tainted_at)]
            path.append(cur.memory_id)
            kinds.append(cur.kind)
            vias.append(cur.edge_via)
        path.append(root)
        by_root.setdefault(root, {})[memory] = Reached(memory, step.depth, step.tainted_at, tuple(reversed(path)),
                                                       tuple(reversed(kinds)), tuple(reversed(vias)))
    truncated = frozenset(root for root, ids in beyond.items() if ids - set(by_root.get(root, {})) - {root})
    return Radius(by_root, truncated, max_depth)
