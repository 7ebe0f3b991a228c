"""Smoke test of `memwarden bench recall`, run as the CLI on a tiny subset of the bundled labelled
corpus: it starts its own `memwarden serve`, remembers over HTTP, recalls with k=5 per user and
scores the way memorywire does. Only the report's shape and the subset's recall@5 are asserted:
speed is measured by the benchmarks, never by tests.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.harness import PROJECT_ROOT, fresh_env

pytestmark = pytest.mark.slow

CALIBRATION = PROJECT_ROOT / "app" / "bench" / "data" / "calibration.json"
# Two people whose labelled queries clear the calibrated gate by a wide margin (by at least 0.06
# under the v3 gate), so a recalibration within its plateau does not turn this test red.
SUBSET_USERS = ["ruth", "mei"]


def test_recall_benchmark_on_a_subset(tmp_path):
    corpus = json.loads(CALIBRATION.read_text(encoding="utf-8"))
    corpus["facts"] = [f for f in corpus["facts"] if f["user_id"] in SUBSET_USERS]
    corpus["queries"] = [q for q in corpus["queries"] if q.get("user_id") in SUBSET_USERS]
    assert len(corpus["facts"]) == 16 and any(not q["gold_ids"] for q in corpus["queries"])
    (tmp_path / "subset.json").write_text(json.dumps(corpus), encoding="utf-8")

    done = subprocess.run([sys.executable, "-m", "app.cli", "bench", "recall", "--corpus", str(tmp_path / "subset.json"),
                           "--runs", "1", "--out", str(tmp_path / "recall.json")],
                          cwd=PROJECT_ROOT, env=fresh_env(tmp_path / "unused"), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "recall.json").read_text())

    assert report["benchmark"] == "recall" and report["k"] == 5 and report["runs"] == 1
    labelled = sum(1 for q in corpus["queries"] if q["gold_ids"])
    probes = len(corpus["queries"]) - labelled
    assert report["corpus"]["facts"] == 16
    assert report["corpus"]["labelled"] == labelled and report["corpus"]["no_match_probes"] == probes
    quality = report["quality"]
    assert set(quality) == {"recall_at_k", "precision_at_k", "labelled_queries", "no_match_empty", "no_match_total"}
    assert 0 <= quality["no_match_empty"] <= probes and 0 < quality["precision_at_k"] <= 1
    for name in ("remember", "recall", "recall_server_side"):
        assert set(report["latency"][name]) == {"n", "p50_ms", "p95_ms", "p99_ms", "mean_ms"}
    assert report["latency"]["remember"]["n"] == 16
    assert report["latency"]["recall"]["n"] == len(corpus["queries"])
    assert set(report["goals"]) == {"recall_at_k_1.0", "no_match_empty_ge_6", "remember_p50_le_15ms",
                                    "recall_p50_le_15ms"}
    assert "memorywire_published" not in report  # compared side by side only (bench compare)

    misses = [f for f in report["failures"] if f["kind"] == "partial_or_full_miss"]
    assert quality["recall_at_k"] == 1.0, misses
