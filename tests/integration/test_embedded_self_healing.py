"""`memwarden serve` keeps its embedded PostgreSQL alive, for real: the postmaster is SIGKILLed
under a serving process and comes back by itself; liveness fails while it cannot; and a cluster
orphaned by `kill -9` of serve is reused, then stopped, by the next serve."""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import psutil
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from app.config import Settings
from app.db.embedded import postmaster_alive, postmaster_pid, start_embedded
from app.services.runtime.context import AppContext
from tests.harness import PROJECT_ROOT, free_port, fresh_env, memwarden_cli, stop_server, wait_ready

pytestmark = pytest.mark.slow

GIVE_UP_SECONDS = 3


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """One embedded cluster for the module (initdb once); every test starts its own serve on it."""
    path = tmp_path_factory.mktemp("self-healing") / ".memwarden"
    yield path
    pid = postmaster_pid(path / "pg")
    if pid and postmaster_alive(path / "pg"):
        os.kill(pid, signal.SIGINT)


def _serve(data_dir: Path, port: int) -> subprocess.Popen:
    env = fresh_env(data_dir, MEMWARDEN_DB_RESTART_GIVE_UP_SECONDS=str(GIVE_UP_SECONDS),
                    MEMWARDEN_SECRET_KEY="self-healing-test")
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)], cwd=PROJECT_ROOT,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(f"http://127.0.0.1:{port}", proc, timeout=90)
    return proc


@pytest.fixture(scope="module")
def token(data_dir: Path) -> str:
    """A read/write key, issued by the CLI (which starts the cluster, initdb included, and stops it)."""
    memwarden_cli(data_dir, "tenant", "create", "heal")
    return memwarden_cli(data_dir, "apikey", "create", "--tenant", "heal", "--scopes", "memory:read,memory:write"
                ).strip().splitlines()[-1]


def _remember(base: str, token: str, content: str, agent_id: str = "agent-a") -> httpx.Response:
    return httpx.post(f"{base}/v1/memories/remember", timeout=30,
                      headers={"Authorization": f"Bearer {token}", "Idempotency-Key": uuid.uuid4().hex},
                      json={"agent_id": agent_id, "type": "semantic", "content": content})


def _assert_ok_or_unavailable(response: httpx.Response) -> None:
    """During an outage every answer is a success or the contract's 503 — never a 500."""
    if response.status_code >= 300:
        assert response.status_code == 503, (response.status_code, response.text[:300])
        assert response.json()["error"]["code"] == "unavailable"


def _wait_for(check, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout}s")


def _kill_postmaster(data_dir: Path) -> int:
    pid = postmaster_pid(data_dir / "pg")
    os.kill(pid, signal.SIGKILL)
    return pid


