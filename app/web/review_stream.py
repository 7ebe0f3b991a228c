"""`GET /review/stream`: the review pages' live updates as Server-Sent Events (signed-in reviewers).

The queue and change pages connect to it with the htmx SSE extension (same origin, so the CSP's
`connect-src 'self'` allows it); pages without EventSource keep polling. It follows the tenant's
event log from the newest event at connect time (or from `Last-Event-ID` after a reconnect), woken
by the process's event hub, and sends for each `change.*` event (proposed, approved, rejected,
withdrawn, approval_recorded) whose agent the reviewer may see:

- `event: change`, `data: {"changeId", "operation", "status"}`: the queue re-reads its current view.
- with `?change=<id>` and that change decided by someone else (or withdrawn by its agent), `event:
  decided`, `data:` a one-line HTML banner ("rejected by <name> N s ago") that the change page swaps in;
  and when another reviewer gives one of several approvals it needs, `event: approval`, a banner
  ("approved by <name> (1 of 2) N s ago") after which the page re-reads its (still pending) change.

Never memory content: only ids, the operation, the status and the deciding reviewer's display name.
Every SESSION_CHECK_SECONDS the stream re-reads the reviewer's session and role: it ends once they
sign out (or the session is revoked or idle, or they lose the tenant), and a changed agent
allow-list applies to the events that follow.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import AsyncIterator

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from app.core.timefmt import parse_ts, utcnow
from app.errors import AppError, NotFound, ValidationFailed
from app.services.events import events
from app.services.review import changes
from app.services.events.event_tail import KEEPALIVE, EventTail
from app.services.tenancy.users import Reviewer, TenantRole, role_if_signed_in
from app.web.auth import current_user, pick_tenant
from app.web.templating import age, templates

HEARTBEAT_SECONDS = 15.0
POLL_SECONDS = 1.0
SESSION_CHECK_SECONDS = 5.0
BATCH = 200
CHANGE_EVENTS = {"change.proposed": "pending", "change.approved": "approved", "change.rejected": "rejected",
                 "change.withdrawn": "withdrawn", "change.approval_recorded": "pending"}
CHANGE_ID = re.compile(r"^chg_[0-9a-z]{1,64}$")


def _message(name: str, data: str, event_id: int) -> str:
    return f"id: {event_id}\nevent: {name}\ndata: {data}\n\n"


def _banner(ctx, role: TenantRole, user: Reviewer, change_id: str) -> str | None:
    """The change page's banner for a decision by another reviewer or the agent's withdrawal, on one
    line (None: pending, or decided by this user, whose own page already shows it)."""
    try:
        change = changes.get_change(ctx, role.tenant_id, change_id, role.sees_agent)
    except AppError:
        return None
    if change["status"] == "pending" or change["decided_by"] == f"user:{user.user_id}":
        return None
    name = "the agent" if change["status"] == "withdrawn" else \
        change["decided_by_name"] or change["decided_by"] or "another reviewer"
    return _one_line("review/_live_banner.html", status=change["status"], name=name,
                     decided_at=change["decided_at"], ago=f"{age(parse_ts(change['decided_at']), utcnow())} ago")


def _approval_banner(ctx, role: TenantRole, user: Reviewer, change_id: str) -> str | None:
    """The change page's banner for another reviewer's approval that leaves the change pending
    ("approved by X (1 of 2)"); None once decided, or when the approval is this user's own."""
    try:
        change = changes.get_change(ctx, role.tenant_id, change_id, role.sees_agent)
    except AppError:
        return None
    if change["status"] != "pending" or not change["approvals"]:
        return None
    last = change["approvals"][-1]
    if last.get("by") == f"user:{user.user_id}":
        return None
    name = f"key {last['via_key']} (no owner)" if last.get("via_key") and not last.get("owner") else None
    return _one_line("review/_live_approval.html", name=name or last.get("name") or last.get("by"), at=last.get("at"),
                     given=len(change["approvals"]), required=change["approvals_required"],
                     ago=f"{age(parse_ts(last.get('at')), utcnow())} ago")


def _one_line(template: str, **context) -> str:
    """A template rendered on one line (one `data:` line; the banners' text has no meaningful newlines)."""
    return " ".join(templates().env.get_template(template).render(**context).split("\n"))


