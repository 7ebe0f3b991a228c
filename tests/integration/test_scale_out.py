"""Two real `serve` processes on one PostgreSQL behave as one service: one rate limit per key, web
sessions valid on either, and a background job that runs once per cadence, taken over by the other
process when its leader is killed."""

import os
import signal
import threading
import time

import httpx
import pytest
from sqlalchemy import select, text

from app.db.models import AuditCheckpoint
from app.services.audit import chain_for
from app.services.context import AppContext
from app.services.leader import APPLICATION_NAME
from app.services.users import create_user
from tests.harness import bearer, csrf_token_in, start_server, stop_server, unique

pytestmark = pytest.mark.slow

RATE_LIMIT = 10
CHECKPOINT_SECONDS = 1


@pytest.fixture(scope="module")
def two_servers(settings):
    """Started once for the module; the last test kills one of them."""
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


def test_one_rate_limit_per_key_across_processes(two_servers, live_key):
    (_, url_a), (_, url_b) = two_servers
    headers = bearer(live_key(scopes="memory:read"))
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
    assert httpx.get(f"{url_b}/v1/whoami", headers=bearer(live_key(scopes="memory:read")),
                     timeout=30).status_code == 200


def test_a_web_session_from_one_process_works_on_the_other(two_servers, live_tenant, committed_ctx):
    (_, url_a), (_, url_b) = two_servers
    username, password = unique("scale"), "correct horse battery"
    create_user(committed_ctx, username=username, password=password, tenant_id=live_tenant.id, role="reviewer",
                actor={"kind": "test", "id": "pytest"})
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
        name = conn.scalar(text("SELECT application_name FROM pg_stat_activity WHERE application_name LIKE :n"),
                           {"n": f"{APPLICATION_NAME} {job} pid=%"})
    return int(name.rsplit("=", 1)[1]) if name else None


def _checkpoint_times(ctx: AppContext, chain_id: str) -> list[float]:
    with ctx.db.sessions() as session:
        return [t.timestamp() for t in session.scalars(select(AuditCheckpoint.created_at).where(
            AuditCheckpoint.chain_id == chain_id).order_by(AuditCheckpoint.created_at))]


def test_checkpoint_cadence_runs_once_and_survives_its_leader(two_servers, settings, app_database, live_tenant):
    (proc_a, _), (proc_b, _) = two_servers
    # A third writer (this process) that never signs checkpoints itself, so every checkpoint of the
    # chain comes from the servers' time-based job.
    writer = AppContext(settings.with_changes(checkpoint_every=0), app_database)
    chain_id = chain_for(live_tenant.id)
    stop = threading.Event()

    def write_continuously():
        while not stop.is_set():
            with writer.db.sessions.begin() as session:
                writer.audit.append(session, tenant_id=live_tenant.id, event_type="tenant.updated",
                                    actor={"kind": "test", "id": "pytest"}, subject=None, data={})
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
        assert min(gaps) > 0.7 * CHECKPOINT_SECONDS, gaps

        os.kill(leader, signal.SIGKILL)
        (proc_a if leader == proc_a.pid else proc_b).wait(10)
        time.sleep(4 * CHECKPOINT_SECONDS)
        survivor = _leader_pid(writer, "audit-checkpoints")
        assert survivor in (proc_a.pid, proc_b.pid) and survivor != leader
        after = [t for t in _checkpoint_times(writer, chain_id) if t > before[-1]]
        assert len(after) >= 2  # the survivor took the job over
        gaps = [b - a for a, b in zip(after, after[1:])]
        assert min(gaps) > 0.7 * CHECKPOINT_SECONDS, gaps
    finally:
        stop.set()
        thread.join(5)
