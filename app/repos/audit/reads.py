"""SQL of the read audit and read budgets (migration 0026): the `read_records` and `memory_reads`
indexes over `memory.read` audit entries, and the per-window budget counters. The rules (what is
recorded, how much may be read) are `app.services.audit.read_audit` and `app.services.audit.read_budgets`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from sqlalchemy import text, update
from sqlalchemy.engine import Connection, Row
from sqlalchemy.orm import Session

from app.db import prepared
from app.db.models import ApiKey
from app.db.prepared import Statement

_INSERT_RECORDS = text("""
    INSERT INTO read_records (tenant_id, id, read_at, actor, key_id, agent_id, operation, query_digest, memory_ids,
                              run_id)
    VALUES (:tenant_id, :id, :read_at, :actor, :key_id, :agent_id, :operation, :query_digest, :memory_ids, :run_id)""")
_INSERT_MEMORY_READS = text("""
    INSERT INTO memory_reads (tenant_id, memory_id, read_at, read_id)
    SELECT :tenant_id, m, :read_at, :read_id FROM unnest(CAST(:memory_ids AS text[])) AS m GROUP BY m""")


# The same INSERTs as psycopg text, for `insert_with_commit` (one pipeline with the COMMIT).
RECORDS_AT_COMMIT_SQL = """
    INSERT INTO read_records (tenant_id, id, read_at, actor, key_id, agent_id, operation, query_digest, memory_ids,
                              run_id)
    VALUES (%(tenant_id)s, %(id)s, %(read_at)s, %(actor)s, %(key_id)s, %(agent_id)s, %(operation)s,
            %(query_digest)s, %(memory_ids)s::text[], %(run_id)s)"""
MEMORY_READS_AT_COMMIT_SQL = """
    INSERT INTO memory_reads (tenant_id, memory_id, read_at, read_id)
    SELECT %(tenant_id)s, m, %(read_at)s, %(read_id)s FROM unnest(%(memory_ids)s::text[]) AS m GROUP BY m"""


def records_at_commit(records: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """`insert_records` as (psycopg text, parameter rows) pairs, for INSERTs sent with the COMMIT."""
    with_ids = [{"tenant_id": r["tenant_id"], "read_at": r["read_at"], "read_id": r["id"],
                 "memory_ids": r["memory_ids"]} for r in records if r["memory_ids"]]
    pairs = [(RECORDS_AT_COMMIT_SQL, list(records))] if records else []
    return pairs + ([(MEMORY_READS_AT_COMMIT_SQL, with_ids)] if with_ids else [])


def insert_records(session: Session, records: Sequence[dict[str, Any]]) -> None:
    """Index read records (keys of `read_records`) and each memory they returned (`memory_reads`)."""
    if not records:
        return
    conn = session.connection()
    conn.execute(_INSERT_RECORDS, list(records))
    with_ids = [{"tenant_id": r["tenant_id"], "read_at": r["read_at"], "read_id": r["id"],
                 "memory_ids": r["memory_ids"]} for r in records if r["memory_ids"]]
    if with_ids:
        conn.execute(_INSERT_MEMORY_READS, with_ids)


_READERS = text("""
    SELECT r.id, r.read_at, r.actor, r.key_id, r.agent_id, r.operation, r.query_digest, r.run_id,
           cardinality(r.memory_ids) AS returned, e.seq
    FROM memory_reads m
    JOIN read_records r ON r.tenant_id = m.tenant_id AND r.id = m.read_id
    LEFT JOIN audit_entries e ON e.chain_id = :chain_id AND e.subject_id = m.read_id
    WHERE m.tenant_id = :tenant_id AND m.memory_id = :memory_id
      AND (CAST(:after_at AS timestamptz) IS NULL OR (m.read_at, m.read_id) < (:after_at, :after_id))
    ORDER BY m.read_at DESC, m.read_id DESC
    LIMIT :limit""")


def readers_page(session: Session, *, tenant_id: str, chain_id: str, memory_id: str, limit: int,
                 after: tuple[datetime, str] | None) -> list[Row]:
    """The reads that returned `memory_id`, newest first, after the keyset `after` (read_at, id);
    each with the seq of its audit entry (`chain_id` is the tenant's chain)."""
    return list(session.execute(_READERS, {
        "tenant_id": tenant_id, "chain_id": chain_id, "memory_id": memory_id, "limit": limit,
        "after_at": after[0] if after else None, "after_id": after[1] if after else None}))


@dataclass(frozen=True)
class AccessFilter:
    """Which reads `access_page` lists (each field optional)."""

    key_id: str | None = None
    agent_id: str | None = None
    read_from: datetime | None = None
    read_to: datetime | None = None
    run_id: str | None = None


def access_page(session: Session, *, tenant_id: str, chain_id: str, flt: AccessFilter, limit: int,
                after: tuple[datetime, str] | None) -> list[Row]:
    """The tenant's reads matching `flt`, newest first, after the keyset `after` (read_at, id),
    with the memory ids each returned and the seq of its audit entry."""
    conds = ["r.tenant_id = :tenant_id"]
    params: dict[str, Any] = {"tenant_id": tenant_id, "chain_id": chain_id, "limit": limit}
    for column, name, value, op in (("key_id", "key_id", flt.key_id, "="), ("agent_id", "agent_id", flt.agent_id, "="),
                                    ("read_at", "read_from", flt.read_from, ">="),
                                    ("read_at", "read_to", flt.read_to, "<"), ("run_id", "run_id", flt.run_id, "=")):
        if value is not None:
            conds.append(f"r.{column} {op} :{name}")
            params[name] = value
    if after is not None:
        conds.append("(r.read_at, r.id) < (:after_at, :after_id)")
        params.update(after_at=after[0], after_id=after[1])
    stmt = text(f"""
        SELECT r.id, r.read_at, r.actor, r.key_id, r.agent_id, r.operation, r.query_digest, r.run_id, r.memory_ids,
               e.seq
        FROM read_records r
        LEFT JOIN audit_entries e ON e.chain_id = :chain_id AND e.subject_id = r.id
        WHERE {' AND '.join(conds)}
        ORDER BY r.read_at DESC, r.id DESC
        LIMIT :limit""")
    return list(session.execute(stmt, params))


_TAKE_BUDGET = Statement(
    "SELECT * FROM memwarden_take_read_budget(%(tenant_id)s, %(principals)s::text[], %(limits)s::integer[], "
    "%(window_start)s, %(ids)s::text[])")


def take_budget(conn: prepared.Conn, *, tenant_id: str, principals: list[str], limits: list[int],
                window_start: datetime, ids: list[str]) -> Any:
    """Count `ids` against each principal's window (migration 0026): `(allowed, refused_principal,
    used, first_refusal)`. Refused, nothing is counted; allowed, every id not yet seen is. A
    pre-built statement on a psycopg connection in autocommit (`app.db.prepared.autocommit`), or
    on a recall's own connection to the primary: every read that returns memory takes it."""
    return prepared.fetch_named(conn, _TAKE_BUDGET, {"tenant_id": tenant_id, "principals": principals,
                                                     "limits": limits, "window_start": window_start, "ids": ids})


def flag_key(session: Session, *, tenant_id: str, key_id: str, at: datetime) -> None:
    """Mark the key as having met its read budget (shown on the admin page)."""
    session.execute(update(ApiKey).where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id)
                    .values(read_budget_exceeded_at=at))


_PURGE_WINDOWS = text("DELETE FROM read_budget_windows WHERE window_start < :before")
_PURGE_SEEN = text("DELETE FROM read_budget_seen WHERE window_start < :before")


def purge_windows(conn: Connection, *, before: datetime) -> int:
    """Drop budget windows that started before `before` (over); returns how many windows."""
    conn.execute(_PURGE_SEEN, {"before": before})
    return conn.execute(_PURGE_WINDOWS, {"before": before}).rowcount
