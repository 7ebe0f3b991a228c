"""SQL for stored answers to idempotent requests (`idempotency_keys`) and the per-key lock that
makes a duplicate wait for the first. Every query is scoped by tenant (except the purge of
expired rows, a job over all tenants)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select, text, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.db.models import IdempotencyKey

_TABLE = IdempotencyKey.__table__


def lock_key(conn: Connection, *, tenant_id: str, key: str, wait: str) -> None:
    """Hold the tenant's key until the transaction ends, waiting at most `wait` (a PostgreSQL
    interval) for a holder: past it the lock_timeout error (SQLSTATE 55P03) is raised as
    OperationalError. Later lock waits of the transaction are not limited."""
    conn.execute(text(f"SET LOCAL lock_timeout = '{wait}'"))
    conn.execute(select(func.pg_advisory_xact_lock(func.hashtext(tenant_id), func.hashtext(key))))
    conn.execute(text("SET LOCAL lock_timeout = DEFAULT"))


def live_answer(conn: Connection, *, tenant_id: str, key: str):
    """(fingerprint, status_code, headers, body) stored under the key and not yet expired, or None."""
    return conn.execute(select(_TABLE.c.fingerprint, _TABLE.c.status_code, _TABLE.c.headers, _TABLE.c.body).where(
        _TABLE.c.tenant_id == tenant_id, _TABLE.c.key == key, _TABLE.c.expires_at > func.now())).first()


def upsert(conn: Connection, *, tenant_id: str, key: str, values: dict[str, Any]) -> None:
    """Store the answer under the key, replacing an (expired) row of the same key."""
    conn.execute(insert(_TABLE).values(tenant_id=tenant_id, key=key, **values)
                 .on_conflict_do_update(index_elements=[_TABLE.c.tenant_id, _TABLE.c.key], set_=values))


def purge_expired(session: Session, *, batch: int) -> int:
    """Delete up to `batch` expired rows, oldest first; returns how many went."""
    expired = (select(_TABLE.c.tenant_id, _TABLE.c.key).where(_TABLE.c.expires_at <= func.now())
               .order_by(_TABLE.c.expires_at).limit(batch))
    result = session.execute(delete(_TABLE).where(tuple_(_TABLE.c.tenant_id, _TABLE.c.key).in_(expired)))
    return result.rowcount or 0
