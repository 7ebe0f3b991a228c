"""Smoke test of `memwarden bench recall`'s core against the live server of the suite.

A tiny subset of the bundled labelled corpus goes through the same function the benchmark runs
(remember over HTTP, recall with k=5 per user, memorywire's scoring). Only the report's shape and
the subset's recall@5 are asserted: speed is measured by the benchmarks, never by tests.
"""

from __future__ import annotations

import json

from app.bench import recall as bench_recall
from app.bench.calibrate import DATA

# Two people whose labelled queries clear the calibrated gate by a wide margin (lift >= 0.39 vs
# 0.365), so a recalibration within its plateau does not turn this test red.
SUBSET_USERS = ["ruth", "mei"]


def test_recall_benchmark_core_on_a_subset(live_server, live_key):
    corpus = bench_recall.subset(bench_recall.load_corpus(DATA), SUBSET_USERS)
    assert len(corpus["facts"]) == 16 and any(not q["gold_ids"] for q in corpus["queries"])

    report = bench_recall.run_benchmark(live_server, live_key(), corpus, runs=1)

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
    json.dumps(report)  # the CLI writes it as JSON

    misses = [f for f in report["failures"] if f["kind"] == "partial_or_full_miss"]
    assert quality["recall_at_k"] == 1.0, misses
