"""`GET /v1/events`: the key's tenant's events as Server-Sent Events (contract §7).

Each event is `id: <id>` / `event: <type>` / `data: <payload JSON>`. The stream replays the table
after the cursor (`Last-Event-ID`, else `?after=`, else from the start), then follows it live:
woken by the process's LISTEN connection when one runs (`app.services.events.event_hub`), else by
polling every 0.5 s. Both paths read the same rows, so replay and live output are identical.
`?once=1` returns the backlog and closes; `?limit=N` closes after N events. Events about agents
the key may not act for are skipped. A comment line every 15 s keeps proxies from timing out.
The stream ends when the client goes away, or within about a second of the key's revocation
(the hub's revocation watch; without a hub, each poll re-checks the key).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import StreamingResponse

from app.api.routes import ApiRoute, ctx_of, parse_query
from app.core.access import Principal
from app.errors import ValidationFailed
from app.services.tenancy import apikeys
from app.services.events import events
from app.services.runtime.context import AppContext
from app.services.events.event_tail import KEEPALIVE, EventTail

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
    subscription = hub.subscribe(principal.tenant_id, principal.key_id) if hub is not None else None

    async def go_on() -> bool:
        if once:
            return False
        if subscription is not None:  # the hub watches the key and wakes us when it is revoked
            await tail.wait_for_wake(HEARTBEAT_SECONDS if hub.listening else POLL_SECONDS)
            return True
        await asyncio.sleep(POLL_SECONDS)  # no hub (an injected test context): poll, and check the key as often
        return await run_in_threadpool(_key_active, ctx, principal)

    tail = EventTail(ctx, principal.tenant_id, after, batch=min(BATCH, limit) if limit else BATCH,
                     subscription=subscription, go_on=go_on, heartbeat_seconds=HEARTBEAT_SECONDS)
    sent = 0
    try:
        async for rows in tail.batches():
            if rows is None:
                yield KEEPALIVE
                continue
            for event in rows:
                if event.visible_to(principal.may_act_for):
                    yield format_event(event)
                    sent += 1
                    tail.wrote()
                    if limit and sent >= limit:
                        return
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
