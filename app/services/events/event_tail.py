"""Following a tenant's event log for a Server-Sent Events stream: the loop that the agents' stream
(`/v1/events`) and the reviewers' live updates (`/review/stream`) share.

Read the events after a cursor in batches; when a batch comes back short, wait (woken by the
process's event hub, else polling) and ask the stream whether it may go on (its key or session
still valid); after a quiet spell, hand back a keepalive so that proxies keep the connection open.
What each stream sends for an event, and to whom, stays with the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool

from app.services.events import events

if TYPE_CHECKING:
    from app.services.runtime.context import AppContext

log = logging.getLogger(__name__)

KEEPALIVE = ": keepalive\n\n"


class EventTail:
    """The tenant's events after `after`, batch by batch, for one stream.

    `go_on` is awaited between reads of a short batch: it waits (see `wait_for_wake`) and returns
    False to end the stream. `subscription` is the stream's hub subscription, if any: it is cleared
    before each read (a wake-up during the read triggers another read) and a revoked one ends it."""

    def __init__(self, ctx: AppContext, tenant_id: str, after: int, *, batch: int, subscription: Any,
                 go_on: Callable[[], Awaitable[bool]], heartbeat_seconds: float):
        self.ctx, self.tenant_id, self.after, self.batch = ctx, tenant_id, after, batch
        self.subscription, self.go_on, self.heartbeat_seconds = subscription, go_on, heartbeat_seconds
        self._quiet_since = time.monotonic()

    def wrote(self) -> None:
        """The stream sent something: the keepalive waits another quiet spell."""
        self._quiet_since = time.monotonic()

    async def wait_for_wake(self, timeout: float) -> None:
        """Until the hub wakes the subscription (new events, a revocation) or `timeout` passes."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.subscription.wake.wait(), timeout)

    def _revoked(self) -> bool:
        return self.subscription is not None and bool(getattr(self.subscription, "revoked", False))

    async def batches(self) -> AsyncIterator[list[events.StoredEvent] | None]:
        """Each non-empty batch in order, and None when a keepalive is due. Ends when `go_on` says
        so, the subscription is revoked, or the database is unreachable (the client resumes with
        Last-Event-ID)."""
        while not self._revoked():
            if self.subscription is not None:
                self.subscription.wake.clear()
            try:
                rows = await run_in_threadpool(events.read_after, self.ctx.db.sessions, self.tenant_id, self.after,
                                               self.batch)
            except OperationalError:
                log.warning("event stream ended: database unreachable")
                return
            if rows:
                self.after = rows[-1].id
                yield rows
            if len(rows) == self.batch:
                continue
            if not await self.go_on() or self._revoked():
                return
            if time.monotonic() - self._quiet_since >= self.heartbeat_seconds:
                self.wrote()
                yield None
