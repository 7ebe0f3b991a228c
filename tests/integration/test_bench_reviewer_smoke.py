"""Smoke test of `memwarden bench reviewer`, run as the CLI on a short stream: it starts its own
`memwarden serve`, replays writes with a ground-truth reviewer, accepts the learned suggestions
between the halves and reports. Asserted: the report's shape, that learned rules cut the human
decisions, and that no poisoned write reached memory without a human (exit 0)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.harness import PROJECT_ROOT, fresh_env

pytestmark = pytest.mark.slow


def test_reviewer_benchmark_on_a_short_stream(tmp_path):
    done = subprocess.run([sys.executable, "-m", "app.cli", "bench", "reviewer", "--writes", "120",
                           "--min-decisions", "5", "--out", str(tmp_path / "reviewer.json")],
                          cwd=PROJECT_ROOT, env=fresh_env(tmp_path / "unused"), capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "reviewer.json").read_text())
    before, after = report["phase_1_no_learned_rules"], report["phase_2_with_learned_rules"]
    assert report["benchmark"] == "reviewer" and report["writes"] == 120 and "ui" not in report
    assert before["writes"] == after["writes"] == 60
    assert before["human_decisions"] == 60 and before["auto_approved"] == 0
    assert report["learned_rules_accepted"] and after["human_decisions"] < before["human_decisions"]
    assert after["poisoned_staged"] == after["poisoned"] and report["poisoned_without_human"] == 0
    assert all(r["rule_id"].startswith("learned-") for r in report["learned_rules_accepted"])
