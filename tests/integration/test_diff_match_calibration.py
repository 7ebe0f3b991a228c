"""`python -m dev.bench diff-match`, run as a command: the strong-match threshold of review diffs
(`app.core.diff.STRONG_MATCH_COSINE`) stays inside the range that best separates related from
unrelated memories on Memwarden's own data."""

from __future__ import annotations

import json
import subprocess
import sys

from app.core.diff import STRONG_MATCH_COSINE
from tests.harness import PROJECT_ROOT, fresh_env


def test_the_threshold_separates_related_from_unrelated_memories(tmp_path):
    done = subprocess.run([sys.executable, "-m", "dev.bench", "diff-match", "--out", str(tmp_path / "r.json")],
                          cwd=PROJECT_ROOT, env=fresh_env(tmp_path / "unused"), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    low, high = report["optimal_range"]
    assert low <= STRONG_MATCH_COSINE <= high
    assert report["current"]["threshold"] == STRONG_MATCH_COSINE
    shown, related = map(int, report["current"]["related_shown"].split("/"))
    hidden, unrelated = map(int, report["current"]["unrelated_hidden"].split("/"))
    assert related >= 40 and unrelated >= 700
    assert hidden / unrelated >= 0.98 and shown / related >= 0.8