def test_killed_postgres_comes_back_by_itself_and_liveness_fails_while_it_cannot(data_dir, token):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = _serve(data_dir, port)
    try:
        assert _remember(base, token, "before the crash").status_code == 201

        old = _kill_postmaster(data_dir)
        started = time.monotonic()
        answers = []
        while time.monotonic() - started < 10:
            ready = httpx.get(f"{base}/readyz", timeout=5)
            _assert_ok_or_unavailable(ready)
            write = _remember(base, token, f"during the gap {len(answers)}")
            _assert_ok_or_unavailable(write)
            auth = {"Authorization": f"Bearer {token}"}
            for read in (httpx.get(f"{base}/v1/memories", params={"agent_id": "agent-a"}, headers=auth),
                         httpx.post(f"{base}/v1/memories/recall", json={"agent_id": "agent-a", "query": "crash"},
                                    headers=auth, timeout=30),
                         httpx.get(f"{base}/v1/changes", headers=auth)):
                _assert_ok_or_unavailable(read)
            answers.append((ready.status_code, write.status_code))
            if ready.status_code == 200 and write.status_code == 201 and postmaster_pid(data_dir / "pg") != old:
                break
            assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200  # still recovering, not lost
            time.sleep(0.1)
        recovered = time.monotonic() - started
        print(f"postmaster killed: back in {recovered:.2f} s; {len(answers)} polls, "
              f"{sum(1 for status, _ in answers if status == 503)} answered 503 meanwhile, none 500")
        assert recovered < 10, answers
        assert any(status == 503 for status, _ in answers), "the outage was never observed"
        assert _remember(base, token, "after the restart").status_code == 201

        # A restart that cannot succeed: liveness fails once the give-up time has passed ...
        auto_conf = data_dir / "pg" / "postgresql.auto.conf"
        original = auto_conf.read_text()
        auto_conf.write_text(original + "\nnot_a_real_setting_at_all = 1\n")
        try:
            _kill_postmaster(data_dir)
            lost = _wait_for(lambda: httpx.get(f"{base}/healthz", timeout=5).status_code == 503,
                             timeout=GIVE_UP_SECONDS + 15)
            assert lost >= GIVE_UP_SECONDS - 1
            assert httpx.get(f"{base}/healthz").json()["error"]["code"] == "unavailable"
        finally:
            auto_conf.write_text(original)
        # ... and recovers once the database can start again.
        _wait_for(lambda: httpx.get(f"{base}/healthz", timeout=5).status_code == 200, timeout=30)
        _wait_for(lambda: httpx.get(f"{base}/readyz", timeout=5).status_code == 200, timeout=10)
        assert _remember(base, token, "after the second restart").status_code == 201
    finally:
        stop_server(server)
    # serve stopped its cluster on the way out (its supervisor did not restart it).
    _wait_for(lambda: not postmaster_alive(data_dir / "pg"), timeout=30)
    time.sleep(1.5)
    assert not postmaster_alive(data_dir / "pg")


def test_postgres_orphaned_by_kill_9_of_serve_is_reused_then_stopped(data_dir, token):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = _serve(data_dir, port)
    assert _remember(base, token, "written before serve was killed", "agent-orphan").status_code == 201
    orphan = postmaster_pid(data_dir / "pg")
    server.send_signal(signal.SIGKILL)
    server.wait(10)
    time.sleep(0.5)
    assert postmaster_alive(data_dir / "pg") and psutil.pid_exists(orphan)  # left behind, still serving

    server = _serve(data_dir, port)
    try:
        assert postmaster_pid(data_dir / "pg") == orphan  # reused, not a second cluster on the same files
        listed = httpx.get(f"{base}/v1/memories", params={"agent_id": "agent-orphan"},
                           headers={"Authorization": f"Bearer {token}"})
        assert [m["content"] for m in listed.json()["items"]] == ["written before serve was killed"]
    finally:
        stop_server(server)
    # The new serve is the last user: it stops the adopted cluster (a dead serve's handle is forgotten).
    _wait_for(lambda: not postmaster_alive(data_dir / "pg"), timeout=30)


def test_a_process_starting_while_the_database_restarts_waits_for_it(data_dir, token):
    """A `--workers` process starting during a restart waits for the database instead of dying
    (uvicorn would take the whole server down with a worker that fails to start)."""
    server = start_embedded(data_dir)
    settings = Settings(data_dir=data_dir, secret_key="k", database_url=server.app_url,
                        migration_database_url=server.admin_url)
    server.handle.stop()
    try:
        with pytest.raises(OperationalError):
            AppContext.open(settings)
        restart = threading.Timer(1.0, server.handle.start)
        restart.start()
        started = time.monotonic()
        ctx = AppContext.open(settings, wait_seconds=30)
        restart.join()
        assert time.monotonic() - started >= 0.9
        with ctx.db.reader() as conn:
            assert conn.scalar(text("SELECT count(*) FROM tenants WHERE name = 'heal'")) == 1
        ctx.close()
    finally:
        server.handle.cleanup()
