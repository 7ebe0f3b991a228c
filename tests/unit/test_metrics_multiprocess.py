"""Worker metric files: a worker that died without a word (kill -9) keeps its counts but not its
live gauges, and serve's directory is fresh at every start."""

import subprocess
import sys

from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from app.observability import metrics
from tests.harness import PROJECT_ROOT

WORKER = """
import os
from app.observability import metrics
metrics.DB_POOL_IN_USE.inc(3)
metrics.AUDIT_APPENDS.inc(5)
os._exit(0)  # no shutdown hook: as if killed
"""


def _samples(directory) -> dict[str, float]:
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))
    return {s.name: s.value for family in registry.collect() for s in family.samples if not s.labels}


def test_a_dead_workers_live_gauges_are_dropped_and_its_counts_kept(tmp_path, monkeypatch):
    directory = metrics.prepare_multiprocess_dir(tmp_path)
    subprocess.run([sys.executable, "-c", WORKER], cwd=PROJECT_ROOT, check=True, timeout=60,
                   env={"PROMETHEUS_MULTIPROC_DIR": directory, "PATH": "/usr/bin:/bin"})
    assert _samples(directory)["memwarden_db_pool_connections_in_use"] == 3
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", directory)
    metrics.forget_dead_workers()
    after = _samples(directory)
    assert after.get("memwarden_db_pool_connections_in_use", 0) == 0
    assert after["memwarden_audit_appends_total"] == 5


def test_serve_gets_a_fresh_directory_and_stale_ones_are_removed(tmp_path):
    stale = tmp_path / "metrics-999999999"
    stale.mkdir()
    (stale / "counter_1.db").write_bytes(b"old")
    fresh = metrics.prepare_multiprocess_dir(tmp_path)
    assert not stale.exists()
    assert fresh.endswith(f"metrics-{__import__('os').getpid()}") and not list((tmp_path / fresh).iterdir())
