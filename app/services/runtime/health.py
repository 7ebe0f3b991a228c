"""Readiness: whether the database answers."""

from __future__ import annotations

from app.repos.runtime import sessions_admin
from app.services.runtime.context import AppContext


def ping_database(ctx: AppContext) -> None:
    """One trivial round trip on a pooled connection; raises when the database does not answer.

    Two tries: after a database restart the first attempt meets a stale pooled connection, which
    invalidates the pool; the second one connects afresh."""
    for attempt in (1, 2):
        try:
            with ctx.db.engine.connect() as conn:
                sessions_admin.ping(conn)
            return
        except Exception:
            if attempt == 2:
                raise


def replica_status(ctx: AppContext) -> list[dict[str, object]] | None:
    """Each read replica probed now (up and how far behind, or down and why); None without replicas.
    A replica that is down leaves the server ready: the primary serves its reads."""
    return ctx.db.replicas.status() if ctx.db.replicas is not None else None
