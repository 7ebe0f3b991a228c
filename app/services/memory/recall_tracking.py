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

import logging
from datetime import datetime
from typing import Sequence

from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from app.repos.memory import memories as memories_repo
from app.services.runtime.flusher import Flusher, PerDatabase

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.5

Pending = dict[tuple[str, str], list]  # (tenant, memory id) -> [recalls, last recalled at]


class RecallTracker(Flusher[Pending]):
    """Pending recall counts of one engine."""

    thread_name = "recall-tracking"

    def __init__(self, engine: Engine):
        self.engine = engine
        super().__init__(FLUSH_SECONDS)

    def _empty(self) -> Pending:
        return {}

    def note(self, tenant_id: str, ids: Sequence[str], at: datetime) -> None:
        """Count one recall of each of `ids` (the tenant's memories) at `at`."""
        with self.pending() as pending:
            for memory_id in ids:
                entry = pending.get((tenant_id, memory_id))
                if entry is None:
                    pending[(tenant_id, memory_id)] = [1, at]
                else:
                    entry[0] += 1
                    entry[1] = max(entry[1], at)

    def _write(self, batch: Pending) -> tuple[int, Pending | None]:
        keys = sorted(batch)  # one lock order for every flusher
        try:
            with self.engine.begin() as conn:
                return memories_repo.add_recalls(conn, tenant_ids=[t for t, _ in keys], ids=[i for _, i in keys],
                                                 counts=[batch[k][0] for k in keys],
                                                 last_at=[batch[k][1] for k in keys]), None
        except SQLAlchemyError as exc:  # database away, or a deadlock with another process's flush
            log.warning("recall tracking: %d counts not written yet (%s)", len(keys), type(exc).__name__)
            return 0, batch  # statistics: put back for the next round, never raised

    def _put_back(self, failed: Pending) -> None:
        for key, (count, at) in failed.items():
            entry = self._pending.setdefault(key, [0, at])
            entry[0] += count
            entry[1] = max(entry[1], at)


_trackers: PerDatabase[RecallTracker] = PerDatabase()


def tracker(engine: Engine) -> RecallTracker:
    """The process's tracker for `engine` (one per database)."""
    return _trackers.get(engine, lambda: RecallTracker(engine))


def flush(engine: Engine) -> None:
    """Write this process's pending counts for `engine` now (before reading them)."""
    _trackers.flush(engine)
