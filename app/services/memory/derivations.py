"""Memory lineage: what each memory was derived from, recorded by every path that derives one, in
the same transaction as the derived memory (migration 0041).

* a merge (`memories.apply_merge`: an agent's merge, an approved merge change, a compaction
  group) derives its canonical memory from each duplicate (`merge`, or `compaction`);
* a staged remember approved into a live memory (`review`, `merge_into`) derives that memory
  from the staged one (`merge`);
* an approval that retires live memories (`supersession.retire`) derives the new memory from
  each one it supersedes (`supersede`): a new value of a key is often written from the old one;
* a consolidation promotion derives its semantic fact from each episodic item of its evidence
  (`consolidation`), staged or live;
* an import links the rows its file says were merged into or superseded by others.

Recover follows these edges from the memories a compromised principal wrote (`blast_radius`):
whatever was derived from poison may carry it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Sequence

from app.core import lineage
from app.core.timefmt import utcnow
from app.repos.memory import derivations as repo

KINDS = ("merge", "compaction", "supersede", "consolidation")
MAX_DEPTH = 16
"""Edges followed from a recovered memory at most. Lineage chains are short (a compaction of a
merge of a promotion is three); a walk that reaches the bound says so (`truncated`) rather than
hiding it."""


def kind_of_merge(strategy: str) -> str:
    """A merge's edge kind: `compaction` when a compaction pass made it (its strategy says so)."""
    return "compaction" if strategy.startswith("compaction:") else "merge"


def record(session, *, tenant_id: str, derived_id: str, source_ids: Sequence[str], kind: str,
           via: str | None = None, at: datetime | None = None) -> None:
    """Record that `derived_id` was derived from `source_ids` now (or `at`), in the caller's transaction."""
    if kind not in KINDS:
        raise ValueError(f"unknown derivation kind {kind!r}")
    repo.insert(session, tenant_id=tenant_id, derived_id=derived_id, source_ids=list(dict.fromkeys(source_ids)),
                kind=kind, via=via, at=at or utcnow())


def blast_radius(session, *, tenant_id: str, roots: Sequence[str], max_depth: int = MAX_DEPTH) -> lineage.Radius:
    """Every memory of the tenant derived from `roots`, transitively, up to `max_depth` edges
    (one step further is walked to tell whether the bound cut anything off)."""
    steps = repo.walk(session, tenant_id=tenant_id, roots=list(dict.fromkeys(roots)), max_depth=max_depth + 1)
    return lineage.radius(steps, max_depth)
