"""The pool metrics follow a real pool: connections in use rise and fall, and a wait that runs
out is counted as a timeout (the request it belonged to would be shed with 503)."""

import pytest
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.db.database import make_engine
from app.observability import metrics


def _value(metric) -> float:
    return metric._value.get()


def test_in_use_waits_and_timeouts_follow_a_saturated_pool(settings):
    capacity_before = _value(metrics.DB_POOL_CAPACITY)
    engine = make_engine(settings.database_url, pool_size=1, pool_timeout=0.2)  # 1 + 1 overflow
    try:
        assert _value(metrics.DB_POOL_CAPACITY) - capacity_before == 2
        in_use, timeouts = _value(metrics.DB_POOL_IN_USE), _value(metrics.DB_POOL_TIMEOUTS)
        waits = metrics.DB_POOL_WAIT._sum.get()
        held = [engine.connect(), engine.connect()]
        assert _value(metrics.DB_POOL_IN_USE) - in_use == 2
        with pytest.raises(PoolTimeout):
            engine.connect()
        assert _value(metrics.DB_POOL_TIMEOUTS) - timeouts == 1
        assert metrics.DB_POOL_WAIT._sum.get() - waits >= 0.2  # the wait that ran out is in the histogram
        for conn in held:
            conn.close()
        assert _value(metrics.DB_POOL_IN_USE) == in_use
    finally:
        engine.dispose()
    assert _value(metrics.DB_POOL_CAPACITY) == capacity_before + 2  # dispose recreates an (empty) pool


def test_a_burst_above_pool_size_keeps_its_connections(settings):
    """Connections opened past `pool_size` under a burst stay open for the next one: a reopened
    connection is a new PostgreSQL backend with cold caches."""
    from sqlalchemy import text

    engine = make_engine(settings.database_url, pool_size=1, pool_timeout=0.2)
    try:

        def burst() -> set[int]:
            held = [engine.connect(), engine.connect()]
            pids = {conn.execute(text("SELECT pg_backend_pid()")).scalar() for conn in held}
            for conn in held:
                conn.close()
            return pids

        first = burst()
        assert len(first) == 2
        assert burst() == first
    finally:
        engine.dispose()
