"""SQL of memory lineage (migration 0041): the `memory_derivations` rows every deriving path
writes, the transitive walk recover follows from a set of memories (its blast radius), and the
reads of the read audit that returned memories of it. Every query is scoped by tenant."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from sqlalchemy import text
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session

_INSERT = text("""
    INSERT INTO memory_derivations (tenant_id, derived_id, source_id, kind, via, created_at)
    SELECT :tenant_id, :derived_id, s, :kind, :via, :at FROM unnest(CAST(:source_ids AS text[])) AS s
    WHERE s <> :derived_id
    ON CONFLICT DO NOTHING""")


def insert(session: Session, *, tenant_id: str, derived_id: str, source_ids: Sequence[str], kind: str,
           via: str | None, at: datetime) -> None:
    """Record that `derived_id` was derived from each of `source_ids` (once per kind) at `at`, in
    the caller's transaction."""
    if source_ids:
        session.execute(_INSERT, {"tenant_id": tenant_id, "derived_id": derived_id, "source_ids": list(source_ids),
                                  "kind": kind, "via": via, "at": at})


_INSERT_MANY = text("""
    INSERT INTO memory_derivations (tenant_id, derived_id, source_id, kind, via, created_at)
    VALUES (:tenant_id, :derived_id, :source_id, :kind, :via, coalesce(CAST(:created_at AS timestamptz), now()))
    ON CONFLICT DO NOTHING""")


def insert_many(session: Session, rows: Sequence[dict]) -> None:
    """Record many edges at once (`tenant_id`, `derived_id`, `source_id`, `kind`, `via`,
    `created_at` or None for now): an import's links, a benchmark's seeded lineage."""
    if rows:
        session.execute(_INSERT_MANY, [{"via": None, "created_at": None, **r} for r in rows])


@dataclass(frozen=True)
class Step:
    """One memory reached from a root by the walk: at `depth` edges, first able to carry the root's
    content from `tainted_at` (the latest edge time of a path whose edges run forward in time), by
    the edge `kind` (made `edge_via`, a change or run) from `parent` (itself reached at `depth - 1`
    from `parent_tainted_at`)."""

    root_id: str
    memory_id: str
    depth: int
    tainted_at: datetime
    parent: str | None
    parent_tainted_at: datetime | None
    kind: str | None
    edge_via: str | None


# The walk: from each root (a memory of the tenant), every derivation whose source the walk has
# reached and which was made no earlier than the content reached it (a memory merged before the
# poison was merged into its source holds none of it). UNION drops a row seen before, and the
# depth bound ends every cycle: at most (edges x depth) rows per root, never one per path.
_WALK = text("""
    WITH RECURSIVE walk (root_id, memory_id, depth, tainted_at, parent, parent_tainted_at, kind, edge_via) AS (
        SELECT m.id, m.id, 0, m.created_at, CAST(NULL AS text), CAST(NULL AS timestamptz), CAST(NULL AS text),
               CAST(NULL AS text)
        FROM memories m WHERE m.tenant_id = :tenant_id AND m.id = ANY(CAST(:roots AS text[]))
      UNION
        SELECT w.root_id, d.derived_id, w.depth + 1, greatest(w.tainted_at, d.created_at), w.memory_id,
               w.tainted_at, d.kind, d.via
        FROM walk w
        JOIN memory_derivations d ON d.tenant_id = :tenant_id AND d.source_id = w.memory_id
        WHERE w.depth < :max_depth AND d.derived_id <> w.root_id AND d.created_at >= w.tainted_at
    )
    SELECT root_id, memory_id, depth, tainted_at, parent, parent_tainted_at, kind, edge_via FROM walk""")


def walk(session: Session, *, tenant_id: str, roots: Sequence[str], max_depth: int) -> list[Step]:
    """Every step of the walk from `roots` up to `max_depth` edges (the roots themselves at depth 0)."""
    if not roots:
        return []
    rows = session.execute(_WALK, {"tenant_id": tenant_id, "roots": list(roots), "max_depth": max_depth})
    return [Step(*row) for row in rows]


_READS = text("""
    SELECT m.memory_id, r.id, r.read_at, r.actor, r.key_id, r.agent_id, r.operation, r.query_digest, r.run_id,
           e.seq
    FROM unnest(CAST(:ids AS text[]), CAST(:since AS timestamptz[])) AS t (memory_id, since)
    JOIN memory_reads m ON m.tenant_id = :tenant_id AND m.memory_id = t.memory_id AND m.read_at >= t.since
    JOIN read_records r ON r.tenant_id = m.tenant_id AND r.id = m.read_id
    LEFT JOIN audit_entries e ON e.chain_id = :chain_id AND e.subject_id = m.read_id
    ORDER BY r.read_at, r.id""")


def reads_of(session: Session, *, tenant_id: str, chain_id: str, since: dict[str, datetime]) -> list[Row]:
    """The reads that returned each memory of `since` at or after its time, oldest first: one row per
    (memory, read), with the read's record and the seq of its audit entry (`chain_id`: the tenant's)."""
    if not since:
        return []
    ids = sorted(since)
    return list(session.execute(_READS, {"tenant_id": tenant_id, "chain_id": chain_id, "ids": ids,
                                         "since": [since[i] for i in ids]}))


_SOURCES = text("""
    SELECT derived_id, source_id, kind, via, created_at FROM memory_derivations
    WHERE tenant_id = :tenant_id AND derived_id = ANY(CAST(:ids AS text[]))
    ORDER BY derived_id, created_at, source_id""")


def sources_of(session: Session, *, tenant_id: str, ids: Sequence[str]) -> list[Row]:
    """The derivation rows of memories `ids` (what each was derived from)."""
    if not ids:
        return []
    return list(session.execute(_SOURCES, {"tenant_id": tenant_id, "ids": list(ids)}))
