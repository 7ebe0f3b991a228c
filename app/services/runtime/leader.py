"""One leader per job among every process serving the same database, for jobs that must run once.

A job's leader is whichever process holds the job's session-level PostgreSQL advisory lock on a
connection it keeps for that purpose. Each job has its own lock, so a job runs in some process that
has it configured (a process started without compaction never holds the compaction lock). When that process dies (or
its connection does), PostgreSQL releases the lock and the next process that asks takes it over; no table, no
heartbeat, no clock.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from app.repos.runtime import sessions_admin

log = logging.getLogger(__name__)

APPLICATION_NAME = "memwarden-leader"


def lock_key(job: str) -> int:
    """The advisory-lock key of a job: the same in every process, distinct per job name."""
    return int.from_bytes(hashlib.sha256(f"memwarden-leader:{job}".encode()).digest()[:8], "big", signed=True)


class Leadership:
    """Whether this process leads `job`; asks PostgreSQL, never assumes.

    `is_leader()` is cheap for the leader (one `SELECT 1` on its lock connection, to notice a lost
    connection and with it a lost lock) and for followers (one `pg_try_advisory_lock` on a pooled
    connection that goes straight back). Thread-safe: the background jobs call it from the pool."""

    def __init__(self, engine: Engine, job: str):
        self.engine = engine
        self.job = job
        self.key = lock_key(job)
        self._conn: Connection | None = None
        self._mutex = threading.Lock()

    def is_leader(self) -> bool:
        """True when this process holds the leader lock now (taking it if it is free)."""
        with self._mutex:
            if self._conn is not None:
                try:
                    sessions_admin.ping(self._conn)
                    return True
                except DBAPIError:  # the connection (and so the lock) is gone: try to win it again
                    log.warning("lost the leader connection of job %s; re-electing", self.job)
                    self._drop()
            return self._try_acquire()

    def release(self) -> None:
        """Give the lock up (on shutdown), so another process leads at once."""
        with self._mutex:
            if self._conn is not None:
                try:
                    sessions_admin.advisory_unlock(self._conn, key=self.key)
                except DBAPIError:
                    pass
                self._drop()

    def _try_acquire(self) -> bool:
        conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            won = sessions_admin.try_advisory_lock(conn, key=self.key)
            if won:
                # Visible to operators in pg_stat_activity: which serving process leads.
                sessions_admin.set_application_name(conn, name=f"{APPLICATION_NAME} {self.job} pid={os.getpid()}")
        except BaseException:
            conn.invalidate()
            conn.close()
            raise
        if not won:
            conn.close()
            return False
        log.info("this process (pid %s) now runs the background job %s", os.getpid(), self.job)
        self._conn = conn
        return True

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        try:
            conn.invalidate()  # never hand a connection that held the lock back to the pool
            conn.close()
        except Exception:
            pass
