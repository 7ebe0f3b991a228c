"""SQL about database sessions themselves rather than tables: session-level advisory locks (one
leader per background job), liveness pings and the name a connection shows in pg_stat_activity."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection


def ping(conn: Connection) -> None:
    """One trivial round trip; raises when the connection (and any lock it held) is gone."""
    conn.execute(text("SELECT 1"))


def try_advisory_lock(conn: Connection, *, key: int) -> bool:
    """Take the session-level advisory lock `key` on `conn` if it is free."""
    return bool(conn.scalar(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}))


def advisory_unlock(conn: Connection, *, key: int) -> None:
    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})


def set_application_name(conn: Connection, *, name: str) -> None:
    """What pg_stat_activity shows for this connection (for operators)."""
    conn.execute(text("SELECT set_config('application_name', :name, false)"), {"name": name})
