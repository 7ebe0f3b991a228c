"""Pre-built statements run on psycopg itself, for the hot paths (issue 25).

Every `/v1` request checks its key, a recall takes its read budget, a remember locks its audit
chain: short statements whose text never changes. Through SQLAlchemy each execution builds an
execution context, runs the statement and result events, converts parameters and wraps the
rows (~0.2-0.5 ms of CPU a statement, more than PostgreSQL spends on it); a checkout through
`Engine.connect()` with `AUTOCOMMIT` adds its own. Here the text is written once in
`app/repos` (still the only place SQL is written) as a `Statement`, and run as a prepared
statement on the driver connection:

- `autocommit(db)`: a pooled connection in autocommit for one-statement reads (what
  `Database.reader` gives), or, when the sessions are bound to an outer connection (the test
  harness, a unit of work), that connection inside its transaction, as `reader` does;
- `driver_of(session)`: the psycopg connection under a session's transaction, for a statement
  that belongs to it (the chain lock).

A psycopg error leaves here as SQLAlchemy's own exception (an `OperationalError` still answers
503), and a connection the error broke is invalidated, not returned to the pool. Each statement
still gets its OpenTelemetry span (`tracing.client_span`) and is shown to `observers` (what
`memwarden bench hotpath` counts round trips with).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import psycopg
from psycopg.rows import namedtuple_row
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app.observability import tracing

if TYPE_CHECKING:
    from app.db.database import Database

observers: list[Callable[[str, psycopg.Connection], None]] = []
"""Called with each statement's text and connection before it is sent (benchmarks count round trips)."""


class Statement:
    """One statement's psycopg text (`%(name)s` placeholders), written once in `app/repos`."""

    __slots__ = ("sql", "operation")

    def __init__(self, sql: str):
        self.sql = sql
        word = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        self.operation = word if word.isalpha() and len(word) <= 16 else "SQL"

    def __repr__(self) -> str:
        return f"Statement({self.sql[:60]!r})"


def fetch_one(conn: psycopg.Connection, statement: Statement, params: Mapping[str, Any] | Sequence[Any]
              ) -> tuple | None:
    """The first row (a tuple) of `statement` run on `conn`, or None."""
    with _sent(statement, conn), conn.cursor() as cursor:
        cursor.execute(statement.sql, params, prepare=True)
        return cursor.fetchone()


def fetch_named(conn: psycopg.Connection, statement: Statement, params: Mapping[str, Any] | Sequence[Any]
                ) -> Any:
    """The first row of `statement` as a named tuple (attributes named as the columns), or None."""
    with _sent(statement, conn), conn.cursor(row_factory=namedtuple_row) as cursor:
        cursor.execute(statement.sql, params, prepare=True)
        return cursor.fetchone()


def fetch_all(conn: psycopg.Connection, statement: Statement, params: Mapping[str, Any] | Sequence[Any]
              ) -> list[tuple]:
    """Every row (tuples) of `statement` run on `conn`."""
    with _sent(statement, conn), conn.cursor() as cursor:
        cursor.execute(statement.sql, params, prepare=True)
        return cursor.fetchall()


def fetch_none(conn: psycopg.Connection, statement: Statement, params: Mapping[str, Any] | Sequence[Any]) -> int:
    """Run `statement` (one that returns no rows) on `conn`; the number of rows it touched."""
    with _sent(statement, conn), conn.cursor() as cursor:
        cursor.execute(statement.sql, params, prepare=True)
        return cursor.rowcount


@contextmanager
def _sent(statement: Statement, conn: psycopg.Connection) -> Iterator[None]:
    for observe in observers:
        observe(statement.sql, conn)
    with tracing.client_span(statement.operation):
        yield


@contextmanager
def autocommit(db: Database) -> Iterator[psycopg.Connection]:
    """A psycopg connection for one-statement reads in autocommit (see the module docstring)."""
    bound = db.sessions.kw.get("bind")
    if isinstance(bound, Connection):  # the test harness's or a unit of work's transaction
        with db.sessions.begin() as session, _translating(session):
            yield driver_of(session)
        return
    raw = db.engine.raw_connection()
    driver = raw.driver_connection
    try:
        driver.autocommit = True
        try:
            yield driver
        except psycopg.Error as exc:
            raise _as_sqlalchemy(exc, driver, raw) from exc
        finally:
            if not driver.closed:
                driver.autocommit = False  # the pool's next user expects a transaction
    finally:
        raw.close()


def driver_of(session: Session) -> psycopg.Connection:
    """The psycopg connection under `session`'s transaction (begun by its first statement)."""
    return session.connection().connection.driver_connection


def errors_as_sqlalchemy(session: Session):
    """A context manager for statements run with `driver_of(session)`: psycopg errors leave as
    SQLAlchemy's (the session rolls back as after any failed statement)."""
    return _translating(session)


@contextmanager
def _translating(session: Session) -> Iterator[None]:
    try:
        yield
    except psycopg.Error as exc:
        raise _as_sqlalchemy(exc, None, None) from exc


def _as_sqlalchemy(exc: psycopg.Error, driver: psycopg.Connection | None, raw: Any) -> DBAPIError:
    """SQLAlchemy's exception for `exc` (OperationalError, IntegrityError …); a connection the
    error broke is invalidated so the pool opens a new one."""
    if raw is not None and driver is not None and (driver.closed or driver.broken):
        raw.invalidate(exc)
    return DBAPIError.instance(None, None, exc, psycopg.Error, hide_parameters=True)
