"""`memwarden serve` on granian (`MEMWARDEN_SERVER=granian`): the same app answers writes and reads
through granian's worker, and stopping serve stops the worker and the embedded PostgreSQL; an
unknown server name is refused before anything starts."""

import subprocess
import sys

import httpx
import psutil
import pytest

from tests.harness import PROJECT_ROOT, fresh_env, fresh_server, memwarden_cli

pytest.importorskip("granian")
pytestmark = pytest.mark.slow


def test_granian_serves_writes_and_reads_and_stops_with_its_database(tmp_path):
    data_dir = tmp_path / ".memwarden"
    with fresh_server(data_dir, env=fresh_env(data_dir, MEMWARDEN_SERVER="granian")) as (server, base_url):
        tree = [server, *psutil.Process(server.pid).children(recursive=True)]
        workers = [p for p in psutil.Process(server.pid).children() if "postgres" not in p.name()]
        assert workers, "granian serves from a worker process"
        memwarden_cli(data_dir, "tenant", "create", "granian")
        token = memwarden_cli(data_dir, "apikey", "create", "--tenant", "granian", "--scopes",
                              "memory:read,memory:write").strip().splitlines()[-1]
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base_url, headers=auth, timeout=60) as http:
            wrote = http.post("/v1/memories/remember",
                              json={"agent_id": "agent-g", "type": "semantic", "content": "Granian serves this fact."})
            assert wrote.status_code == 201, wrote.text
            found = http.post("/v1/memories/recall", json={"agent_id": "agent-g", "query": "which fact is served?"})
            assert found.status_code == 200, found.text
            assert wrote.json()["id"] in [m["id"] for m in found.json()["hits"]]
            assert http.post("/v1/memories/remember", content=b"{not json",
                             headers={"Content-Type": "application/json"}).status_code in (400, 422)
    gone = psutil.wait_procs([psutil.Process(p.pid) for p in tree if psutil.pid_exists(p.pid)], timeout=30)[1]
    assert not gone, [p.pid for p in gone]


def test_an_unknown_server_is_refused_before_anything_starts(tmp_path):
    data_dir = tmp_path / ".memwarden"
    done = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--port", "1"], cwd=PROJECT_ROOT,
                          env=fresh_env(data_dir, MEMWARDEN_SERVER="hypercorn"), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "MEMWARDEN_SERVER" in done.stderr and "'hypercorn'" in done.stderr
    assert not (data_dir / "pg").exists()
