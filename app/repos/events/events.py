"""SQL for the per-tenant event log (`events`): ids are dense per tenant, assigned under the
tenant's chain lock by `app.services.events.events`. Every query is scoped by tenant."""

from __future__ import annotations

from typing import Any, Sequence

from psycopg.types.json import Jsonb
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from app.db.models import Event


def insert_many(session: Session, rows: list[dict[str, Any]]) -> None:
    """Insert events (dicts of `tenant_id, id, type, payload, created_at`) in one statement."""
    session.execute(insert(Event), rows)


NEW_ROWS_SQL = ("INSERT INTO events (tenant_id, id, type, payload, created_at) "
                "VALUES (%(tenant_id)s, %(id)s, %(type)s, %(payload)s, %(created_at)s)")


def insert_rows(rows: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """`insert_many`'s rows as an INSERT's psycopg text and parameter rows (payload as JSONB), for
    `app.services.audit.audit_commit.insert_with_commit`."""
    return NEW_ROWS_SQL, [{**row, "payload": Jsonb(row["payload"])} for row in rows]


def after(session: Session, *, tenant_id: str, after_id: int, limit: int) -> Sequence[Any]:
    """(id, type, payload, created_at) of the tenant's events with id > `after_id`, oldest first."""
    return session.execute(
        select(Event.id, Event.type, Event.payload, Event.created_at)
        .where(Event.tenant_id == tenant_id, Event.id > after_id).order_by(Event.id).limit(limit)).all()


def latest_id(session: Session, *, tenant_id: str) -> int:
    """The tenant's newest event id (0 when it has none)."""
    return session.execute(select(func.max(Event.id)).where(Event.tenant_id == tenant_id)).scalar() or 0


async def listen(conn, *, channel: str) -> None:
    """Subscribe a dedicated (autocommit, asynchronous psycopg) connection to `channel`'s
    notifications; the caller reads them with `conn.notifies()`."""
    await conn.execute(f"LISTEN {channel}")
