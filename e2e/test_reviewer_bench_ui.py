"""The reviewer benchmark's browser flows run end to end in Chromium: a scripted
reviewer works 3 seeded changes per flow (single page, keyboard only, bulk) and every decision lands
as the ground truth says. The suite runs the benchmark as a command, never importing `app.bench`."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def test_single_keyboard_and_bulk_flows_decide_every_change_as_the_ground_truth_says():
    done = subprocess.run([sys.executable, "-m", "app.bench.reviewer_ui", "--n", "3", "--widths", "1366,390"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["chromium"].split(".")[0].isdigit() and len(report["load_avg"]) == 3
    for name in ("single", "keyboard", "bulk"):
        flow = report[name]
        assert flow["mismatches"] == [], name
        # The seeded mix: a flagged contradiction (medium), a legitimate high-risk note, an injection.
        assert flow["risk_levels"] == {"medium": 1, "high": 2}, name
        assert (flow["decisions"], flow["approved"], flow["rejected"]) == (3, 2, 1), name
        assert 0 < flow["seconds_per_decision"]["median"] <= flow["seconds_per_decision"]["p95"] < 60, name
        # At least the decision itself, and the rejection's typed reason ("poisoned", 8 keys).
        assert flow["inputs_per_decision"] >= 1 + 8 / 3, name
    assert report["keyboard"]["clicks_per_decision"] == 0
    # Keyboard: open (j, Enter); a, Space, a on the medium contradiction and on the high-risk note (both
    # confirmed); r, reason, Tab, Enter; n after each.
    assert report["keyboard"]["keys_per_decision"] == round((2 + 3 + 3 + (1 + 8 + 2) + 3) / 3, 2)
    # Bulk approves both in one batch and rejects the third: fewer clicks than deciding one by one.
    assert report["bulk"]["clicks_per_decision"] < report["single"]["clicks_per_decision"]
    # At a desktop's and a phone's width every flow decides as told, and no button it needs on a change
    # page (Approve, Reject, the risk box, Next) was outside the first screen.
    assert set(report["widths"]) == {"1366", "390"}
    for width, at in report["widths"].items():
        for name in ("single", "keyboard", "bulk"):
            assert at[name]["mismatches"] == [], (width, name)
            assert at[name]["decisions"] == 3, (width, name)
            # Approve and Reject share a row under the risk box at both widths: nothing needs a scroll.
            assert at[name]["buttons_needing_scroll"] == 0, (width, name, at[name]["scrolled"])
            assert at[name]["seconds_for_20"] > 0, (width, name)
    assert report["buttons_needing_scroll"] == 0
    assert len(report["goals"]) == 4  # keyboard and mouse, at each width
