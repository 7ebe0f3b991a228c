"""SQL reading audit chains outside the audit log's own writes, verification and export
(`app.services.audit`): a tenant's entries for people (a memory's history, the auditor's page),
scoped by the tenant's chain id (`app.services.audit.chain_for`), and the background job's list
of chains that need a checkpoint."""

from __future__ import annotations

from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection
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
