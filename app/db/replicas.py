"""Read replicas: reads that tolerate staleness go to PostgreSQL streaming replicas, with
read-your-writes per API key (docs/operators/replicas.md).

After a key's write request has committed, the primary's WAL insert position is recorded for the
key (`key_commit_lsns`, on the primary, so every server process sees it). A routed read looks that
position up and is served by a replica only once the replica has replayed that far: it waits up to
`MEMWARDEN_REPLICA_MAX_WAIT_MS`, then the primary serves it. A read with no key (an operator's
export) needs everything committed so far: the primary's current position.

A replica that cannot be reached, or is not a standby any more (promoted), is passed over for
`RETRY_SECONDS`; with none left the primary serves the read. The replay-position query doubles as
the liveness check of the pooled connection, so a replica that died since its last use is noticed
before the read's own statements run on it.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from app.observability import metrics
from app.repos.runtime import replication

log = logging.getLogger(__name__)

RETRY_SECONDS = 2.0
"""How long a replica found down is passed over before it is tried again."""
_POLL_SECONDS = (0.001, 0.002, 0.004, 0.008)  # then every 8 ms until the wait's end


def lsn_int(lsn: str) -> int:
    """A `pg_lsn` text ("16/B374D848") as a comparable integer."""
    high, low = lsn.split("/")
    return (int(high, 16) << 32) | int(low, 16)


@dataclass
class Replica:
    """One configured standby: its pool and what this process last learned of it."""

    name: str
    engine: Engine
    down_until: float = 0.0
    problem: str | None = None  # why it was last passed over (never a URL: it may hold a password)


@dataclass
class ReplicaSet:
    """The primary's engine and the replicas reads may be routed to (see the module docstring)."""

    primary: Engine
    replicas: list[Replica]
    max_wait_seconds: float
    _turn: Iterator[int] = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._turn = itertools.count()

    def dispose(self) -> None:
        for replica in self.replicas:
            replica.engine.dispose()

    def note_write(self, tenant_id: str, key_id: str) -> None:
        """Record that the key's writes so far are committed (call after the commit)."""
        with self.primary.connect() as conn:
            replication.note_key_commit(conn.execution_options(isolation_level="AUTOCOMMIT"),
                                        tenant_id=tenant_id, key_id=key_id)

    def needed_lsn(self, tenant_id: str, key_id: str | None) -> int:
        """How far a replica must have replayed to serve this caller: the key's last write, or
        (no key) everything committed so far."""
        with self.primary.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            if key_id is None:
                return lsn_int(replication.current_lsn(conn))
            lsn = replication.key_commit_lsn(conn, tenant_id=tenant_id, key_id=key_id)
        return lsn_int(lsn) if lsn else 0

    @contextmanager
    def connection(self, tenant_id: str, key_id: str | None, *, autocommit: bool = True) -> Iterator[Connection]:
        """A connection for a read: on a replica that has replayed the caller's last write, else on
        the primary. In autocommit, or (`autocommit=False`) at the engine's isolation level, where
        several statements share one snapshot and server-side cursors (streamed results) work."""
        candidates = self._in_turn()
        # With every replica passed over, not even the key's position is looked up.
        conn = self._fresh_replica(candidates, self.needed_lsn(tenant_id, key_id)) if candidates else None
        if conn is None:
            if not candidates:
                metrics.REPLICA_FALLBACKS.labels("down").inc()
            metrics.REPLICA_READS.labels("primary").inc()
            with self.primary.connect() as primary:
                yield primary.execution_options(isolation_level="AUTOCOMMIT") if autocommit else primary
            return
        if not autocommit:
            conn.commit()  # ends the autocommit checks' (empty) transaction so the level may change
            conn.execution_options(isolation_level=conn.default_isolation_level)
        try:
            yield conn
        finally:
            try:
                conn.close()
            except Exception:  # the replica went away during the read: its error is the one raised
                _discard(conn)

    def _fresh_replica(self, candidates: list[Replica], needed: int) -> Connection | None:
        started = time.monotonic()
        deadline = started + self.max_wait_seconds
        lagging: list[tuple[Replica, Connection]] = []
        try:
            for replica in candidates:
                conn, replayed = self._open(replica, needed)
                if conn is None:
                    continue
                if replayed:
                    return self._served(replica, conn, started)
                lagging.append((replica, conn))
            polls = iter(_POLL_SECONDS)
            while lagging and time.monotonic() < deadline:
                time.sleep(min(next(polls, _POLL_SECONDS[-1]), max(0.0, deadline - time.monotonic())))
                for replica, conn in list(lagging):
                    lags = self._still_lagging(replica, conn, needed)
                    if lags is not True:
                        lagging.remove((replica, conn))
                    if lags is None:
                        return self._served(replica, conn, started)
            metrics.REPLICA_FALLBACKS.labels("lagging" if lagging else "down").inc()
            return None
        finally:
            for _, conn in lagging:
                conn.close()

    def _served(self, replica: Replica, conn: Connection, started: float) -> Connection:
        metrics.REPLICA_WAIT.observe(time.monotonic() - started)
        metrics.REPLICA_READS.labels(replica.name).inc()
        return conn

    def _in_turn(self) -> list[Replica]:
        """The replicas not known to be down, starting with the next in turn (spreads the reads)."""
        now = time.monotonic()
        with self._lock:
            start = next(self._turn)
        ordered = self.replicas[start % len(self.replicas):] + self.replicas[:start % len(self.replicas)]
        return [replica for replica in ordered if replica.down_until <= now]

    def _open(self, replica: Replica, needed: int) -> tuple[Connection | None, bool]:
        """An autocommit connection to the replica and whether it has replayed up to `needed`;
        (None, False) when it is down. A pooled connection that predates a restart of the replica
        fails its first statement (and invalidates the pool): one more try, on a fresh one."""
        for attempt in (1, 2):
            try:
                conn = replica.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            except DBAPIError as exc:
                self._mark_down(replica, f"unreachable: {type(exc.orig).__name__}")
                return None, False
            try:
                return conn, self._replayed(replica, conn, needed)
            except DBAPIError as exc:
                if attempt == 2 or not exc.connection_invalidated:
                    self._mark_down(replica, f"unreachable: {type(exc.orig).__name__}")
                    return None, False
        return None, False

    def _replayed(self, replica: Replica, conn: Connection, needed: int) -> bool:
        """Whether the replica has replayed up to `needed`. A connection that fails is discarded
        (and the error raised); a server that is no standby is passed over for a while (and its
        connection closed)."""
        try:
            lsn = replication.replayed_lsn(conn)
        except DBAPIError:
            _discard(conn)
            raise
        if lsn is None:
            conn.close()
            self._mark_down(replica, "not a standby (promoted?)")
            return False
        replica.problem = None
        return lsn_int(lsn) >= needed

    def _still_lagging(self, replica: Replica, conn: Connection, needed: int) -> bool | None:
        """While waiting: None once it has replayed `needed`, True while it lags, False when it
        failed (connection closed, replica passed over)."""
        try:
            return None if self._replayed(replica, conn, needed) else not conn.closed
        except DBAPIError as exc:
            self._mark_down(replica, f"unreachable: {type(exc.orig).__name__}")
            return False

    def _mark_down(self, replica: Replica, problem: str) -> None:
        if replica.problem != problem:
            log.warning("read replica %s passed over for %.0f s: %s", replica.name, RETRY_SECONDS, problem)
        replica.problem = problem
        replica.down_until = time.monotonic() + RETRY_SECONDS

    def status(self) -> list[dict[str, object]]:
        """Each replica, probed now: up (a reachable standby) and how many bytes of WAL it has yet to
        replay, or down and why (for /readyz)."""
        with self.primary.connect() as conn:
            primary_lsn = lsn_int(replication.current_lsn(conn.execution_options(isolation_level="AUTOCOMMIT")))
        out: list[dict[str, object]] = []
        for replica in self.replicas:
            try:
                with replica.engine.connect() as conn:
                    lsn = replication.replayed_lsn(conn.execution_options(isolation_level="AUTOCOMMIT"))
            except DBAPIError as exc:
                out.append({"name": replica.name, "up": False, "problem": f"unreachable: {type(exc.orig).__name__}"})
                continue
            if lsn is None:
                out.append({"name": replica.name, "up": False, "problem": "not a standby (promoted?)"})
            else:
                out.append({"name": replica.name, "up": True, "replay_lag_bytes": max(0, primary_lsn - lsn_int(lsn))})
        return out


def _discard(conn: Connection) -> None:
    """Drop a connection whose server went away (closing it normally would raise)."""
    try:
        conn.invalidate()
        conn.close()
    except Exception:
        pass
