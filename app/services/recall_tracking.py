"""Recall tracking (`recall_count`, `last_recalled_at`) written in batches, off the recall path.

Recall counts are usage statistics for `expire` with `no_recall_in_days` and for compaction, not
data or audit. Writing them in the recall's own transaction made every recall a write: a BEGIN,
an UPDATE of the hit rows and a COMMIT, three of its ten round trips. Instead a recall notes its
hits here and returns; a background thread per engine writes what accumulated every
`FLUSH_SECONDS` in one statement, without waiting for the WAL flush. A crash loses at most that
long of recall counts, never a memory or an audit event (the same bound as before, when the
commit did not wait for the flush either). Readers that need the counts current (`expire`) call
`flush` first; closing the app context (server shutdown) and process exit flush what is left.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from datetime import datetime
from typing import Sequence

from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from app.repos import memories as memories_repo

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.5

class RecallTracker:
    """Pending recall counts of one engine, flushed by a daemon thread started on first use."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._pending: dict[tuple[str, str], list] = {}
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def note(self, tenant_id: str, ids: Sequence[str], at: datetime) -> None:
        """Count one recall of each of `ids` (the tenant's memories) at `at`."""
        with self._lock:
            for memory_id in ids:
                entry = self._pending.get((tenant_id, memory_id))
                if entry is None:
                    self._pending[(tenant_id, memory_id)] = [1, at]
                else:
                    entry[0] += 1
                    entry[1] = max(entry[1], at)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="recall-tracking", daemon=True)
                self._thread.start()

    def flush(self) -> int:
        """Write everything noted so far; returns how many memories were updated. A failed write
        is put back for the next round (the counts are statistics: it never raises)."""
        with self._flushing:
            with self._lock:
                batch, self._pending = self._pending, {}
            if not batch:
                return 0
            keys = sorted(batch)  # one lock order for every flusher
            try:
                with self.engine.begin() as conn:
                    return memories_repo.add_recalls(conn, tenant_ids=[t for t, _ in keys], ids=[i for _, i in keys],
                                                     counts=[batch[k][0] for k in keys],
                                                     last_at=[batch[k][1] for k in keys])
            except SQLAlchemyError as exc:  # database away, or a deadlock with another process's flush
                log.warning("recall tracking: %d counts not written yet (%s)", len(keys), type(exc).__name__)
                with self._lock:
                    for key in keys:
                        entry = self._pending.setdefault(key, [0, batch[key][1]])
                        entry[0] += batch[key][0]
                        entry[1] = max(entry[1], batch[key][1])
                return 0

    def _run(self) -> None:
        while True:
            self._wake.wait(FLUSH_SECONDS)
            self.flush()


_trackers: dict[int, RecallTracker] = {}
_trackers_lock = threading.Lock()


def tracker(engine: Engine) -> RecallTracker:
    """The process's tracker for `engine` (one per database)."""
    found = _trackers.get(id(engine))
    if found is None:
        with _trackers_lock:
            found = _trackers.setdefault(id(engine), RecallTracker(engine))
    return found


def flush(engine: Engine) -> None:
    """Write this process's pending counts for `engine` now (before reading them)."""
    found = _trackers.get(id(engine))
    if found is not None:
        found.flush()


@atexit.register
def _flush_all() -> None:
    for found in list(_trackers.values()):
        found.flush()


def _forget_after_fork() -> None:
    """A forked child has no flusher thread and must not write its parent's pending counts."""
    _trackers.clear()


os.register_at_fork(after_in_child=_forget_after_fork)
