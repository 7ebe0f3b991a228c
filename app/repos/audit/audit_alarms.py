"""SQL for audit chain alarms (table `audit_chain_alarms`, migration 0020): a chain found not to
verify, recorded durably; while a chain's alarm is open every write to the chain is refused (the
open alarm is read under the chain's lock by `memwarden_lock_chain`). At most one open alarm per
chain (a partial unique index), so a second detection of the same break changes nothing."""

from __future__ import annotations

from typing import Sequence

from sqlalchemy import text
from sqlalchemy.engine import Connection, Row
from sqlalchemy.orm import Session

_COLUMNS = "id, chain_id, tenant_id, first_bad_seq, reason, detail, detected_by, detected_at, announced_at"


def raise_alarm(conn: Connection, *, chain_id: str, tenant_id: str | None, first_bad_seq: int | None, reason: str,
                detail: str, detected_by: str) -> bool:
    """Open the chain's alarm unless one is open already; True when this call opened it."""
    return conn.execute(text(
        "INSERT INTO audit_chain_alarms (chain_id, tenant_id, first_bad_seq, reason, detail, detected_by)"
        " VALUES (:chain, :tenant, :seq, :reason, :detail, :by)"
        " ON CONFLICT (chain_id) WHERE cleared_at IS NULL DO NOTHING RETURNING id"),
        {"chain": chain_id, "tenant": tenant_id, "seq": first_bad_seq, "reason": reason,
         "detail": detail[:1000], "by": detected_by}).first() is not None


def open_alarm(session: Session | Connection, chain_id: str) -> Row | None:
    """The chain's open alarm, or None."""
    return session.execute(text(f"SELECT {_COLUMNS} FROM audit_chain_alarms"
                                " WHERE chain_id = :chain AND cleared_at IS NULL"), {"chain": chain_id}).first()


def open_alarms_of(session: Session | Connection, tenant_ids: Sequence[str]) -> list[Row]:
    """The open alarms of these tenants' chains, oldest first."""
    if not tenant_ids:
        return []
    return list(session.execute(text(
        f"SELECT {_COLUMNS} FROM audit_chain_alarms WHERE tenant_id = ANY(:tenants) AND cleared_at IS NULL"
        " ORDER BY detected_at"), {"tenants": list(tenant_ids)}))


def unannounced(session: Session | Connection, limit: int = 100) -> list[Row]:
    """Open alarms of tenant chains whose `audit.chain_broken` event is not written yet."""
    return list(session.execute(text(
        f"SELECT {_COLUMNS} FROM audit_chain_alarms WHERE cleared_at IS NULL AND announced_at IS NULL"
        " ORDER BY id LIMIT :limit"), {"limit": limit}))


def mark_announced(session: Session, alarm_id: int) -> bool:
    """Claim the alarm's announcement (row-locked until commit); False if already announced."""
    return session.execute(text(
        "UPDATE audit_chain_alarms SET announced_at = now() WHERE id = :id AND announced_at IS NULL RETURNING id"),
        {"id": alarm_id}).first() is not None


def clear(session: Session, alarm_id: int, *, cleared_by: str) -> None:
    session.execute(text("UPDATE audit_chain_alarms SET cleared_at = now(), cleared_by = :by WHERE id = :id"),
                    {"id": alarm_id, "by": cleared_by})


def chains_without_alarm(session: Session | Connection) -> list[str]:
    """Every chain (the system chain and each tenant's) that has no open alarm, in order."""
    return list(session.scalars(text(
        "SELECT c.chain_id FROM (SELECT 'system' AS chain_id UNION ALL SELECT 'tenant:' || id FROM tenants) c"
        " WHERE NOT EXISTS (SELECT 1 FROM audit_chain_alarms a WHERE a.chain_id = c.chain_id AND a.cleared_at IS NULL)"
        " ORDER BY c.chain_id")))
