"""Liveness and readiness probes."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.routing import Route

from app.api.jsonio import json_response
from app.db.embedded import database_lost
from app.errors import Unavailable
from app.services.runtime import health


async def healthz(request: Request):
    """Liveness: the process is up, and the embedded database it supervises has not been lost for
    good (503 then, so an orchestrator restarts the process). An unreachable external database
    only fails readiness: restarting this process would not bring it back."""
    if database_lost(request.app.state.settings.data_path):
        raise Unavailable("the embedded database could not be restarted; restart this process")
    return json_response({"status": "ok"})


async def readyz(request: Request):
    """The database answers; 503 `unavailable` otherwise. With read replicas, `replicas` details
    each one (a replica that is down does not make the server unready: the primary serves)."""
    ctx = request.app.state.ctx
    try:
        await run_in_threadpool(health.ping_database, ctx)
    except Exception:
        raise Unavailable("database unreachable") from None
    replicas = await run_in_threadpool(health.replica_status, ctx)
    return json_response({"status": "ready"} if replicas is None else {"status": "ready", "replicas": replicas})


routes = [Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"])]
