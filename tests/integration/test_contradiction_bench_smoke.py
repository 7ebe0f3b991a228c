"""`memwarden bench contradiction` runs as a command and reports both readers' CPU per write, A/B."""

import json
import subprocess
import sys


def test_the_contradiction_bench_reports_both_readers(tmp_path):
    out = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "app.cli", "bench", "contradiction", "--n", "40", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["samples"] == 40 and report["live_per_write"] == 5
    cpu = report["cpu_ms_per_write"]
    for reader in ("frames", "frames_and_meaning"):
        assert 0 < cpu[reader]["p50"] <= cpu[reader]["p95"], reader
    assert cpu["meaning_adds_p50"] == round(cpu["frames_and_meaning"]["p50"] - cpu["frames"]["p50"], 3)
    # The meaning reader reads the moves, the new employer, number and car the frames reader misses.
    assert report["flagged"]["meaning"] > report["flagged"]["frames"]
