"""Smoke test of `memwarden bench replicas`, run as the CLI: it makes its two standbys, routes
recalls to 0, 1 and 2 of them without an error, and reports where the rows were read. The
throughput itself is the benchmark's to report (docs/benchmarks/), never a test's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.harness import PROJECT_ROOT, fresh_env

pytestmark = pytest.mark.slow


def test_bench_replicas_runs_every_configuration(tmp_path):
    out = tmp_path / "replicas.json"
    done = subprocess.run([sys.executable, "-m", "app.cli", "bench", "replicas", "--memories", "20",
                           "--threads", "2", "--seconds", "0.5", "--out", str(out)],
                          cwd=PROJECT_ROOT, env=fresh_env(tmp_path / ".memwarden"), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert set(report["summary"]) == {"0_replicas", "1_replicas", "2_replicas"}
    for name, rounds in report["rounds"].items():
        assert len(rounds) == 2, name  # alternated 0,1,2,2,1,0
        for result in rounds:
            assert result["errors"] == 0 and result["n"] > 0, (name, result)
    assert report["machine"]["cpus"] and len(report["machine"]["loadavg_1_5_15"]) == 3