async def _follow(request: Request, role: TenantRole, user: Reviewer, after: int,
                  change_id: str | None) -> AsyncIterator[str]:
    ctx = request.app.state.ctx
    hub = getattr(request.app.state, "event_hub", None)
    subscription = hub.subscribe(role.tenant_id, None) if hub is not None else None
    last_check = time.monotonic()

    async def go_on() -> bool:
        nonlocal role, last_check
        if subscription is not None and hub.listening:
            await tail.wait_for_wake(SESSION_CHECK_SECONDS)
        else:
            await asyncio.sleep(POLL_SECONDS)
        if time.monotonic() - last_check >= SESSION_CHECK_SECONDS:
            fresh = await run_in_threadpool(role_if_signed_in, ctx, user.session_id, role.tenant_id)
            if fresh is None or not fresh.can("read"):
                return False
            role, last_check = fresh, time.monotonic()
        return True

    tail = EventTail(ctx, role.tenant_id, after, batch=BATCH, subscription=subscription, go_on=go_on,
                     heartbeat_seconds=HEARTBEAT_SECONDS)
    yield "retry: 2000\n\n"
    try:
        async for rows in tail.batches():
            if rows is None:
                yield KEEPALIVE
                continue
            for event in rows:
                status = CHANGE_EVENTS.get(event.type)
                if status is None or not event.visible_to(role.sees_agent):
                    continue
                subject = str(event.payload.get("changeId", ""))
                data = {"changeId": subject, "operation": event.payload.get("operation"), "status": status}
                yield _message("change", json.dumps(data, separators=(",", ":")), event.id)
                if change_id == subject and status != "pending":
                    banner = await run_in_threadpool(_banner, ctx, role, user, change_id)
                    if banner:
                        yield _message("decided", banner, event.id)
                elif change_id == subject and event.type == "change.approval_recorded":
                    banner = await run_in_threadpool(_approval_banner, ctx, role, user, change_id)
                    if banner:
                        yield _message("approval", banner, event.id)
                tail.wrote()
    finally:
        if subscription is not None:
            hub.unsubscribe(subscription)


def _start(request: Request, tenant_id: str) -> int:
    """Where to resume: the browser's Last-Event-ID after a reconnect, else the newest event now."""
    header = request.headers.get("last-event-id", "").strip()
    if header.isascii() and header.isdigit() and len(header) <= 18:
        return int(header)
    return events.latest_id(request.app.state.ctx.db.sessions, tenant_id)


async def stream(request: Request):
    """The signed-in reviewer's live feed of the tenant's review queue (see the module doc)."""
    user = current_user(request)
    role = pick_tenant(request, user, "read")
    change_id = request.query_params.get("change") or None
    if change_id is not None and not CHANGE_ID.match(change_id):
        raise ValidationFailed.at("/change", "not a change id")
    after = await run_in_threadpool(_start, request, role.tenant_id)
    return StreamingResponse(_follow(request, role, user, after, change_id), media_type="text/event-stream",
                             headers={"cache-control": "no-cache", "x-accel-buffering": "no"})


async def banner(request: Request):
    """`GET /review/{id}/live`: the change page's banner, for browsers without EventSource that poll
    it; 204 while the change is pending (or decided by this reviewer, or not theirs to see). With
    `?kind=approval`, the banner of another reviewer's approval of a still-pending change instead
    (204 when there is none), as the stream's `approval` event carries it."""
    user = current_user(request)
    role = pick_tenant(request, user, "read")
    change_id = request.path_params["change_id"]
    if not CHANGE_ID.match(change_id):
        raise NotFound("change not found")
    kind = request.query_params.get("kind", "decided")
    if kind not in ("decided", "approval"):
        raise ValidationFailed.at("/kind", "decided or approval")
    render_banner = _banner if kind == "decided" else _approval_banner
    html = await run_in_threadpool(render_banner, request.app.state.ctx, role, user, change_id)
    return HTMLResponse(html) if html else Response(status_code=204)


routes = [Route("/review/stream", stream, methods=["GET"]),
          Route("/review/{change_id}/live", banner, methods=["GET"])]
