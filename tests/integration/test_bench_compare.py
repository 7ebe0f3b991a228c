"""`memwarden bench compare`, run as the CLI with a stand-in for memorywire's interpreter (it prints
fixed timings, so the arithmetic can be checked): ratios are Memwarden ÷ memorywire per pair and
percentile, and the order alternates between pairs. Memwarden's side is the real recall pass over
HTTP against the `memwarden serve` the command starts.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.harness import PROJECT_ROOT, fresh_env

pytestmark = pytest.mark.slow

CALIBRATION = PROJECT_ROOT / "app" / "bench" / "data" / "calibration.json"
STAND_IN = {"remember_ms": [10.0] * 18 + [40.0, 40.0], "recall_ms": [20.0] * 20,
            "quality": {"recall_at_k": 1.0, "no_match_empty": 0, "no_match_total": 0},
            "versions": {"memorywire": "stand-in"}}


def test_ratio_is_ours_over_theirs_and_order_alternates(tmp_path):
    corpus = json.loads(CALIBRATION.read_text(encoding="utf-8"))
    corpus["facts"] = [f for f in corpus["facts"] if f["user_id"] == "ruth"]
    corpus["queries"] = [q for q in corpus["queries"] if q.get("user_id") == "ruth"]
    (tmp_path / "corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    stand_in = tmp_path / "memorywire-python"  # called as `<it> memorywire_driver.py CORPUS --k K`
    stand_in.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(STAND_IN))})\n")
    stand_in.chmod(0o755)

    done = subprocess.run([sys.executable, "-m", "app.cli", "bench", "compare", "--memorywire-python", str(stand_in),
                           "--corpus", str(tmp_path / "corpus.json"), "--pairs", "2", "--out",
                           str(tmp_path / "compare.json")],
                          cwd=PROJECT_ROOT, env=fresh_env(tmp_path / "unused"), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "compare.json").read_text())

    assert [p["order"] for p in report["pairs"]] == ["memorywire first", "memwarden first"]
    assert report["memorywire"] == {"memorywire": "stand-in"}
    for pair in report["pairs"]:
        theirs = pair["memorywire"]
        assert theirs["remember"]["p50_ms"] == 10.0 and theirs["remember"]["p95_ms"] == 40.0
        assert theirs["recall"]["p50_ms"] == 20.0 and theirs["recall"]["p95_ms"] == 20.0
        assert pair["memwarden"]["remember"]["n"] == len(corpus["facts"])
        for op in ("remember", "recall"):
            for p in ("p50", "p95"):
                ours = pair["memwarden"][op][f"{p}_ms"]
                assert pair["ratio_memwarden_over_memorywire"][op][p] == round(ours / theirs[op][f"{p}_ms"], 3)
    assert report["worst_ratio"]["recall"]["p50"] == max(p["ratio_memwarden_over_memorywire"]["recall"]["p50"]
                                                         for p in report["pairs"])
