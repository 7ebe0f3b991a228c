"""SQL reading audit chains (the appends and checkpoint writes stay with the audit log's commit
path, `app.services.audit.audit`): entries, links and leaves for verification, export and consistency
proofs, signed checkpoints, a tenant's entries for people (a memory's history, the auditor's page),
and the background job's list of chains that need a checkpoint. Every read is scoped by a chain
id (`app.services.audit.audit.chain_for`: one per tenant, and `system`)."""

from __future__ import annotations

from typing import Any, Sequence
from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.db.models import AuditCheckpoint, AuditEntry


def about_subject(session: Session, *, chain_id: str, subject_id: str) -> Sequence[Any]:
    """(seq, entry JSON text) of the chain's entries about `subject_id`, oldest first."""
    return session.execute(
        select(AuditEntry.seq, AuditEntry.entry).where(AuditEntry.chain_id == chain_id,
                                                       AuditEntry.subject_id == subject_id)
        .order_by(AuditEntry.seq)).all()


def length(session: Session, *, chain_id: str) -> int:
    """How many entries the chain holds (its head's seq; 0 when empty)."""
    return int(session.scalar(select(func.coalesce(func.max(AuditEntry.seq), 0))
                              .where(AuditEntry.chain_id == chain_id)) or 0)


# Chains whose newest entry is past their newest checkpoint: one index probe per chain.
_UNSIGNED_CHAINS = text("""
    SELECT c.chain_id
    FROM (SELECT 'system' AS chain_id UNION ALL SELECT 'tenant:' || id FROM tenants) c
    CROSS JOIN LATERAL (SELECT max(seq) AS size FROM audit_entries e WHERE e.chain_id = c.chain_id) head
    CROSS JOIN LATERAL (SELECT max(size) AS size FROM audit_checkpoints k WHERE k.chain_id = c.chain_id) signed
    WHERE head.size > coalesce(signed.size, 0)
    ORDER BY c.chain_id""")


def unsigned_chains(conn: Connection) -> list[str]:
    """Every chain (the system's and each tenant's) that grew past its newest signed checkpoint."""
    return list(conn.scalars(_UNSIGNED_CHAINS))


def snapshot_read_only(session: Session) -> None:
    """Make the session's new transaction one REPEATABLE READ, READ ONLY snapshot (an export or a
    verification reads the chain as of one instant). The first statement of the transaction."""
    session.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"))


def links_from(session: Session, *, chain_id: str, first: int) -> Sequence[Any]:
    """(seq, leaf_hash, chain_hash) of the chain's entries from seq `first` on, in order."""
    return session.execute(
        select(AuditEntry.seq, AuditEntry.leaf_hash, AuditEntry.chain_hash)
        .where(AuditEntry.chain_id == chain_id, AuditEntry.seq >= first).order_by(AuditEntry.seq)).all()


def leaf_hashes_through(session: Session, *, chain_id: str, size: int):
    """The chain's leaf hashes of seq 1..`size`, in order, streamed."""
    return session.scalars(select(AuditEntry.leaf_hash).where(
        AuditEntry.chain_id == chain_id, AuditEntry.seq <= size).order_by(AuditEntry.seq)
        .execution_options(yield_per=10_000))


def chain_hash_at(session: Session, *, chain_id: str, seq: int) -> bytes | None:
    return session.scalar(select(AuditEntry.chain_hash).where(AuditEntry.chain_id == chain_id,
                                                              AuditEntry.seq == seq))


QUERY_COLUMNS = (AuditEntry.chain_id, AuditEntry.event_type, AuditEntry.ts, AuditEntry.actor,
                 AuditEntry.subject_type, AuditEntry.subject_id, AuditEntry.tenant_id)
"""The indexed columns that restate what an entry's hashed bytes say (verified against them)."""


def rows_in_range(session: Session, *, chain_id: str, from_seq: int, to_seq: int, with_columns: bool = False):
    """Stored (seq, entry, leaf_hash, chain_hash) rows from_seq..to_seq in order, streamed; with
    `with_columns`, also their `QUERY_COLUMNS` (for verifying what an export serves)."""
    columns = QUERY_COLUMNS if with_columns else ()
    return session.execute(
        select(AuditEntry.seq, AuditEntry.entry, AuditEntry.leaf_hash, AuditEntry.chain_hash, *columns)
        .where(AuditEntry.chain_id == chain_id, AuditEntry.seq >= from_seq, AuditEntry.seq <= to_seq)
        .order_by(AuditEntry.seq).execution_options(yield_per=2000))


def all_entries(session: Session, *, chain_id: str):
    """Every stored entry of the chain (all columns), in order, streamed."""
    return session.execute(
        select(AuditEntry).where(AuditEntry.chain_id == chain_id).order_by(AuditEntry.seq)
        .execution_options(yield_per=2000)).scalars()


def checkpoint_frontier(session: Session, *, chain_id: str, size: int):
    """The stored Merkle frontier of the chain's checkpoint at `size`, or None."""
    return session.scalar(select(AuditCheckpoint.frontier).where(
        AuditCheckpoint.chain_id == chain_id, AuditCheckpoint.size == size))


def first_checkpoint_size_from(session: Session, *, chain_id: str, size: int) -> int | None:
    """The size of the chain's first checkpoint at or after `size`, or None."""
    return session.scalar(select(func.min(AuditCheckpoint.size)).where(
        AuditCheckpoint.chain_id == chain_id, AuditCheckpoint.size >= size))


def checkpoint_notes(session: Session, *, chain_id: str, from_size: int | None = None,
                     to_size: int | None = None) -> list[str]:
    """The signed notes of the chain's checkpoints (those sized from_size..to_size when given), oldest first."""
    stmt = select(AuditCheckpoint.note).where(AuditCheckpoint.chain_id == chain_id)
    if from_size is not None:
        stmt = stmt.where(AuditCheckpoint.size >= from_size)
    if to_size is not None:
        stmt = stmt.where(AuditCheckpoint.size <= to_size)
    return list(session.scalars(stmt.order_by(AuditCheckpoint.size)))


def latest_checkpoint(session: Session, *, chain_id: str) -> AuditCheckpoint | None:
    return session.scalars(select(AuditCheckpoint).where(AuditCheckpoint.chain_id == chain_id)
                           .order_by(AuditCheckpoint.size.desc()).limit(1)).first()


def checkpoints(session: Session, *, chain_id: str) -> list[AuditCheckpoint]:
    """Every signed checkpoint of the chain, oldest first."""
    return list(session.scalars(select(AuditCheckpoint).where(AuditCheckpoint.chain_id == chain_id)
                                .order_by(AuditCheckpoint.size)))
