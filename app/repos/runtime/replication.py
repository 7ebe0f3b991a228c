"""SQL of read replicas: WAL positions on the primary (per key's last write) and on a standby
(how far it has replayed). Positions travel as PostgreSQL's `pg_lsn` text ("16/B374D848")."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection


def note_key_commit(conn: Connection, *, tenant_id: str, key_id: str) -> None:
    """Record, on the primary, that everything the key has committed so far lies before the
    current WAL insert position (never moving a key's position back)."""
    conn.execute(text(
        "INSERT INTO key_commit_lsns (tenant_id, key_id, lsn) VALUES (:t, :k, pg_current_wal_insert_lsn()) "
        "ON CONFLICT (tenant_id, key_id) DO UPDATE SET lsn = greatest(key_commit_lsns.lsn, excluded.lsn)"),
        {"t": tenant_id, "k": key_id})


def key_commit_lsn(conn: Connection, *, tenant_id: str, key_id: str) -> str | None:
    """The key's last recorded write position on the primary; None when it has not written."""
    return conn.scalar(text("SELECT lsn::text FROM key_commit_lsns WHERE tenant_id = :t AND key_id = :k"),
                       {"t": tenant_id, "k": key_id})


def current_lsn(conn: Connection) -> str:
    """The primary's WAL insert position now: everything committed so far lies before it."""
    return conn.scalar(text("SELECT pg_current_wal_insert_lsn()::text"))


def replayed_lsn(conn: Connection) -> str | None:
    """How far a standby has replayed the primary's WAL; None on a server that is not a standby."""
    return conn.scalar(text("SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()::text END"))
