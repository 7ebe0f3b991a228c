"""Cross-process wake-ups for event streams: one `LISTEN memwarden_events` connection per process.

`events.emit` NOTIFYs `<tenant_id>:<id>` on commit; the hub wakes the streams of that tenant,
which then read new rows from the table (the source of truth). The listener starts with the first
subscriber and reconnects on failure; after (re)connecting it wakes every stream, since
notifications sent while it was away are lost. While it is not listening, streams poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import psycopg
from sqlalchemy.engine import Engine

from app.services.events import CHANNEL

log = logging.getLogger(__name__)
RECONNECT_SECONDS = 1.0


class EventHub:
    """Per-process registry of waiting streams, woken by PostgreSQL notifications."""

    def __init__(self, engine: Engine):
        self._engine = engine
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task | None = None
        self.listening = False

    def subscribe(self, tenant_id: str) -> asyncio.Event:
        """An event set whenever `tenant_id` may have new rows (starts the listener on first use)."""
        if self._task is None:
            self._task = asyncio.create_task(self._listen(), name="memwarden-event-listener")
        wake = asyncio.Event()
        self._waiters.setdefault(tenant_id, set()).add(wake)
        return wake

    def unsubscribe(self, tenant_id: str, wake: asyncio.Event) -> None:
        waiters = self._waiters.get(tenant_id)
        if waiters is not None:
            waiters.discard(wake)
            if not waiters:
                del self._waiters[tenant_id]

    def _wake(self, tenant_id: str | None = None) -> None:
        groups = self._waiters.values() if tenant_id is None else [self._waiters.get(tenant_id, ())]
        for waiters in groups:
            for wake in waiters:
                wake.set()

    async def _listen(self) -> None:
        args, kwargs = self._engine.dialect.create_connect_args(self._engine.url)
        kwargs.pop("context", None)
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(*args, autocommit=True, **kwargs) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.listening = True
                    self._wake()  # anything committed while we were not listening
                    async for note in conn.notifies():
                        self._wake(note.payload.rpartition(":")[0])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away: poll until we are back
                log.warning("event listener disconnected (%s); retrying", type(exc).__name__)
            finally:
                self.listening = False
            await asyncio.sleep(RECONNECT_SECONDS)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._wake()
