"""SQL reading a tenant's audit chain for people (a memory's history, the auditor's page). The
chain's writes, verification and export live with the audit log (`app.services.audit`). The
chain id is the tenant's (`app.services.audit.chain_for`), so every read here is tenant-scoped."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import AuditEntry


def about_subject(session: Session, *, chain_id: str, subject_id: str) -> list:
    """(seq, entry JSON text) of the chain's entries about `subject_id`, oldest first."""
    return session.execute(
        select(AuditEntry.seq, AuditEntry.entry).where(AuditEntry.chain_id == chain_id,
                                                       AuditEntry.subject_id == subject_id)
        .order_by(AuditEntry.seq)).all()


def length(session: Session, *, chain_id: str) -> int:
    """How many entries the chain holds (its head's seq; 0 when empty)."""
    return int(session.scalar(select(func.coalesce(func.max(AuditEntry.seq), 0))
                              .where(AuditEntry.chain_id == chain_id)) or 0)
