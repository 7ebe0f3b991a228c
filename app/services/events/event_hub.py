"""Cross-process wake-ups for event streams: one `LISTEN memwarden_events` connection per process.

`events.emit` NOTIFYs `<tenant_id>:<id>` on commit; the hub wakes the streams of that tenant,
which then read new rows from the table (the source of truth). The listener starts with the first
subscriber and reconnects on failure; after (re)connecting it wakes every stream, since
notifications sent while it was away are lost. While it is not listening, streams poll.

The hub also ends streams whose API key was revoked: every REVOCATION_CHECK_SECONDS one query
checks the keys of all open streams of the process (not one query per stream), and a stream whose
key is gone is marked revoked and woken, so it closes within a second of the revocation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

import psycopg
from sqlalchemy.engine import Engine

from app.repos.tenancy import apikeys as key_repo
from app.repos.events import events as events_repo
from app.services.events.events import CHANNEL

log = logging.getLogger(__name__)
RECONNECT_SECONDS = 1.0
REVOCATION_CHECK_SECONDS = 0.5


@dataclass(eq=False)
class Subscription:
    """One open stream: `wake` is set when its tenant may have new rows, or when its key was
    revoked (then `revoked` is true and the stream must end)."""

    tenant_id: str
    key_id: str | None
    """None for a signed-in reviewer's page stream (no key to watch; it ends on its own)."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    revoked: bool = False


class EventHub:
    """Per-process registry of waiting streams, woken by PostgreSQL notifications."""

    def __init__(self, engine: Engine):
        self._engine = engine
        self._waiters: dict[str, set[Subscription]] = {}
        self._tasks: list[asyncio.Task] = []
        self.listening = False

    def subscribe(self, tenant_id: str, key_id: str | None) -> Subscription:
        """Register a stream of `tenant_id` read with key `key_id` (starts the listener and the
        revocation watch on first use)."""
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._listen(), name="memwarden-event-listener"),
                           asyncio.create_task(self._watch_revocations(), name="memwarden-key-watch")]
        subscription = Subscription(tenant_id, key_id)
        self._waiters.setdefault(tenant_id, set()).add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        waiters = self._waiters.get(subscription.tenant_id)
        if waiters is not None:
            waiters.discard(subscription)
            if not waiters:
                del self._waiters[subscription.tenant_id]

    def _wake(self, tenant_id: str | None = None) -> None:
        groups = self._waiters.values() if tenant_id is None else [self._waiters.get(tenant_id, ())]
        for waiters in groups:
            for subscription in waiters:
                subscription.wake.set()

    def _active_keys(self, keys: list[tuple[str, str]]) -> set[tuple[str, str]]:
        """The (tenant_id, key_id) pairs among `keys` whose key is not revoked."""
        with self._engine.connect() as conn:
            return key_repo.active_among(conn, keys=keys)

    async def _watch_revocations(self) -> None:
        while True:
            await asyncio.sleep(REVOCATION_CHECK_SECONDS)
            subscriptions = [s for waiters in self._waiters.values() for s in waiters
                             if not s.revoked and s.key_id is not None]
            if not subscriptions:
                continue
            try:
                active = await asyncio.to_thread(self._active_keys,
                                                 sorted({(s.tenant_id, s.key_id) for s in subscriptions}))
            except Exception as exc:  # database away: streams end on their own failed reads
                log.warning("API key revocation check failed (%s)", type(exc).__name__)
                continue
            for subscription in subscriptions:
                if (subscription.tenant_id, subscription.key_id) not in active:
                    subscription.revoked = True
                    subscription.wake.set()

    async def _listen(self) -> None:
        args, kwargs = self._engine.dialect.create_connect_args(self._engine.url)
        kwargs.pop("context", None)
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(*args, autocommit=True, **kwargs) as conn:
                    await events_repo.listen(conn, channel=CHANNEL)
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
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        self._wake()
