"""Work that request threads note and one daemon thread writes in batches, per database.

Two kinds of bookkeeping are written off the request path this way: recall counts
(`recall_tracking`) and read-audit records (`read_audit`). Both need the same machinery: a
pending batch behind a lock, a flusher thread started on first use that wakes every interval (or
sooner when woken), a flush that hands a failed write back for the next round and never raises
(the requests were already answered), one instance per database, a flush of everything left at
process exit, and nothing inherited by a forked child (it has no flusher thread and must not write
its parent's batch). A subclass says what the batch is and how it is written.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

B = TypeVar("B")  # what a batch is
F = TypeVar("F", bound="Flusher")


class Flusher(Generic[B]):
    """A pending batch of type B, written by a daemon thread every `interval` seconds."""

    thread_name = "flusher"

    def __init__(self, interval: float):
        self.interval = interval
        self._pending: B = self._empty()
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def _empty(self) -> B:
        raise NotImplementedError

    def _write(self, batch: B) -> tuple[int, B | None]:
        """Write `batch`; returns how many items were written and what failed (None: nothing)."""
        raise NotImplementedError

    def _put_back(self, failed: B) -> None:
        """Merge a failed batch into `self._pending` (called under the lock)."""
        raise NotImplementedError

    @contextmanager
    def pending(self) -> Iterator[B]:
        """The pending batch, to add to under the lock; starts the flusher thread on first use."""
        with self._lock:
            yield self._pending
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
                self._thread.start()

    def wake(self) -> None:
        """Flush now rather than at the end of the interval (a batch grew large)."""
        self._wake.set()

    def flush(self) -> int:
        """Write everything noted so far; returns how many items were written."""
        with self._flushing:
            with self._lock:
                batch, self._pending = self._pending, self._empty()
            if not batch:
                return 0
            written, failed = self._write(batch)
            if failed:
                with self._lock:
                    self._put_back(failed)
            return written

    def _run(self) -> None:
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            self.flush()


class PerDatabase(Generic[F]):
    """One flusher per database (keyed by its engine), flushed at exit, forgotten in a forked child."""

    def __init__(self) -> None:
        self._found: dict[int, F] = {}
        self._lock = threading.Lock()
        atexit.register(self.flush_all)
        os.register_at_fork(after_in_child=self._found.clear)

    def get(self, key: object, make: Callable[[], F]) -> F:
        found = self._found.get(id(key))
        if found is None:
            with self._lock:
                found = self._found.get(id(key)) or self._found.setdefault(id(key), make())
        return found

    def flush(self, key: object) -> None:
        found = self._found.get(id(key))
        if found is not None:
            found.flush()

    def flush_all(self) -> None:
        for found in list(self._found.values()):
            found.flush()
