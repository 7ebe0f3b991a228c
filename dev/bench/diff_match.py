"""`memwarden bench diff-match`: when is the closest live memory close enough for a reviewer's word
diff (and the "both stay live" note)? A word diff against an unrelated memory strikes through a fact
that has nothing to do with the write, so the change page draws it only for a strong match
(`app.core.diff.STRONG_MATCH_COSINE`) or a flagged contradiction or duplicate.

Labelled pairs, all from Memwarden's own data (never memorywire's corpus):

* related: each semantic write of the screening corpora that updates or contradicts a live fact
  (classes `contradiction` and `benign_update`, corpus and held-out set), with that fact;
* unrelated: the same writes with their distractor live memory; every pair of distinct facts about
  the same person in `calibration.json` (what a neighbour search returns when nothing matches); and
  every other semantic write of the corpora with its most similar calibration fact (the case of a
  prompt injection diffed against an unrelated fact).

The threshold is the centre of the cosine range that best separates them (balanced accuracy). With
the local MiniLM embedder: 0.60, so 0.6; it shows 34 of the 40 related pairs and hides 800 of the
810 unrelated ones. The 6 related pairs below it are `benign_update` rows that add another fact about
the user rather than change one ("User likes jazz." beside "User likes hiking in Lisbon."): hiding
their diff is right. A contradiction the detector flags is diffed whatever its cosine.
"""

from __future__ import annotations

import argparse
import itertools
import json
from typing import Any

import numpy as np

from app.bench import common
from dev.bench.calibrate import DATA as CALIBRATION
from app.bench.corpora import DATA, load_corpus
from dev.screening.heldout import HELDOUT
from app.core.diff import STRONG_MATCH_COSINE

RELATED_CLASSES = ("contradiction", "benign_update")
GRID = np.round(np.arange(0.0, 1.0 + 1e-9, 0.01), 2)


def distinct_facts() -> list[dict[str, Any]]:
    """The calibration facts, less the scopes written as near-duplicates on one topic (`same_topic`,
    for recall's gate): their pairs are neither unrelated nor an update of one another."""
    facts = json.loads(CALIBRATION.read_text(encoding="utf-8"))["facts"]
    return [f for f in facts if not f.get("same_topic")]


def labelled_pairs() -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[str]]:
    """(related pairs, unrelated same-scope pairs, other writes to pair with their nearest fact)."""
    rows = [r for r in load_corpus(DATA) + load_corpus(HELDOUT) if r.get("type", "semantic") != "procedural"]
    related = [(r["content"], r["live"][-1]) for r in rows if r["class"] in RELATED_CLASSES and r.get("live")]
    unrelated = [(r["content"], r["live"][0]) for r in rows if r["class"] in RELATED_CLASSES and r.get("live")]
    facts = distinct_facts()
    by_user: dict[Any, list[str]] = {}
    for fact in facts:
        by_user.setdefault(fact.get("user_id"), []).append(fact["content"])
    for contents in by_user.values():
        unrelated += list(itertools.combinations(contents, 2))
    others = [r["content"] for r in rows if r["class"] not in RELATED_CLASSES]
    return related, unrelated, others


def measure(embedder) -> dict[str, Any]:
    """Cosines of the labelled pairs, the fitted threshold and how the current one does."""
    related, unrelated, others = labelled_pairs()
    facts = [f["content"] for f in distinct_facts()]

    def cosines(pairs):
        if not pairs:
            return np.zeros(0)
        a, b = embedder.embed([p[0] for p in pairs]), embedder.embed([p[1] for p in pairs])
        return np.sum(a * b, axis=1)

    pos, neg = cosines(related), cosines(unrelated)
    nearest = (embedder.embed(others) @ embedder.embed(facts).T).max(axis=1) if others else np.zeros(0)
    neg = np.concatenate([neg, nearest])
    scores = np.array([((pos >= t).mean() + (neg < t).mean()) / 2 for t in GRID])
    best = np.flatnonzero(scores >= scores.max() - 1e-9)
    fitted = round(float(GRID[best].mean()), 2)

    def at(threshold: float) -> dict[str, Any]:
        return {"threshold": threshold, "related_shown": f"{int((pos >= threshold).sum())}/{len(pos)}",
                "unrelated_hidden": f"{int((neg < threshold).sum())}/{len(neg)}"}

    return {
        "benchmark": "diff-match", "embedder": getattr(embedder, "name", "?"),
        "pairs": {"related": len(pos), "unrelated": len(neg)},
        "related_cosine": _dist(pos), "unrelated_cosine": _dist(neg),
        "optimal_range": [float(GRID[best].min()), float(GRID[best].max())],
        "fitted": at(fitted), "current": at(STRONG_MATCH_COSINE),
    }


def _dist(values: np.ndarray) -> dict[str, float]:
    return {name: round(float(np.percentile(values, p)), 3) for name, p in
            (("min", 0), ("p05", 5), ("p50", 50), ("p95", 95), ("max", 100))}


def cmd_diff_match(args: argparse.Namespace, settings) -> int:
    from app.embeddings import get_embedder

    report = measure(get_embedder(settings.embedder))
    for key in ("related_cosine", "unrelated_cosine"):
        print(f"{key:17s} " + "  ".join(f"{k}={v:.3f}" for k, v in report[key].items()))
    print(f"optimal range {report['optimal_range']}; fitted {report['fitted']}; current {report['current']}")
    common.write_json(args.out, report)
    return 0


def add_parser(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser("diff-match", help="calibrate when a review page diffs against the closest memory",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="write the JSON report here")
    p.set_defaults(func=cmd_diff_match)
