"""SQL of erasure receipts (migration 0043) and of the audit entry a receipt cites: the latest
event of the tenant's chain that ended the memory. Every query is scoped by tenant."""

from __future__ import annotations

from datetime import datetime
from typing import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import AuditEntry, ErasureReceipt

PAGE = 1000


def ending_event(session: Session, *, tenant_id: str, chain_id: str, memory_id: str,
                 event_types: Sequence[str]) -> tuple[int, str] | None:
    """(seq, event type) of the newest entry of the chain whose subject is the memory and whose
    event ended it; None when there is none."""
    row = session.execute(select(AuditEntry.seq, AuditEntry.event_type).where(
        AuditEntry.chain_id == chain_id, AuditEntry.tenant_id == tenant_id, AuditEntry.subject_type == "memory",
        AuditEntry.subject_id == memory_id, AuditEntry.event_type.in_(list(event_types)),
    ).order_by(AuditEntry.seq.desc()).limit(1)).first()
    return (row.seq, row.event_type) if row is not None else None


def insert(session: Session, *, tenant_id: str, memory_id: str, backend_id: str, store: str, audit_seq: int,
           confirmed_at: datetime, note: str) -> None:
    session.add(ErasureReceipt(tenant_id=tenant_id, memory_id=memory_id, backend_id=backend_id, store=store,
                               audit_seq=audit_seq, confirmed_at=confirmed_at, note=note))


def for_memory(session: Session, *, tenant_id: str, memory_id: str) -> list[ErasureReceipt]:
    """The memory's receipts, oldest first."""
    return list(session.scalars(select(ErasureReceipt).where(
        ErasureReceipt.tenant_id == tenant_id, ErasureReceipt.memory_id == memory_id).order_by(ErasureReceipt.id)))


def for_tenant(session: Session, *, tenant_id: str, after_id: int = 0, limit: int = PAGE) -> list[ErasureReceipt]:
    """The tenant's receipts after `after_id`, oldest first, `limit` at a time (the export pages through)."""
    return list(session.scalars(select(ErasureReceipt).where(
        ErasureReceipt.tenant_id == tenant_id, ErasureReceipt.id > after_id).order_by(ErasureReceipt.id).limit(limit)))


def count_for_tenant(session: Session, *, tenant_id: str, since: datetime) -> int:
    """Receipts the tenant's stores confirmed since `since` (the router benchmark's figure)."""
    return session.scalar(select(func.count()).select_from(ErasureReceipt).where(
        ErasureReceipt.tenant_id == tenant_id, ErasureReceipt.confirmed_at >= since)) or 0


def count_alerts(session: Session, *, tenant_id: str, chain_id: str, event_type: str, since: datetime) -> int:
    """Audit entries of `event_type` on the tenant's chain since `since` (the benchmark's alerts)."""
    return session.scalar(select(func.count()).select_from(AuditEntry).where(
        AuditEntry.chain_id == chain_id, AuditEntry.tenant_id == tenant_id, AuditEntry.event_type == event_type,
        AuditEntry.ts >= since)) or 0
