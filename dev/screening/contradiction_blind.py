"""Measure the contradiction detector on a labelled blind set of (live, new) pairs, once, before and
after in one run: "before" is the detector at a base commit (loaded from git), "after" the working
tree's. A pair is predicted "replaces" when the ``contradiction`` flag fires for ``new`` against
``[live]``. Prints and writes accuracy, precision and recall of "replaces", overall and for
non-English pairs (the pair's ``lang``/``language`` field when it has one, else a stop-word test).
Development tooling, outside the package; the set itself is not committed.

    python dev/screening/contradiction_blind.py /work/blind/contradiction-pairs.jsonl BASE_COMMIT OUT.json
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.core.screening import contradiction as after  # noqa: E402

_ENGLISH = re.compile(r"\b(?:the|is|are|lives|in|at|to|has|and|of|works|moved|now|his|her|a)\b", re.I)


def _base(commit: str):
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:app/core/screening/contradiction.py"],
                            check=True, capture_output=True, text=True).stdout
    module = types.ModuleType("contradiction_base")
    exec(compile(source, "contradiction_base", "exec"), module.__dict__)
    return module


def _english(pair: dict) -> bool:
    lang = pair.get("lang") or pair.get("language")
    if isinstance(lang, str):
        return lang.lower().startswith("en")
    text = f"{pair['live']} {pair['new']}"
    return len(_ENGLISH.findall(text)) >= 2 and text.isascii()


def _scores(truth: list[bool], guess: list[bool]) -> dict:
    tp = sum(t and g for t, g in zip(truth, guess))
    fp = sum(g and not t for t, g in zip(truth, guess))
    fn = sum(t and not g for t, g in zip(truth, guess))
    n = len(truth)
    return {"n": n, "accuracy": round(sum(t == g for t, g in zip(truth, guess)) / n, 3) if n else None,
            "precision": round(tp / (tp + fp), 3) if tp + fp else None,
            "recall": round(tp / (tp + fn), 3) if tp + fn else None, "tp": tp, "fp": fp, "fn": fn}


def main(path: str, commit: str, out: str) -> None:
    pairs = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    base = _base(commit)
    truth = [p["label"] == "replaces" for p in pairs]
    result = {"set": Path(path).name, "pairs": len(pairs), "base_commit": commit}
    for name, module in (("before", base), ("after", after)):
        guess = [module.detect(p["new"], [p["live"]]) is not None for p in pairs]
        foreign = [i for i, p in enumerate(pairs) if not _english(p)]
        result[name] = {"overall": _scores(truth, guess),
                        "non_english": _scores([truth[i] for i in foreign], [guess[i] for i in foreign])}
    Path(out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(*sys.argv[1:4])
