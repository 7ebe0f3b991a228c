"""SQL of the audit log's write path: the chain lock (with the heads it returns), entry INSERTs
(plain, or as the psycopg text sent in one pipeline with the COMMIT) and signed checkpoints. Reads
for pages, exports and verification are in `audit_reads`; alarms in `audit_alarms`.

The statements are built once at import: building a fresh statement per append cost more client
CPU than the hashing (`memwarden bench audit`)."""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import bindparam, func, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.db import prepared
from app.db.models import AuditCheckpoint, AuditEntry
from app.db.prepared import Statement

_INSERT = insert(AuditEntry.__table__)
_LOCK = select(func.pg_advisory_xact_lock(func.hashtext(bindparam("key"))))
_LOCK_AND_HEADS = Statement("SELECT * FROM memwarden_lock_chain(%(chain)s, %(tenant)s, %(notify)s)")


def lock_chain(session: Session, chain_id: str) -> None:
    """The chain's transaction-scoped advisory lock."""
    session.connection().execute(_LOCK, {"key": "memwarden.audit:" + chain_id})


def lock_and_read_heads(session: Session, *, chain_id: str, tenant_id: str | None, notify: bool) -> Any:
    """One round trip (migrations 0014, 0016, 0020): take the chain's lock and read its audit head
    with the rows the head check needs, the open alarm if any, and — with `notify` — the event
    log's head, whether the tenant has webhooks, and the wake-up NOTIFY. A prepared statement on
    the session's psycopg connection (`app.db.prepared`): a named tuple, not a SQLAlchemy Row."""
    return lock_and_read_heads_on(prepared.driver_of(session), chain_id=chain_id, tenant_id=tenant_id, notify=notify)


def lock_and_read_heads_on(conn: prepared.Conn, *, chain_id: str, tenant_id: str | None, notify: bool) -> Any:
    """`lock_and_read_heads` on a psycopg connection in a transaction (`AuditLog.commit_on_driver`)."""
    return prepared.fetch_named(conn, _LOCK_AND_HEADS, {"chain": chain_id, "tenant": tenant_id, "notify": notify})


def insert_entries(conn: Connection, rows: list[dict[str, Any]]) -> None:
    conn.execute(_INSERT, rows)


@functools.cache
def pipelined_insert_sql(columns: tuple[str, ...]) -> str:
    """The entry INSERT as psycopg text (its placeholders), for rows with these keys: sent by the
    driver itself in one pipeline with the COMMIT."""
    return (f"INSERT INTO {AuditEntry.__tablename__} ({', '.join(columns)}) "
            f"VALUES ({', '.join(f'%({c})s' for c in columns)})")


def add_checkpoint(session: Session, checkpoint: AuditCheckpoint) -> None:
    session.add(checkpoint)
    session.flush()
