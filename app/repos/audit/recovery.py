"""SQL for `recover`: what one principal (an API key, an agent or a source) wrote or ended in a time
window. Every query is scoped by tenant (and by the tenant's audit chain)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from app.db.models import ApiKey, AuditEntry, Change, Memory

WRITE_EVENTS = ("memory.remembered", "memory.staged")
"""Audit events whose actor is the writer of a memory (how rows older than `written_by` are found)."""

ENDING_EVENTS = ("memory.forgotten", "memory.hard_deleted", "memory.merged_into", "memory.expired.forget",
                 "memory.expired.archive", "memory.expired.demote")
"""Audit events of a memory ended by a forget, a merge or an expire."""

ENDING_OPERATIONS = ("forget", "merge", "expire")


@dataclass(frozen=True)
class Window:
    """Who (`kind` key / agent / source, and its `value`) and when: `since` inclusive, `until` exclusive
    (None: up to now)."""

    tenant_id: str
    chain_id: str
    kind: str
    value: str
    since: datetime
    until: datetime | None = None


def _in_window(column, window: Window):
    conds = [column >= window.since]
    if window.until is not None:
        conds.append(column < window.until)
    return and_(*conds)


def written(session: Session, window: Window, *, status: str | None = "live", lock: bool = False) -> list[Memory]:
    """Memories of the tenant in `status` (None: any) the principal wrote in the window (by creation
    time), oldest first.

    For a key: rows whose `written_by` is the key, and rows older than that column whose
    `memory.remembered` / `memory.staged` audit entry names the key as actor."""
    conds = [Memory.tenant_id == window.tenant_id, _in_window(Memory.created_at, window)]
    if status is not None:
        conds.append(Memory.status == status)
    if window.kind == "key":
        by_audit = select(AuditEntry.subject_id).where(
            AuditEntry.chain_id == window.chain_id, AuditEntry.event_type.in_(WRITE_EVENTS),
            AuditEntry.subject_type == "memory", AuditEntry.actor == f"api_key:{window.value}")
        conds.append(or_(Memory.written_by == window.value,
                         and_(Memory.written_by.is_(None), Memory.id.in_(by_audit))))
    elif window.kind == "agent":
        conds.append(Memory.agent_id == window.value)
    else:
        conds.append(Memory.source == window.value)
    stmt = select(Memory).where(*conds).order_by(Memory.created_at, Memory.id)
    if lock:
        stmt = stmt.with_for_update()
    return list(session.scalars(stmt))


@dataclass(frozen=True)
class Ending:
    """One memory ended by a forget, merge or expire: the audit entry that says so."""

    seq: int
    event_type: str
    ts: datetime
    memory_id: str


def endings(session: Session, window: Window, event_types: Sequence[str] = ENDING_EVENTS) -> list[Ending]:
    """The forgets, merges and expires (audit events `event_types`, one per memory touched) the
    principal made in the window (by audit time), oldest first.

    A key made those its audit entries name as actor, and those of changes it submitted that a
    reviewer approved. An agent made those on its memories (every such operation is agent-scoped).
    A source makes none: it only ever writes."""
    if window.kind == "source":
        return []
    conds = [AuditEntry.chain_id == window.chain_id, AuditEntry.event_type.in_(list(event_types)),
             AuditEntry.subject_type == "memory", _in_window(AuditEntry.ts, window)]
    if window.kind == "key":
        submitted = select(func.unnest(Change.memory_ids)).where(
            Change.tenant_id == window.tenant_id, Change.submitted_by == window.value,
            Change.operation.in_(ENDING_OPERATIONS), Change.status == "approved")
        conds.append(or_(AuditEntry.actor == f"api_key:{window.value}", AuditEntry.subject_id.in_(submitted)))
    else:
        agents = select(Memory.id).where(Memory.tenant_id == window.tenant_id, Memory.agent_id == window.value)
        conds.append(AuditEntry.subject_id.in_(agents))
    rows = session.execute(select(AuditEntry.seq, AuditEntry.event_type, AuditEntry.ts, AuditEntry.subject_id)
                           .where(*conds).order_by(AuditEntry.seq))
    return [Ending(r.seq, r.event_type, r.ts, r.subject_id) for r in rows]


def memories_by_id(session: Session, *, tenant_id: str, ids: Sequence[str], lock: bool = False) -> dict[str, Memory]:
    """The tenant's memories `ids` (any status), by id; locked in id order when asked."""
    if not ids:
        return {}
    stmt = select(Memory).where(Memory.tenant_id == tenant_id, Memory.id.in_(list(ids))).order_by(Memory.id)
    if lock:
        stmt = stmt.with_for_update()
    return {m.id: m for m in session.scalars(stmt)}


def pending_of(session: Session, *, tenant_id: str, operation: str, memory_ids: Sequence[str]) -> set[str]:
    """Which of `memory_ids` a pending change of `operation` already covers (a second recover of the
    same window raises no duplicate changes)."""
    if not memory_ids:
        return set()
    covered = select(func.unnest(Change.memory_ids).label("id")).where(
        Change.tenant_id == tenant_id, Change.operation == operation, Change.status == "pending",
        Change.memory_ids.overlap(list(memory_ids))).subquery()
    return set(session.scalars(select(covered.c.id))) & set(memory_ids)


def key_known(session: Session, *, tenant_id: str, key_id: str) -> bool:
    """Whether the tenant has (or had: revoked keys count) an API key with this id."""
    return session.scalar(select(func.count()).select_from(ApiKey).where(
        ApiKey.tenant_id == tenant_id, ApiKey.id == key_id)) > 0
