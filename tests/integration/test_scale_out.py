"""Two real `serve` processes on one PostgreSQL behave as one service: one rate limit per key, web
sessions valid on either, and a background job that runs once per cadence, taken over by the other
process when its leader is killed.

They get a database of their own in the test cluster: job leadership is an advisory lock, which
is per database, and the suite's other servers (say the session-wide `live_server`) would otherwise
compete for it with their own cadence."""

import os
import signal
import threading
import time
import uuid

import httpx
import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url

from app.db.database import DatabaseUrls, make_database, make_engine, migrate
from app.db.models import AuditCheckpoint
from app.services.tenancy.apikeys import create_key
from app.services.audit.audit import chain_for
from app.services.runtime.context import AppContext
from app.services.runtime.leader import APPLICATION_NAME
from app.services.tenancy.tenants import create_tenant
from app.services.tenancy.users import create_user
from tests.harness import bearer, csrf_token_in, start_server, stop_server, unique

pytestmark = pytest.mark.slow

RATE_LIMIT = 10
CHECKPOINT_SECONDS = 1


ACTOR = {"kind": "test", "id": "pytest"}


@pytest.fixture(scope="module")
def own_db(settings):
    """(settings, context) of a fresh, migrated database in the test cluster, dropped afterwards."""
    name = f"scaleout_{uuid.uuid4().hex[:10]}"
    admin_url = make_url(settings.migration_database_url)
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    own = settings.with_changes(
        database_url=make_url(settings.database_url).set(database=name).render_as_string(hide_password=False),
        migration_database_url=admin_url.set(database=name).render_as_string(hide_password=False))
    migrate(DatabaseUrls(own.database_url, own.migration_database_url))
    ctx = AppContext(own, make_database(make_engine(own.database_url, pool_size=3)))
    yield own, ctx
    ctx.close()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def tenant_id(own_db):
    return create_tenant(own_db[1], name=unique("scale"), actor=ACTOR).id


@pytest.fixture(scope="module")
def two_servers(own_db):
    """Started once for the module; the last test kills one of them."""
    settings = own_db[0]
    env = {"MEMWARDEN_RATE_LIMIT_PER_MINUTE": str(RATE_LIMIT),
           "MEMWARDEN_CHECKPOINT_INTERVAL_SECONDS": str(CHECKPOINT_SECONDS),
           "MEMWARDEN_CHECKPOINT_EVERY": "1000000"}  # only the time-based cadence signs checkpoints
    a = start_server(settings, **env)
    try:
        b = start_server(settings, **env)
    except Exception:
        stop_server(a[0])
        raise
    yield a, b
    for proc, _ in (a, b):
        if proc.poll() is None:
            stop_server(proc)


def _key(ctx: AppContext, tenant_id: str) -> str:
    return create_key(ctx, tenant_id=tenant_id, scopes="memory:read", actor=ACTOR).token


def test_one_rate_limit_per_key_across_processes(two_servers, own_db, tenant_id):
    (_, url_a), (_, url_b) = two_servers
    headers = bearer(_key(own_db[1], tenant_id))
    extra = 5
    answers = []
    for i in range(RATE_LIMIT + extra):  # alternate, so each process sees only half the requests
        url = url_a if i % 2 == 0 else url_b
        answers.append((url, httpx.get(f"{url}/v1/whoami", headers=headers, timeout=30)))
    codes = [r.status_code for _, r in answers]
    assert codes == [200] * RATE_LIMIT + [429] * extra
    refused = [(url, r) for url, r in answers if r.status_code == 429]
    assert {url for url, _ in refused} == {url_a, url_b}
    for _, response in refused:
        assert response.json()["error"]["code"] == "rate_limited"
        assert int(response.headers["retry-after"]) >= 1
    # Another key of the same tenant has its own bucket.
    assert httpx.get(f"{url_b}/v1/whoami", headers=bearer(_key(own_db[1], tenant_id)),
                     timeout=30).status_code == 200


