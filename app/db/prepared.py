"""Pre-built statements run on psycopg itself, for the hot paths.

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
- a SQLAlchemy `Connection`, or `driver_of(session)`: the psycopg connection under it, for a
  statement that belongs to its transaction (the chain lock).

A psycopg error leaves here as SQLAlchemy's own exception (an `OperationalError` still answers
503), and a connection the error broke is invalidated, not returned to the pool. Each statement
still gets its OpenTelemetry span (`tracing.client_span`) and is shown to `observers` (what
`memwarden bench hotpath` counts round trips with).
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import psycopg
from psycopg.rows import namedtuple_row
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app.observability import tracing

if TYPE_CHECKING:
    from app.db.database import Database

observers: list[Callable[[str, psycopg.Connection, Any], None]] = []
"""Called with each statement's text, connection and parameters before it is sent (benchmarks
count round trips; `memwarden bench scale` replays recall's statements under EXPLAIN). A statement
sent in the same round trip as the one before it has `PIPELINED` before its text."""


Params = Mapping[str, Any] | Sequence[Any]


class Statement:
    """One statement's psycopg text (`%(name)s` placeholders), written once in `app/repos`."""

    __slots__ = ("sql", "operation")

    def __init__(self, sql: str):
        self.sql = sql
        word = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        self.operation = word if word.isalpha() and len(word) <= 16 else "SQL"

    def __repr__(self) -> str:
        return f"Statement({self.sql[:60]!r})"


Conn = psycopg.Connection | Connection
"""A psycopg connection, or a SQLAlchemy one (its driver connection runs the statement, in its
transaction)."""


def fetch_one(conn: Conn, statement: Statement, params: Params) -> tuple | None:
    """The first row (a tuple) of `statement` run on `conn`, or None."""
    with _run(conn, statement, params) as cursor:
        return cursor.fetchone()


def fetch_named(conn: Conn, statement: Statement, params: Params) -> Any:
    """The first row of `statement` as a named tuple (attributes named as the columns), or None."""
    with _run(conn, statement, params, namedtuple_row) as cursor:
        return cursor.fetchone()


def fetch_all(conn: Conn, statement: Statement, params: Params) -> list[tuple]:
    """Every row (tuples) of `statement` run on `conn`."""
    with _run(conn, statement, params) as cursor:
        return cursor.fetchall()


def fetch_rows(conn: Conn, statement: Statement, params: Params, *, prepare: bool | None = True) -> list[Any]:
    """Every row of `statement` as named tuples (attributes named as the columns). `prepare=None`
    leaves it to psycopg (prepared from its fifth run on a connection), for statement texts built
    per request shape, of which a connection may see many."""
    with _run(conn, statement, params, namedtuple_row, prepare=prepare) as cursor:
        return cursor.fetchall()


def fetch_none(conn: Conn, statement: Statement, params: Params) -> int:
    """Run `statement` (one that returns no rows) on `conn`; the number of rows it touched."""
    with _run(conn, statement, params) as cursor:
        return cursor.rowcount


@contextmanager
def _run(conn: Conn, statement: Statement, params: Params, row_factory: Any = None,
         prepare: bool | None = True) -> Iterator[psycopg.Cursor]:
    """The cursor that ran `statement` (prepared), psycopg's errors raised as SQLAlchemy's."""
    driver = conn.connection.driver_connection if isinstance(conn, Connection) else conn
    for observe in observers:
        observe(statement.sql, driver, params)
    with tracing.client_span(statement.operation):
        try:
            with driver.cursor(row_factory=row_factory) if row_factory else driver.cursor() as cursor:
                cursor.execute(statement.sql, params, prepare=prepare)
                yield cursor
        except psycopg.Error as exc:
            raise DBAPIError.instance(None, None, exc, psycopg.Error, hide_parameters=True) from exc


