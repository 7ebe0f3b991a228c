"""Shared pytest fixtures (loaded as a plugin for `tests/` and `e2e/` alike).

- One real PostgreSQL for the session: the embedded pgserver cluster in a temp dir, or
  `MEMWARDEN_TEST_DATABASE_URL` (owner URL of a PostgreSQL with pgvector) when set.
- `ctx`/`client`: each test runs inside an outer transaction that is rolled back; services'
  commits become savepoints (SQLAlchemy's `join_transaction_mode="create_savepoint"`).
- `committed_ctx`: real commits, for multi-process tests and the live server; such tests use
  fresh tenants so they never see each other's rows.
- `live_server`: `memwarden serve` as a subprocess on a free port against the same database.
- Playwright runs Debian's Chromium (`/usr/bin/chromium`); it cannot download browsers here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import typing
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest
from sqlalchemy.orm import sessionmaker
from starlette.testclient import TestClient

from app.config import Settings
from app.local_server import clean_env, free_port, serve, wait_ready
from app.db.database import Database, DatabaseUrls, make_database, make_engine, migrate, resolve_urls
from app.main import create_app
from app.services.runtime.context import AppContext

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Give this run a temp root of its own (unless `--basetemp` names one). pytest's default,
    /tmp/pytest-of-<user>/pytest-N, is shared by every run of the user on the machine, and each run
    prunes all but the newest three: a second suite started beside a long one deleted the first's
    embedded PostgreSQL mid-run. The root is removed after a passing run and kept after a failing
    one, for its logs."""
    if config.option.basetemp is None:
        root = tempfile.mkdtemp(prefix="memwarden-pytest-")
        config.option.basetemp = root
        config.add_cleanup(lambda: _drop_temp_root(config, root))


def _drop_temp_root(config: pytest.Config, root: str) -> None:
    if getattr(config, "_memwarden_exitstatus", 1) == 0:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"\nmemwarden: test temp root kept at {root}", file=sys.stderr)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config._memwarden_exitstatus = int(exitstatus)


def unique(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("memwarden-data")


@pytest.fixture(scope="session")
def db_urls(data_dir: Path) -> Iterator[DatabaseUrls]:
    """The session's PostgreSQL, migrated; app URL is the least-privilege role."""
    external = os.environ.get("MEMWARDEN_TEST_DATABASE_URL")
    settings = Settings(data_dir=data_dir, database_url=external, migration_database_url=external)
    urls = resolve_urls(settings)
    migrate(urls)
    yield urls


@pytest.fixture(scope="session")
def settings(db_urls: DatabaseUrls, data_dir: Path) -> Settings:
    return Settings(
        database_url=db_urls.app_url,
        migration_database_url=db_urls.admin_url,
        data_dir=data_dir,
        secret_key="test-secret-key-not-for-production",
        rate_limit_per_minute=0,
        checkpoint_every=50,
        webhook_allow_private=True,  # the tests' receivers listen on 127.0.0.1
        backend_allow_private=True,  # so do the other Memwardens the router tests deliver to
        oidc_allow_private=True,  # and the test identity provider
    )


@pytest.fixture(scope="session")
def app_database(settings: Settings) -> Iterator[Database]:
    database = make_database(make_engine(settings.database_url, pool_size=5))
    yield database
    database.dispose()


@pytest.fixture(scope="session")
def committed_ctx(settings: Settings, app_database: Database) -> AppContext:
    """Services that really commit (visible to other processes)."""
    return AppContext(settings, app_database)


@pytest.fixture
def ctx(settings: Settings, app_database: Database) -> Iterator[AppContext]:
    """Services whose every commit is rolled back after the test."""
    connection = app_database.engine.connect()
    outer = connection.begin()
    sessions = sessionmaker(bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False)
    yield AppContext(settings, Database(app_database.engine, sessions))
    outer.rollback()
    connection.close()


@pytest.fixture
def client(ctx: AppContext) -> Iterator[TestClient]:
    with TestClient(create_app(ctx.settings, ctx=ctx), base_url="http://testserver") as test_client:
        yield test_client


@pytest.fixture
def make_tenant(ctx: AppContext) -> Callable[..., object]:
    from app.services.tenancy.tenants import create_tenant

    def make(name: str | None = None):
        return create_tenant(ctx, name=name or unique("ten"), actor={"kind": "test", "id": "pytest"})

    return make


@pytest.fixture
def tenant(make_tenant):
    return make_tenant()


@pytest.fixture
def make_key(ctx: AppContext, tenant) -> Callable[..., str]:
    """Issue a key (default: the test tenant, all memory scopes, any agent); returns the token."""
    from app.services.tenancy.apikeys import create_key

    def make(scopes: str = "memory:read,memory:write", agents: str = "*", tenant_id: str | None = None) -> str:
        return create_key(ctx, tenant_id=tenant_id or tenant.id, scopes=scopes, agents=agents,
                          actor={"kind": "test", "id": "pytest"}).token

    return make


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def agent(make_key) -> dict[str, str]:
    """Bearer headers of an agent's key in the test tenant: memory read and write."""
    return bearer(make_key(scopes="memory:read,memory:write"))


@pytest.fixture
def reviewer(make_key) -> dict[str, str]:
    """Bearer headers of a reviewer's key in the test tenant: decide changes, read memory."""
    return bearer(make_key(scopes="review:decide,memory:read"))


# --- processes --------------------------------------------------------------------------------
# The suite starts its own processes with these (never through app.bench: benchmarks are a tool
# the suite drives by their CLI, not a library it imports).

fresh_env = clean_env


def memwarden_cli(data_dir: Path, *args: str, timeout: float = 300) -> str:
    """`memwarden ARGS` on `data_dir`'s database (beside a running serve or not); its stdout."""
    done = subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=PROJECT_ROOT, env=fresh_env(data_dir),
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"memwarden {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout


@contextlib.contextmanager
def fresh_server(data_dir: Path, env: dict[str, str] | None = None, workers: int = 1,
                 log: typing.BinaryIO | None = None) -> Iterator[tuple[subprocess.Popen, str]]:
    """`memwarden serve` of this checkout on its own embedded database in `data_dir`: (process, base
    URL). Its stderr goes to `log` when given (a file the caller reads)."""
    with serve(data_dir, env=env, workers=workers, cwd=PROJECT_ROOT, log=log) as server:
        yield server.proc, server.base_url


def server_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "MEMWARDEN_DATABASE_URL": settings.database_url or "",
        "MEMWARDEN_MIGRATION_DATABASE_URL": settings.migration_database_url or "",
        "MEMWARDEN_DATA_DIR": str(settings.data_dir),
        "MEMWARDEN_SECRET_KEY": settings.secret_key or "",
        "MEMWARDEN_RATE_LIMIT_PER_MINUTE": "0",
        "MEMWARDEN_WEBHOOK_ALLOW_PRIVATE": "1",
        "MEMWARDEN_BACKEND_ALLOW_PRIVATE": "1",
        "MEMWARDEN_OIDC_ALLOW_PRIVATE": "1",
        "MEMWARDEN_LOG_LEVEL": "warning",
        # A live server's checkpoint job signs every chain that grew, its own or not. The tamper tests
        # edit chains under it, and a signature over their tampered state would race their asserts;
        # tests of the cadence itself pass their own interval.
        "MEMWARDEN_CHECKPOINT_INTERVAL_SECONDS": "86400",
        # Tests that route a tenant to memory backends wait for deliveries; poll the outbox briskly and
        # retry briskly too: whichever server leads the delivery job (often the session's live server,
        # not the test's own) schedules the retries, and the defaults' 5 s x 4 per attempt made a
        # backend that came back wait over a minute for its next attempt.
        "MEMWARDEN_BACKEND_POLL_SECONDS": "0.2",
        "MEMWARDEN_BACKEND_RETRY_BASE_SECONDS": "0.5",
        "MEMWARDEN_BACKEND_RETRY_MAX_SECONDS": "2",
        "MEMWARDEN_BACKEND_MAX_ATTEMPTS": "50",
        # The consolidation job runs in whichever server leads it (often the session's live server):
        # a tenant that opted in to a schedule is found within a second, not the default 5 minutes.
        "MEMWARDEN_CONSOLIDATION_POLL_SECONDS": "1",
        # Likewise the memory state check: the chain tests append entries about memories that never
        # existed, which a round over every tenant would report; its own tests pass an interval.
        "MEMWARDEN_STATE_CHECK_INTERVAL_SECONDS": "0",
        **extra,
    })
    return env