def test_a_web_session_from_one_process_works_on_the_other(two_servers, own_db, tenant_id):
    (_, url_a), (_, url_b) = two_servers
    username, password = unique("scale"), "correct horse battery"
    create_user(own_db[1], username=username, password=password, tenant_id=tenant_id, role="reviewer",
                actor=ACTOR)
    with httpx.Client(base_url=url_a, timeout=30) as on_a:
        page = on_a.get("/login")
        signed_in = on_a.post("/login", data={"username": username, "password": password, "next": "/review",
                                              "csrf_token": csrf_token_in(page.text)})
        assert signed_in.status_code == 303
        cookies = dict(on_a.cookies)
    with httpx.Client(base_url=url_b, timeout=30, cookies=cookies) as on_b:
        review = on_b.get("/review")
        assert review.status_code == 200 and username in review.text
        # Signing out on B ends the session on A too.
        signed_out = on_b.post("/logout", data={"csrf_token": csrf_token_in(review.text)})
        assert signed_out.status_code == 303
    with httpx.Client(base_url=url_a, timeout=30, cookies=cookies) as on_a:
        assert on_a.get("/review").status_code == 303


def _leader_pid(ctx: AppContext, job: str) -> int | None:
    with ctx.db.reader() as conn:
        name = conn.scalar(text("SELECT application_name FROM pg_stat_activity "
                                "WHERE datname = current_database() AND application_name LIKE :n"),
                           {"n": f"{APPLICATION_NAME} {job} pid=%"})
    return int(name.rsplit("=", 1)[1]) if name else None


def _checkpoint_times(ctx: AppContext, chain_id: str) -> list[float]:
    with ctx.db.sessions() as session:
        return [t.timestamp() for t in session.scalars(select(AuditCheckpoint.created_at).where(
            AuditCheckpoint.chain_id == chain_id).order_by(AuditCheckpoint.created_at))]


def test_checkpoint_cadence_runs_once_and_survives_its_leader(two_servers, own_db, tenant_id):
    (proc_a, _), (proc_b, _) = two_servers
    # A third writer (this process) that never signs checkpoints itself, so every checkpoint of the
    # chain comes from the servers' time-based job.
    settings, ctx = own_db
    writer = AppContext(settings.with_changes(checkpoint_every=0), ctx.db)
    chain_id = chain_for(tenant_id)
    stop = threading.Event()

    def write_continuously():
        while not stop.is_set():
            with writer.db.sessions.begin() as session:
                writer.audit.append(session, tenant_id=tenant_id, event_type="tenant.updated", actor=ACTOR,
                                    subject=None, data={})
            time.sleep(0.05)

    thread = threading.Thread(target=write_continuously, daemon=True)
    thread.start()
    try:
        time.sleep(5 * CHECKPOINT_SECONDS)
        leader = _leader_pid(writer, "audit-checkpoints")
        assert leader in (proc_a.pid, proc_b.pid)
        before = _checkpoint_times(writer, chain_id)
        # Each round signs the chain once: two processes signing on their own would put two
        # checkpoints in every second, at least one pair of them less than half a second apart.
        assert len(before) >= 3
        gaps = [b - a for a, b in zip(before, before[1:])]
        assert min(gaps) > 0.6 * CHECKPOINT_SECONDS, gaps

        os.kill(leader, signal.SIGKILL)
        (proc_a if leader == proc_a.pid else proc_b).wait(10)
        time.sleep(4 * CHECKPOINT_SECONDS)
        survivor = _leader_pid(writer, "audit-checkpoints")
        assert survivor in (proc_a.pid, proc_b.pid) and survivor != leader
        after = [t for t in _checkpoint_times(writer, chain_id) if t > before[-1]]
        assert len(after) >= 2  # the survivor took the job over
        gaps = [b - a for a, b in zip(after, after[1:])]
        assert min(gaps) > 0.6 * CHECKPOINT_SECONDS, gaps
    finally:
        stop.set()
        thread.join(5)