@contextmanager
def autocommit(db: Database) -> Iterator[psycopg.Connection]:
    """A psycopg connection for one-statement reads in autocommit (see the module docstring); a
    connection an error broke is invalidated, not returned to the pool."""
    bound = db.sessions.kw.get("bind")
    if isinstance(bound, Connection):  # the test harness's or a unit of work's transaction
        with db.sessions.begin() as session:
            yield driver_of(session)
        return
    with _checkout(db.engine) as driver:
        driver.autocommit = True
        try:
            yield driver
        finally:
            if not driver.closed:
                driver.autocommit = False  # the pool's next user expects a transaction


@contextmanager
def transaction(engine: Engine) -> Iterator[psycopg.Connection]:
    """A pooled psycopg connection for one write transaction (begun by its first statement), which
    the block ends with `commit`; whatever it leaves open is rolled back as the connection goes
    back to the pool, and a connection an error broke is invalidated, not returned."""
    with _checkout(engine) as driver:
        yield driver


@contextmanager
def _checkout(engine: Engine) -> Iterator[psycopg.Connection]:
    """The driver connection of one pooled connection: a failed checkout raised as SQLAlchemy's
    `DBAPIError` (the pool connects without SQLAlchemy's wrapping), a connection an error broke
    invalidated rather than returned, and the connection returned to the pool at the end (the
    pool's reset rolls back a transaction still open)."""
    try:
        raw = engine.raw_connection()
    except psycopg.Error as exc:
        raise DBAPIError.instance(None, None, exc, psycopg.Error, hide_parameters=True) from exc
    driver = raw.driver_connection
    try:
        yield driver
    except Exception as exc:
        if driver.closed or driver.broken:
            raw.invalidate(exc)
        raise
    finally:
        raw.close()


def fetch_rows_together(conn: Conn, statements: Sequence[tuple[Statement, Params]]) -> list[list[Any]]:
    """Each statement's rows (named tuples), the statements sent together in one pipeline: one
    round trip for all of them, their replies read once the pipeline's Sync returns. For reads
    that do not depend on each other (recall's two candidate statements). Like `fetch_rows` with
    `prepare=None`. In autocommit they run in one implicit transaction (an error in one fails all)."""
    driver = conn.connection.driver_connection if isinstance(conn, Connection) else conn
    for index, (statement, params) in enumerate(statements):
        for observe in observers:
            observe(statement.sql if index == 0 else PIPELINED + statement.sql, driver, params)
    with tracing.client_span(statements[0][0].operation), ExitStack() as cursors:
        try:
            opened = [cursors.enter_context(driver.cursor(row_factory=namedtuple_row)) for _ in statements]
            with driver.pipeline():
                for cursor, (statement, params) in zip(opened, statements):
                    cursor.execute(statement.sql, params, prepare=None)
            return [cursor.fetchall() for cursor in opened]
        except psycopg.Error as exc:
            raise DBAPIError.instance(None, None, exc, psycopg.Error, hide_parameters=True) from exc


PIPELINED = "(pipelined, no round trip of its own) "
"""What `observers` see before the text of a statement sent in the same pipeline as the one before
it (`fetch_rows_together`)."""

COMMIT_PIPELINED = "COMMIT, pipelined with deferred INSERTs"
"""What `observers` are shown for `commit` (the name `memwarden bench hotpath` counts it under)."""


def commit(conn: psycopg.Connection, send: Callable[[], None]) -> None:
    """End `conn`'s transaction with `send` (which sends its last INSERTs and the COMMIT in one
    pipeline), traced and shown to `observers` as one statement; psycopg's errors raised as
    SQLAlchemy's."""
    for observe in observers:
        observe(COMMIT_PIPELINED, conn, None)
    with tracing.client_span("COMMIT"):
        try:
            send()
        except psycopg.Error as exc:
            raise DBAPIError.instance(None, None, exc, psycopg.Error, hide_parameters=True) from exc


def driver_of(session: Session) -> psycopg.Connection:
    """The psycopg connection under `session`'s transaction (begun by its first statement)."""
    return session.connection().connection.driver_connection
