"""Database pool metrics: connections in use, capacity, time to obtain one, and waits that ran out
(the request is then shed with 503). `make_engine` builds its engines on `InstrumentedQueuePool`."""

from __future__ import annotations

import time

from sqlalchemy import event
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import QueuePool

from app.observability import metrics


class InstrumentedQueuePool(QueuePool):
    """SQLAlchemy's `QueuePool` that times each wait for a connection. A subclass (not a patched
    instance) so the pool `engine.dispose()` recreates is instrumented too."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        metrics.DB_POOL_CAPACITY.inc(self.size() + max(self._max_overflow, 0))

    def recreate(self) -> InstrumentedQueuePool:
        metrics.DB_POOL_CAPACITY.dec(self.size() + max(self._max_overflow, 0))  # the new one counts itself
        return super().recreate()

    def _do_get(self):
        started = time.perf_counter()
        try:
            return super()._do_get()
        except PoolTimeout:
            metrics.DB_POOL_TIMEOUTS.inc()
            raise
        finally:
            metrics.DB_POOL_WAIT.observe(time.perf_counter() - started)


# Class-level listeners: every instrumented pool, including recreated ones, reports checkouts.
event.listen(InstrumentedQueuePool, "checkout", lambda *_: metrics.DB_POOL_IN_USE.inc())
event.listen(InstrumentedQueuePool, "checkin", lambda *_: metrics.DB_POOL_IN_USE.dec())
