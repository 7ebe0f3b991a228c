"""Liveness and readiness probes."""

from __future__ import annotations

from sqlalchemy import text
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.routing import Route

from app.api.jsonio import json_response
from app.db.embedded import database_lost
from app.errors import Unavailable


async def healthz(request: Request):
    """Liveness: the process is up, and the embedded database it supervises has not been lost for
    good (503 then, so an orchestrator restarts the process). An unreachable external database
    only fails readiness: restarting this process would not bring it back."""
    if database_lost(request.app.state.settings.data_path):
        raise Unavailable("the embedded database could not be restarted; restart this process")
    return json_response({"status": "ok"})


def _ping(ctx) -> None:
    # Two tries: after a database restart the first attempt meets a stale pooled connection,
    # which invalidates the pool; the second one connects afresh.
    for attempt in (1, 2):
        try:
            with ctx.db.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return
        except Exception:
            if attempt == 2:
                raise


async def readyz(request: Request):
    """The database answers; 503 `unavailable` otherwise."""
    try:
        await run_in_threadpool(_ping, request.app.state.ctx)
    except Exception:
        raise Unavailable("database unreachable") from None
    return json_response({"status": "ready"})


routes = [Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"])]
