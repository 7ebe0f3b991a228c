"""Connecting to PostgreSQL: the embedded cluster or `MEMWARDEN_DATABASE_URL`, migrations, grants."""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

import anyio
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db.embedded import APP_ROLE, EmbeddedServer, start_embedded
from app.db import vectors  # noqa: F401 — its binary vector parameter registered before any connection is made
from app.db.replicas import Replica, ReplicaSet
from app.observability import tracing
from app.observability.db_pool import InstrumentedQueuePool
from app.paths import MIGRATIONS_DIR

log = logging.getLogger(__name__)

# Any constant works; it only has to be the same in every Memwarden process.
_MIGRATION_LOCK = 0x6D656D77
APPEND_ONLY_TABLES = ("audit_entries", "audit_checkpoints", "read_records", "memory_reads", "memory_derivations",
                      "erasure_receipts")
_UNIT_KEY = "memwarden.unit_of_work"  # Connection.info: the innermost UnitOfWork open on it


@dataclass
class Database:
    """An engine and its session factory; services open their own transactions from `sessions`.

    `transaction_slots` caps the transactions held open across awaits (a request's unit of work,
    `unit_of_work`) at half the pool. Such a transaction keeps its connection while it waits for
    the thread pool, and the threads may be waiting for a connection: with no cap, enough
    concurrent units took every connection and nothing progressed until the pool timed out."""

    engine: Engine
    sessions: sessionmaker[Session]
    embedded: EmbeddedServer | None = field(default=None, repr=False)
    transaction_slots: anyio.CapacityLimiter | None = field(default=None, repr=False)
    replicas: ReplicaSet | None = field(default=None, repr=False)
    """Streaming replicas for reads that tolerate staleness (`stale_reader`); None: primary only."""

    def __post_init__(self) -> None:
        if self.transaction_slots is None:  # a unit of work's Database shares its parent's
            capacity = getattr(self.engine.pool, "size", lambda: 10)()  # make_engine's pools never overflow
            self.transaction_slots = anyio.CapacityLimiter(max(1, capacity // 2))

    def dispose(self) -> None:
        self.engine.dispose()
        if self.replicas is not None:
            self.replicas.dispose()

    @contextmanager
    def reader(self) -> Iterator[Connection]:
        """A connection for one-statement reads, in autocommit (no BEGIN/COMMIT round trips).
        When the session factory is bound to an outer connection (the test harness), reads go
        through it instead, so they see that transaction's rows."""
        if self._bound():
            with self.sessions.begin() as session:
                yield session.connection()
            return
        with self.engine.connect() as conn:
            yield conn.execution_options(isolation_level="AUTOCOMMIT")

    def _bound(self) -> bool:
        """Sessions bound to an outer connection (a unit of work, the test harness's transaction)."""
        return isinstance(self.sessions.kw.get("bind"), Connection)

    @contextmanager
    def stale_reader(self, tenant_id: str, key_id: str | None) -> Iterator[Connection]:
        """Like `reader`, for a read that tolerates staleness (recall, list, get, export): on a
        replica that has replayed the key's last write (`app.db.replicas`), else on the primary.
        `key_id` None (an operator's read): the replica must have replayed everything committed.
        Never for a read whose answer decides a write: those stay on the primary (`reader`)."""
        if self.replicas is None or self._bound():
            with self.reader() as conn:
                yield conn
            return
        with self.replicas.connection(tenant_id, key_id) as conn:
            yield conn

    @contextmanager
    def stale_session(self, tenant_id: str, key_id: str | None) -> Iterator[Session]:
        """An ORM session over `stale_reader`; without replicas, exactly `sessions()`."""
        if self.replicas is None or self._bound():
            with self.sessions() as session:
                yield session
            return
        with self.replicas.connection(tenant_id, key_id, autocommit=False) as conn, \
                Session(bind=conn, expire_on_commit=False) as session:
            yield session

    def note_key_write(self, tenant_id: str, key_id: str) -> None:
        """After a key's write request committed: let its later reads on replicas wait for it."""
        if self.replicas is not None and not self._bound():
            self.replicas.note_write(tenant_id, key_id)

    def unit_of_work(self) -> UnitOfWork:
        """One transaction around several service calls (see `UnitOfWork`)."""
        return UnitOfWork(self)


class UnitOfWork:
    """One database transaction that services' own transactions join as savepoints.

    `database` is a `Database` whose sessions are bound to this transaction's connection, so
    whatever a service commits becomes durable only when `commit()` is called here, together with
    anything the caller wrote on `connection` (the API stores an idempotent answer this way).
    Inside an outer transaction already (the test harness), it is a savepoint of that one.

    Work that must wait for durability (publishing a signed checkpoint to the witness) is handed
    here by the joined sessions (`after_commit`) and runs after the real COMMIT; a rollback drops it.
    """

    def __init__(self, db: Database):
        bound = db.sessions.kw.get("bind")
        self._owns_connection = not isinstance(bound, Connection)
        self.connection: Connection = db.engine.connect() if self._owns_connection else bound
        self._parent: UnitOfWork | None = None if self._owns_connection else self.connection.info.get(_UNIT_KEY)
        self._after_commit: list[Callable[[], None]] = []
        try:
            self._tx = self.connection.begin() if self._owns_connection else self.connection.begin_nested()
        except Exception:
            self._close()
            raise
        self.connection.info[_UNIT_KEY] = self
        sessions = sessionmaker(bind=self.connection, join_transaction_mode="create_savepoint", expire_on_commit=False)
        self.database = Database(db.engine, sessions, db.embedded, db.transaction_slots)

    @property
    def durable(self) -> bool:
        """Whether `commit()` makes the work durable: this unit owns its connection, or is a savepoint
        of one that does. Not in the test harness, whose outer transaction is always rolled back."""
        return self._owns_connection or (self._parent is not None and self._parent.durable)

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run `action` once this unit's work is durable (never if it rolls back). A unit that is a
        savepoint passes it to the unit it is nested in; one in no durable transaction drops it."""
        self._after_commit.append(action)

    def commit(self) -> None:
        try:
            self._tx.commit()
        finally:
            self._close()
        actions, self._after_commit = self._after_commit, []
        if self._owns_connection:
            run_after_commit(actions)
        elif self._parent is not None:
            self._parent._after_commit.extend(actions)

    def rollback(self) -> None:
        """Undo everything; never raises (the connection may be the reason we are here)."""
        self._after_commit.clear()
        try:
            if self._tx.is_active:
                self._tx.rollback()
        except Exception:
            if self._owns_connection:
                self.connection.invalidate()
        finally:
            self._close()

    def _close(self) -> None:
        try:  # Connection.info outlives the checkout (it is the pooled connection's): unregister
            if self.connection.info.get(_UNIT_KEY) is self:
                if self._parent is None:
                    del self.connection.info[_UNIT_KEY]
                else:
                    self.connection.info[_UNIT_KEY] = self._parent
        except Exception:  # an invalidated connection: its pooled connection, and info, are gone
            pass
        if self._owns_connection:
            try:
                self.connection.close()
            except Exception:
                pass


def unit_of_work_on(connection: Connection) -> UnitOfWork | None:
    """The innermost `UnitOfWork` open on `connection`, if any."""
    return connection.info.get(_UNIT_KEY)


def run_after_commit(actions: list[Callable[[], None]]) -> None:
    """Run follow-ups of a committed transaction in order; one that fails is logged and passed
    over (the transaction is committed: a follow-up must not turn it into an error)."""
    for action in actions:
        try:
            action()
        except Exception:
            log.exception("a post-commit action failed")


@dataclass(frozen=True)
class DatabaseUrls:
    app_url: str
    admin_url: str
    embedded: EmbeddedServer | None = None


def resolve_urls(settings: Settings) -> DatabaseUrls:
    """The URLs to use: the configured ones, or those of the embedded cluster (started here)."""
    if settings.database_url:
        return DatabaseUrls(settings.database_url, settings.migration_database_url or settings.database_url)
    server = start_embedded(settings.data_path)
    return DatabaseUrls(server.app_url, server.admin_url, server)


def make_engine(url: str, *, pool_size: int = 10, pool_timeout: float = 5,
                connect_timeout: int | None = None) -> Engine:
    """An engine that never logs parameters. No pre-ping (a round trip on every checkout): after a
    database restart the first statement on a stale connection fails, SQLAlchemy invalidates the
    whole pool, and that one request answers 503; the next ones reconnect.

    Every statement is planned for its actual parameters (`plan_cache_mode`, set once per
    connection at connect time, no round trip per request): psycopg prepares a statement after a
    few executions and PostgreSQL may then switch to one generic plan for every parameter value.
    Scopes are skewed (most agents hold hundreds of rows, a few tens of thousands), so a generic
    recall plan made for small scopes took 0.3-0.7 s on a 50,000-row agent instead of ~2 ms;
    planning these short statements costs ~0.1 ms each.

    No parallel query workers either: a request's statements are short, and starting two workers
    for a keyword search over a 50,000-row agent took ~20 ms of a ~30 ms statement that runs in
    ~10 ms alone, on cores that concurrent requests need anyway.

    `pool_size` connections, and as many again under bursts, all kept once opened: as overflow
    connections (the same ceiling) the ones above `pool_size` closed whenever they went back to
    a pool holding `pool_size` idle, and 16 concurrent recalls reopened one every ~20-30 requests:
    a new backend, which pays its start and cold catalog caches again (docs/benchmarks/,
    "PostgreSQL's share").

    `pool_timeout` bounds the wait for a connection: past it the request is shed (503 with
    `Retry-After`, see `app.error_responses.as_app_error`) instead of queueing behind a saturated pool.
    `connect_timeout` (seconds) bounds a connection attempt (replicas: an unreachable one is passed over)."""
    connect_args = {"options": "-c plan_cache_mode=force_custom_plan -c max_parallel_workers_per_gather=0"}
    if connect_timeout is not None:
        connect_args["connect_timeout"] = connect_timeout
    engine = create_engine(
        url, poolclass=InstrumentedQueuePool, pool_size=2 * pool_size, max_overflow=0,
        pool_timeout=pool_timeout, pool_recycle=1800,
        hide_parameters=True,
        connect_args=connect_args,
    )
    tracing.instrument_engine(engine)  # a span per statement while OpenTelemetry is on
    return engine


def make_database(engine: Engine, embedded: EmbeddedServer | None = None,
                  replicas: ReplicaSet | None = None) -> Database:
    return Database(engine, sessionmaker(engine, expire_on_commit=False), embedded, replicas=replicas)


def make_replicas(primary: Engine, settings: Settings) -> ReplicaSet | None:
    """The replicas of `MEMWARDEN_READ_REPLICA_URLS` (named `replica1`, ... in that order), or None."""
    urls = [url.strip() for url in settings.read_replica_urls.split(",") if url.strip()]
    if not urls:
        return None
    replicas = [Replica(f"replica{n}", make_engine(url, pool_size=settings.db_pool_size,
                                                    pool_timeout=settings.db_pool_timeout_seconds, connect_timeout=2))
                for n, url in enumerate(urls, start=1)]
    return ReplicaSet(primary, replicas, max_wait_seconds=max(0, settings.replica_max_wait_ms) / 1000)


def migrate(urls: DatabaseUrls) -> None:
    """Apply Alembic migrations as the owner and grant the app role its least privileges."""
    engine = create_engine(urls.admin_url)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _MIGRATION_LOCK})
            conn.commit()
            try:
                cfg = Config()
                cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
                cfg.attributes["connection"] = conn
                from alembic.runtime.migration import MigrationContext

                before = MigrationContext.configure(conn).get_current_revision()
                conn.commit()  # end the read's transaction: Alembic opens its own (autocommit blocks need that)
                command.upgrade(cfg, "head")
                conn.commit()
                after = MigrationContext.configure(conn).get_current_revision()
                # One line for the operator; Alembic's own per-migration lines are DEBUG-level chatter.
                if before != after:
                    log.info("database schema migrated to revision %s (from %s)", after, before or "an empty database")
                else:
                    log.debug("database schema at revision %s", after)
                app_role = _separate_app_role(urls)
                if app_role:
                    _grant_app_role(conn, app_role, create=urls.embedded is not None)
                    conn.commit()
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _MIGRATION_LOCK})
                conn.commit()
    finally:
        engine.dispose()


def _separate_app_role(urls: DatabaseUrls) -> str | None:
    if urls.embedded is not None:
        return APP_ROLE
    app_user = make_url(urls.app_url).username
    admin_user = make_url(urls.admin_url).username
    return app_user if app_user and app_user != admin_user else None


def _grant_app_role(conn, role: str, *, create: bool) -> None:
    """The app may read and write its tables but only SELECT/INSERT the audit log."""
    quoted = conn.dialect.identifier_preparer.quote(role)
    if create:
        exists = conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}).first()
        if not exists:
            conn.execute(text(f"CREATE ROLE {quoted} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE"))
    conn.execute(text(f"GRANT USAGE ON SCHEMA public TO {quoted}"))
    conn.execute(text(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {quoted}"))
    conn.execute(text(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {quoted}"))
    for table in APPEND_ONLY_TABLES:
        conn.execute(text(f"REVOKE UPDATE, DELETE, TRUNCATE ON {table} FROM {quoted}"))
    conn.execute(text(f"REVOKE ALL ON alembic_version FROM {quoted}"))
    conn.execute(text(f"GRANT SELECT ON alembic_version TO {quoted}"))


def open_database(settings: Settings, *, run_migrations: bool = True, wait_seconds: float = 0.0) -> Database:
    """Start or reach PostgreSQL, migrate it, and return the app-role connection pool.
    `wait_seconds`: how long to keep retrying an unreachable database (a serving process that
    starts while its embedded PostgreSQL is being restarted waits instead of failing)."""
    urls = resolve_urls(settings)
    if run_migrations:
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                migrate(urls)
                break
            except OperationalError:
                if time.monotonic() >= deadline:
                    raise
                log.warning("database unreachable; retrying")
                time.sleep(0.5)
    engine = make_engine(urls.app_url, pool_size=settings.db_pool_size, pool_timeout=settings.db_pool_timeout_seconds)
    return make_database(engine, urls.embedded, make_replicas(engine, settings))
