"""SQL of the memory state check (`app.services.audit.state_check`): each stored memory of a tenant beside
the latest audit entry about it (index `audit_entries_memory_state`, migration 0029), and the
tenant's integrity alarm (table `integrity_alarms`). Every query is scoped by tenant and its chain."""

from __future__ import annotations

from typing import Iterator, Sequence

from sqlalchemy import text
from sqlalchemy.engine import Connection, Row
from sqlalchemy.orm import Session

# What a state covers (app.core.state_digest), named as the model names them.
_STATE_COLUMNS = ("m.id, m.tenant_id, m.agent_id, m.user_id, m.type, m.status, m.source, m.confidence, "
                  "m.score_multiplier, m.expires_at, m.created_at, m.live_from, m.ended_at, m.updated_at, "
                  "m.hard_deleted, m.merged_into, m.superseded_by, m.content, m.metadata AS metadata_, m.tags, "
                  "m.digest_key")

# Every memory of the tenant and every memory its chain speaks of, side by side (a row alone:
# never audited; an entry alone: the row is gone). `audited_id` is the entry's subject.
_ALL = text(f"""
    SELECT {_STATE_COLUMNS}, a.subject_id AS audited_id, a.seq, a.entry
    FROM (SELECT * FROM memories WHERE tenant_id = :tenant) m
    FULL JOIN (SELECT DISTINCT ON (subject_id) subject_id, seq, entry FROM audit_entries
               WHERE chain_id = :chain AND subject_type = 'memory'
               ORDER BY subject_id, seq DESC) a ON a.subject_id = m.id""")

_SOME = text(f"""
    SELECT {_STATE_COLUMNS}, a.subject_id AS audited_id, a.seq, a.entry
    FROM memories m
    LEFT JOIN LATERAL (SELECT subject_id, seq, entry FROM audit_entries
                       WHERE chain_id = :chain AND subject_type = 'memory' AND subject_id = m.id
                       ORDER BY seq DESC LIMIT 1) a ON true
    WHERE m.tenant_id = :tenant AND m.id = ANY(:ids)""")


def all_with_latest_entry(session: Session, *, tenant_id: str, chain_id: str) -> Iterator[Row]:
    """Every memory of the tenant with the latest audit entry about it (and entries about memories
    no longer stored, with NULL memory columns), streamed in batches, in no particular order."""
    return iter(session.execute(_ALL, {"tenant": tenant_id, "chain": chain_id},
                                execution_options={"yield_per": 2000}))


def some_with_latest_entry(conn: Session | Connection, *, tenant_id: str, chain_id: str,
                           ids: Sequence[str]) -> list[Row]:
    """The tenant's memories `ids` with the latest audit entry about each: one statement."""
    return list(conn.execute(_SOME, {"tenant": tenant_id, "chain": chain_id, "ids": list(ids)}))


def memories_without_state(session: Session, *, tenant_id: str, chain_id: str) -> list[Row]:
    """The tenant's memories whose latest audit entry records no state (written before state
    digests existed): what a baseline vouches for. A memory with no audit entry at all is not
    among them: nothing ever wrote it, so no baseline may vouch for it."""
    rows = session.execute(text(f"""
        SELECT {_STATE_COLUMNS}, a.seq, a.entry FROM memories m
        CROSS JOIN LATERAL (SELECT seq, entry FROM audit_entries
                            WHERE chain_id = :chain AND subject_type = 'memory' AND subject_id = m.id
                            ORDER BY seq DESC LIMIT 1) a
        WHERE m.tenant_id = :tenant
          AND NOT (convert_from(a.entry, 'UTF8')::jsonb -> 'data' ? 'state')
        ORDER BY m.id"""), {"tenant": tenant_id, "chain": chain_id})
    return list(rows)


# --- alarms ------------------------------------------------------------------------------------

_ALARM_COLUMNS = ("id, tenant_id, memory_id, expected_seq, reason, mismatches, detected_by, detected_at, "
                  "announced_at")


def raise_alarm(conn: Connection, *, tenant_id: str, memory_id: str | None, expected_seq: int | None,
                reason: str, mismatches: int, detected_by: str) -> bool:
    """Open the tenant's integrity alarm unless one is open; True when this call opened it."""
    return conn.execute(text(
        "INSERT INTO integrity_alarms (tenant_id, memory_id, expected_seq, reason, mismatches, detected_by)"
        " VALUES (:tenant, :memory, :seq, :reason, :n, :by)"
        " ON CONFLICT (tenant_id) WHERE cleared_at IS NULL DO NOTHING RETURNING id"),
        {"tenant": tenant_id, "memory": memory_id, "seq": expected_seq, "reason": reason, "n": mismatches,
         "by": detected_by}).first() is not None


def clear_alarm(conn: Connection, *, tenant_id: str) -> bool:
    """Close the tenant's open alarm (its memories match their audited state again)."""
    return conn.execute(text("UPDATE integrity_alarms SET cleared_at = now() WHERE tenant_id = :tenant"
                             " AND cleared_at IS NULL RETURNING id"), {"tenant": tenant_id}).first() is not None


def open_alarms_of(session: Session | Connection, tenant_ids: Sequence[str]) -> list[Row]:
    """The open integrity alarms of these tenants, oldest first."""
    if not tenant_ids:
        return []
    return list(session.execute(text(
        f"SELECT {_ALARM_COLUMNS} FROM integrity_alarms WHERE tenant_id = ANY(:tenants) AND cleared_at IS NULL"
        " ORDER BY detected_at"), {"tenants": list(tenant_ids)}))


def unannounced(session: Session | Connection, limit: int = 100) -> list[Row]:
    """Open alarms whose `integrity.mismatch` event is not written yet."""
    return list(session.execute(text(
        f"SELECT {_ALARM_COLUMNS} FROM integrity_alarms WHERE cleared_at IS NULL AND announced_at IS NULL"
        " ORDER BY id LIMIT :limit"), {"limit": limit}))


def mark_announced(session: Session, *, tenant_id: str, alarm_id: int) -> bool:
    """Claim the alarm's announcement (row-locked until commit); False if already announced."""
    return session.execute(text(
        "UPDATE integrity_alarms SET announced_at = now() WHERE tenant_id = :tenant AND id = :id"
        " AND announced_at IS NULL RETURNING id"), {"tenant": tenant_id, "id": alarm_id}).first() is not None


def tenant_ids(session: Session | Connection) -> list[str]:
    """Every tenant, in order (the periodic check's round)."""
    return list(session.scalars(text("SELECT id FROM tenants ORDER BY id")))
