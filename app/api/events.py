"""`GET /v1/events`: the key's tenant's events as Server-Sent Events (contract §7).

Each event is `id: <id>` / `event: <type>` / `data: <payload JSON>`. The stream replays the table
after the cursor (`Last-Event-ID`, else `?after=`, else from the start), then follows it live:
woken by the process's LISTEN connection when one runs (`app.services.event_hub`), else by
polling every 0.5 s. Both paths read the same rows, so replay and live output are identical.
`?once=1` returns the backlog and closes; `?limit=N` closes after N events. Events about agents
the key may not act for are skipped. A comment line every 15 s keeps proxies from timing out.
The stream ends when the client goes away, or within about a second of the key's revocation
(the hub's revocation watch; without a hub, each poll re-checks the key).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any, AsyncIterator

from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import StreamingResponse

from app.api.routing import ApiRoute, ctx_of, parse_query
from app.core.access import Principal
from app.errors import ValidationFailed
from app.services import apikeys, events
from app.services.context import AppContext

log = logging.getLogger(__name__)
HEARTBEAT_SECONDS = 15.0
POLL_SECONDS = 0.5
BATCH = 500


def format_event(event: events.StoredEvent) -> str:
    """One SSE message (JSON escapes newlines, so `data` is a single line)."""
    data = json.dumps(event.payload, separators=(",", ":"), ensure_ascii=False)
    return f"id: {event.id}\nevent: {event.type}\ndata: {data}\n\n"


def _query(request: Request) -> dict[str, Any]:
    return parse_query(request, "events.query")


def _cursor(request: Request, query: dict[str, Any]) -> int:
    if "last-event-id" in request.headers:  # sent at all, it must be an id (empty is not one)
        header = request.headers["last-event-id"].strip()
        if not (header.isascii() and header.isdigit()) or len(header) > 18:
            raise ValidationFailed.at("/Last-Event-ID", "Last-Event-ID must be an event id from this stream")
        return int(header)
    return query.get("after", 0)


def _key_active(ctx: AppContext, principal: Principal) -> bool:
    return apikeys.is_active(ctx, tenant_id=principal.tenant_id, key_id=principal.key_id)


async def _stream(ctx: AppContext, hub, principal: Principal, after: int, limit: int | None,
                  once: bool) -> AsyncIterator[str]:
    tenant_id = principal.tenant_id
    subscription = hub.subscribe(tenant_id, principal.key_id) if hub is not None else None
    sent, last_write = 0, time.monotonic()
    try:
        while True:
            if subscription is not None:
                if subscription.revoked:
                    return
                subscription.wake.clear()  # before reading: a wake-up during the read triggers another read
            batch = min(BATCH, limit - sent) if limit else BATCH
            try:
                rows = await run_in_threadpool(events.read_after, ctx.db.sessions, tenant_id, after, batch)
            except OperationalError:  # database gone: end cleanly; the client resumes with Last-Event-ID
                log.warning("event stream ended: database unreachable")
                return
            for event in rows:
                after = event.id
                if event.visible_to(principal.may_act_for):
                    yield format_event(event)
                    sent, last_write = sent + 1, time.monotonic()
            if limit and sent >= limit:
                return
            if len(rows) == batch:
                continue
            if once:
                return
            if subscription is not None:  # the hub watches the key and wakes us when it is revoked
                timeout = HEARTBEAT_SECONDS if hub.listening else POLL_SECONDS
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(subscription.wake.wait(), timeout)
                if subscription.revoked:
                    return
            else:  # no hub (an injected test context): poll, and check the key as often
                await asyncio.sleep(POLL_SECONDS)
                if not await run_in_threadpool(_key_active, ctx, principal):
                    return
            if time.monotonic() - last_write >= HEARTBEAT_SECONDS:
                yield ": keepalive\n\n"
                last_write = time.monotonic()
    finally:
        if subscription is not None:
            hub.unsubscribe(subscription)


async def stream_events(request: Request, principal: Principal):
    query = _query(request)
    after = _cursor(request, query)
    hub = getattr(request.app.state, "event_hub", None)
    return StreamingResponse(
        _stream(ctx_of(request), hub, principal, after, query.get("limit"), bool(query.get("once"))),
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )


routes = [
    ApiRoute("/v1/events", stream_events, method="GET", tag="events", scope="events:read", request="events.query",
             headers=("Last-Event-ID",), responses={200: {"text/event-stream": "sse-message"}},
             summary="Server-Sent Events of the key's tenant (`event` envelopes' id/type/data); "
                     "resume with Last-Event-ID"),
]
