"""The default path, for real: `memwarden serve` on a fresh data dir starts the embedded
PostgreSQL, CLI commands run beside it, and a restart comes back fast."""

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.harness import PROJECT_ROOT, free_port, stop_server, wait_ready

pytestmark = pytest.mark.slow


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWARDEN_")}
    env.update({"MEMWARDEN_DATA_DIR": str(data_dir), "MEMWARDEN_LOG_LEVEL": "warning"})
    return env


def _cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=PROJECT_ROOT, env=_env(data_dir),
                          capture_output=True, text=True, timeout=120)


def _serve(data_dir: Path, port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)], cwd=PROJECT_ROOT,
                            env=_env(data_dir), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_serve_on_embedded_database_with_cli_alongside_and_restart(tmp_path):
    data_dir = tmp_path / "fresh" / ".memwarden"
    data_dir.parent.mkdir()
    port = free_port()
    base = f"http://127.0.0.1:{port}"

    started = time.monotonic()
    server = _serve(data_dir, port)
    try:
        wait_ready(base, server, timeout=60)
        first_start = time.monotonic() - started
        for name in ("secret_key", "audit-signing-key.pem"):
            assert (data_dir / name).stat().st_mode & 0o777 == 0o600

        # A second memwarden process on the same data dir while serve is up.
        created = _cli(data_dir, "tenant", "create", "acme")
        assert created.returncode == 0, created.stderr
        issued = _cli(data_dir, "apikey", "create", "--tenant", "acme", "--scopes", "memory:read")
        assert issued.returncode == 0, issued.stderr
        token = issued.stdout.strip().splitlines()[-1]
        assert token.startswith("mw_key_")
        who = httpx.get(f"{base}/v1/whoami", headers={"Authorization": f"Bearer {token}"})
        assert who.status_code == 200 and who.json()["scopes"] == ["memory:read"]
        # The CLI exiting must not have stopped the shared cluster.
        assert httpx.get(f"{base}/readyz").status_code == 200
        listed = _cli(data_dir, "apikey", "list", "--tenant", "acme")
        assert "active" in listed.stdout
    finally:
        stop_server(server)

    started = time.monotonic()
    server = _serve(data_dir, port)
    try:
        # A restart reuses the cluster on disk (no initdb); the bound is a hang guard, not a speed
        # claim: timings belong to benchmarks, and a loaded machine can take longer than an idle one.
        wait_ready(base, server, timeout=60)
        restart = time.monotonic() - started
        # The tenant survived the restart (same cluster on disk).
        assert "acme" in _cli(data_dir, "tenant", "list").stdout
    finally:
        stop_server(server)
    print(f"first start {first_start:.1f}s, restart {restart:.1f}s")


def test_serve_demo_seeds_a_tenant_a_sign_in_and_a_key(tmp_path):
    data_dir = tmp_path / "demo" / ".memwarden"
    data_dir.parent.mkdir()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--demo", "--port", str(port)],
                              cwd=PROJECT_ROOT, env=_env(data_dir), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    try:
        lines = []
        for line in server.stdout:
            lines.append(line.strip())
            if line.startswith("Memwarden serving on"):
                break
        wait_ready(base, server, timeout=60)
        password = next(line for line in lines if "demo-admin /" in line).rsplit("/ ", 1)[1]
        token = next(line for line in lines if line.startswith("mw_key_"))
        changes = httpx.get(f"{base}/v1/changes", headers={"Authorization": f"Bearer {token}"}).json()
        assert changes["total"] == 5
        redacted = [c for c in changes["items"] if c["redactions"]]
        assert len(redacted) == 1 and redacted[0]["redactions"][0]["label"] == "aws_access_key"
        risky = [c for c in changes["items"] if c["risk_level"] == "high"]
        assert "prompt_injection" in [f["name"] for f in risky[0]["risk_flags"]] and len(risky) == 1
        with httpx.Client(base_url=base) as browser:
            page = browser.get("/login")
            csrf = page.text.split('name="csrf_token" value="')[1].split('"')[0]
            signed = browser.post("/login", data={"username": "demo-admin", "password": password,
                                                  "csrf_token": csrf, "next": "/review"})
            assert signed.status_code == 303
            assert browser.get("/review").text.count('data-testid="change-row"') == 5
        # The demo key belongs to demo-admin: its approval is recorded as that person's.
        approved = httpx.post(f"{base}/v1/changes/{changes['items'][0]['id']}/approve", json={"confirm_risk": True},
                              headers={"Authorization": f"Bearer {token}"})
        assert approved.status_code == 200, approved.text
        assert approved.json()["approvals"][0]["name"] == "demo-admin"
    finally:
        stop_server(server)
