"""Smoke test of `memwarden bench blast`, run as the CLI on a tiny tenant: it seeds memories,
lineage and reads, then computes the incident report with the product code. Only the report's
shape and its internal consistency are asserted: speed is measured by the benchmark, never by tests."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.harness import PROJECT_ROOT, fresh_env

pytestmark = pytest.mark.slow


def test_blast_benchmark_on_a_small_tenant(tmp_path):
    out = tmp_path / "blast.json"
    done = subprocess.run([sys.executable, "-m", "app.cli", "bench", "blast", "--memories", "2000", "--poisoned", "50",
                           "--edges", "1500", "--span", "100", "--reads", "2000", "--runs", "1", "--out", str(out)],
                          cwd=PROJECT_ROOT, env=fresh_env(tmp_path / "unused"), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["benchmark"] == "blast" and report["config"]["memories"] == 2000
    counts = report["report"]["counts"]
    assert counts["recovered"] == 50 and counts["derived"] > 0 and counts["reads"] > 0
    assert report["report"]["json_bytes"] > 0 and report["report"]["max_depth_reached"] >= 1
    assert report["recover_dry_run"]["derived"] == counts["derived"]
    assert report["recover_dry_run"]["would_quarantine"] == 50 + counts["derived"]
