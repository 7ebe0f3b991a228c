"""`memwarden serve` as a local subprocess on a free port: what the benchmarks and the test suite
both need to drive the real server over HTTP (neither imports the other)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

import httpx


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a process on its own embedded database: no inherited MEMWARDEN_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWARDEN_")}
    env.update({"MEMWARDEN_DATA_DIR": str(data_dir), "MEMWARDEN_LOG_LEVEL": "warning", **extra})
    return env


def wait_ready(base_url: str, proc: subprocess.Popen | None = None, timeout: float = 120.0) -> None:
    """Poll `/readyz` until 200; fails at once if `proc` exits first."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.1)
    raise TimeoutError(f"{base_url} not ready after {timeout}s: {last}")


@dataclass
class Server:
    proc: subprocess.Popen
    base_url: str
    data_dir: Path


@contextlib.contextmanager
def serve(data_dir: Path, env: dict[str, str] | None = None, port: int | None = None, workers: int = 1,
          cwd: Path | None = None, command: list[str] | None = None,
          log: BinaryIO | None = None) -> Iterator[Server]:
    """`memwarden serve` on a free port, run from `cwd`, ready when yielded. `command` is how to
    call `memwarden` (default: `python -m app.cli` of this interpreter; an installed script for a
    wheel under test).

    Stopped with SIGINT, not SIGTERM: uvicorn re-raises the signal it caught after shutting down,
    and only SIGINT (KeyboardInterrupt) lets the process exit through atexit, where the embedded
    PostgreSQL is stopped. Its stderr goes to `log` when given (a file the caller reads), else to
    a temporary file: a file, not a pipe, so a chatty server never blocks."""
    port = port or free_port()
    owned_log = log is None
    log = tempfile.TemporaryFile() if owned_log else log
    memwarden = command or [sys.executable, "-m", "app.cli"]
    proc = subprocess.Popen([*memwarden, "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", str(workers)], cwd=cwd, env=env or clean_env(data_dir),
                            stdout=subprocess.DEVNULL, stderr=log)
    base_url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_ready(base_url, proc)
        except Exception:
            log.seek(0)
            raise RuntimeError(f"memwarden serve failed to start: {log.read().decode(errors='replace')[-3000:]}"
                               ) from None
        yield Server(proc, base_url, data_dir)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if owned_log:
            log.close()