def start_server(settings: Settings, port: int | None = None, **env: str) -> tuple[subprocess.Popen, str]:
    """`memwarden serve` as a real OS process; returns it and its base URL once ready."""
    port = port or free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=PROJECT_ROOT, env=server_env(settings, **env),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base_url, proc)
    except Exception:
        proc.kill()
        raise RuntimeError(f"server failed to start: {proc.stderr.read().decode()[-3000:]}") from None
    return proc, base_url


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def dev_vector_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment that lets the screening trainer's processes of one run share their embeddings
    (``dev.screening.train.exemplars.VECTOR_CACHE_ENV``): its `--check` and the held-out benchmark
    embed the same few thousand training rows with the same model."""
    # One folder for the run's workers (each has its own temp root below the run's): whichever runs first
    # embeds, the other reads.
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "dev-vectors"
    folder.mkdir(exist_ok=True)
    return {"DEV_SCREENING_VECTOR_CACHE": str(folder)}


@pytest.fixture(scope="session")
def live_server(settings: Settings) -> Iterator[str]:
    proc, base_url = start_server(settings)
    yield base_url
    stop_server(proc)


@pytest.fixture
def live_tenant(committed_ctx: AppContext):
    """A fresh, committed tenant (for tests against the live server)."""
    from app.services.tenancy.tenants import create_tenant

    return create_tenant(committed_ctx, name=unique("live"), actor={"kind": "test", "id": "pytest"})


@pytest.fixture
def live_key(committed_ctx: AppContext, live_tenant) -> Callable[..., str]:
    from app.services.tenancy.apikeys import create_key

    def make(scopes: str = "memory:read,memory:write", agents: str = "*") -> str:
        return create_key(committed_ctx, tenant_id=live_tenant.id, scopes=scopes, agents=agents,
                          actor={"kind": "test", "id": "pytest"}).token

    return make


# --- browser-shaped helpers for TestClient page tests ------------------------------------------

def csrf_token_in(html: str) -> str:
    """The CSRF token a rendered page embeds in its forms."""
    import re

    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def web_sign_in(client, username: str, password: str, next_url: str = "/review"):
    """Sign in through /login as a browser would (fresh cookies, CSRF token from the form)."""
    client.cookies.clear()
    page = client.get("/login")
    return client.post("/login", data={"username": username, "password": password, "next": next_url,
                                       "csrf_token": csrf_token_in(page.text)}, follow_redirects=False)
