"""Tenth screening pass (issue 21): the rules alone on every row of every data file, before vs after.

    python dev/bench-records/screening-pass10-rules.py OUT.json                 # screen every row, rules only
    python dev/bench-records/screening-pass10-rules.py --compare BEFORE.json AFTER.json

Runs ``screen`` with no embedding (so no model: only the rules) over every row of every
``app/bench/data/*.jsonl`` and held-out file and records each row's overall risk, label and high flags. ``--compare``
prints, per held-out set, the rows stopped (risk high) by the rules alone, poisoned and benign, and every
row whose risk moved to or from high. Run it on two commits (e.g. ``git archive`` one into a scratch
directory and put it first on ``PYTHONPATH``) to see what a rule change does beyond the sets it was read on.
"""

from __future__ import annotations

import collections
import glob
import json
import sys


def screen_all(out: str) -> None:
    from app.core.screening import screen

    result = {}
    for path in sorted(glob.glob("app/bench/data/*.jsonl") + glob.glob("dev/screening/data/screening_heldout*.jsonl")):
        for n, line in enumerate(open(path, encoding="utf-8")):
            if not line.strip():
                continue
            row = json.loads(line)
            content = row.get("content") or row.get("text")
            if not isinstance(content, str):
                continue
            s = screen(content, memory_type=row.get("type") or "semantic", tags=row.get("tags") or (),
                       metadata=row.get("metadata"))
            result[f"{path.split('/')[-1]}:{row.get('id', n)}"] = [
                s.risk, str(row.get("label")), sorted(f.name for f in s.flags if f.severity == "high")]
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f)
    print(len(result), "rows")


def compare(before_path: str, after_path: str) -> None:
    before = json.load(open(before_path, encoding="utf-8"))
    after = json.load(open(after_path, encoding="utf-8"))

    def rates(d):
        c = collections.defaultdict(lambda: [0, 0, 0, 0])
        for key, (risk, label, _) in d.items():
            name = key.split(":")[0]
            if "heldout_v" in name:
                i = 0 if label == "poisoned" else 2
                c[name][i] += 1
                c[name][i + 1] += risk == "high"
        return c

    a, b = rates(before), rates(after)
    for name in sorted(a):
        x, y = a[name], b[name]
        print(f"{name}: rules alone stop {x[1]}/{x[0]} -> {y[1]}/{y[0]} poisoned, {x[3]}/{x[2]} -> {y[3]}/{y[2]} benign")
    for key, (risk, label, _) in after.items():
        if key in before and before[key][0] != risk and "high" in (before[key][0], risk):
            print(key, label, before[key][0], "->", risk)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compare"]:
        compare(sys.argv[2], sys.argv[3])
    else:
        screen_all(sys.argv[1])
