"""Shared benchmark plumbing: a fresh `memwarden serve` subprocess, provisioning, percentiles, output.

Benchmarks measure the real stack: the server is the `memwarden serve` console entry point run as
its own OS process on a free port, and every timed request goes over HTTP from this process
(httpx keep-alive client), so latencies include JSON, auth, the thread pool and the database.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import httpx

from app.bench.driver_common import latency_summary, percentile  # noqa: F401 (shared with the drivers)
from app.local_server import Server, clean_env, free_port, serve, wait_ready  # noqa: F401 (benches use them here)

BENCH_ACTOR = {"kind": "cli", "id": "memwarden-bench"}


# --- statistics --------------------------------------------------------------------------------

def machine() -> dict[str, Any]:
    """Where the numbers come from, including the load average (other work on the box skews them)."""
    return {"python": platform.python_version(), "platform": f"{platform.system()} {platform.release()} "
            f"{platform.machine()}", "cpus": os.cpu_count(),
            "loadavg_1_5_15": [round(x, 2) for x in os.getloadavg()]}


# --- processes ---------------------------------------------------------------------------------

def stop_cluster(data_dir: Path, timeout: float = 30.0) -> None:
    """Stop the embedded PostgreSQL of `data_dir` if it is still running (fast shutdown)."""
    pidfile = Path(data_dir) / "pg" / "postmaster.pid"
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


@contextlib.contextmanager
def scratch_dir(keep: str | None = None) -> Iterator[Path]:
    """A fresh data dir (removed afterwards unless `keep` names one to use and keep)."""
    if keep:
        path = Path(keep).expanduser().resolve()
        if path.exists() and any(path.iterdir()):
            raise SystemExit(f"--data-dir {path} is not empty; benchmarks need a fresh database")
        path.mkdir(parents=True, exist_ok=True)
        try:
            yield path / ".memwarden"
        finally:
            stop_cluster(path / ".memwarden")
        return
    root = Path(tempfile.mkdtemp(prefix="memwarden-bench-"))
    try:
        yield root / ".memwarden"
    finally:
        stop_cluster(root / ".memwarden")
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def in_process_context(data_dir: Path, *, pool_size: int, **settings: Any) -> Iterator[tuple[Any, Any]]:
    """(AppContext, DatabaseUrls) on a freshly migrated database in `data_dir`, for benchmarks that
    call services in this process; `settings` are extra `Settings` fields. Afterwards the context is
    closed and the embedded PostgreSQL this process started is stopped, before the data dir goes."""
    from app.config import Settings
    from app.db.database import make_database, make_engine, migrate, resolve_urls
    from app.services.runtime.context import AppContext

    urls = resolve_urls(Settings(data_dir=data_dir))  # this process keeps the embedded server up
    migrate(urls)
    bench_settings = Settings(data_dir=data_dir, database_url=urls.app_url, migration_database_url=urls.admin_url,
                              **settings)
    ctx = AppContext(bench_settings, make_database(make_engine(urls.app_url, pool_size=pool_size)))
    try:
        yield ctx, urls
    finally:
        ctx.close()
        if urls.embedded is not None:
            urls.embedded.handle.cleanup()


def cli(data_dir: Path, *args: str) -> str:
    """Run `memwarden ARGS` beside the server (same data dir); stdout, raising on failure."""
    done = subprocess.run([sys.executable, "-m", "app.cli", *args], env=clean_env(data_dir),
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"memwarden {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def provision_via_cli(data_dir: Path, tenant: str = "bench") -> str:
    """Create a tenant and a read/write key the way an operator does; returns the key."""
    cli(data_dir, "tenant", "create", tenant)
    out = cli(data_dir, "apikey", "create", "--tenant", tenant, "--scopes", "memory:read,memory:write")
    return out.strip().splitlines()[-1].strip()


def client(base_url: str, token: str, timeout: float = 60.0) -> httpx.Client:
    """One keep-alive connection (httpx reuses it across requests)."""
    return httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout,
                        limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))


def timed_post(http: httpx.Client, path: str, body: dict[str, Any], expect: Sequence[int] = (200, 201)
               ) -> tuple[float, dict[str, Any]]:
    """POST and return (wall ms, JSON body); raises on an unexpected status."""
    started = time.perf_counter()
    response = http.post(path, json=body)
    elapsed = (time.perf_counter() - started) * 1000.0
    if response.status_code not in expect:
        raise RuntimeError(f"POST {path} -> {response.status_code}: {response.text[:500]}")
    return elapsed, response.json()


def quiet_http_logs() -> None:
    """The CLI logs at INFO by default; one line per benchmark request would drown the report."""
    import logging

    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


# --- output ------------------------------------------------------------------------------------

def write_json(path: str | Path | None, report: dict[str, Any]) -> None:
    if not path:
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """A small GitHub-flavoured Markdown table (also readable in a terminal)."""
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *[line(r) for r in cells[1:]]])
