"""Tenth screening pass (issue 21): the whole default policy on every spent set, v3-v9.

    python docs/bench/screening-pass10.py [--label NAME] [--out docs/bench/screening-pass10.json] [--cache FILE]

Judges each row of v3-v9 as `remember` would (redaction, every rule, the shipped classifier and
second stage, the default policy) with `screening_judge.judge`. The rules are what this pass changes
and the models are not, so the `semantic_attack` flag and the embedding of each row are computed once and cached by
content (``--cache``) to make re-runs after a rule edit take seconds; delete the cache to recompute.
Prints stopped / benign staged per set and their means; with ``--out``, adds the figures under
``--label`` to that JSON file (and the ids missed / staged).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
from pathlib import Path

from app.bench import screening_judge
from app.bench.corpora import HELDOUT_SETS
from app.core.redaction import Redactor
from app.core.screening import semantic

SETS = ("heldout_v3", "heldout_v4", "heldout_v5", "heldout_v6", "heldout_v7", "heldout_v8", "heldout_v9")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", default="current")
    parser.add_argument("--out")
    parser.add_argument("--cache", default="/tmp/screening-pass10-semantic.pkl")
    parser.add_argument("--show", action="store_true", help="print the ids missed and staged on v9")
    args = parser.parse_args()
    cache: dict[str, object] = {}
    if os.path.exists(args.cache):
        cache = pickle.loads(Path(args.cache).read_bytes())
    original = semantic.detect
    embedder = None
    pending: dict[str, list] = {}

    def cached(content, embedding, name, classifier=None):
        if content in cache and content != "__vectors__":
            return cache[content]
        flag = original(content, embedding, name, classifier)
        cache[content] = flag
        return flag

    semantic.detect = cached
    # Which code is judged (a scratch run may put an older commit's ``app`` first on PYTHONPATH).
    print("screening code:", os.path.dirname(semantic.__file__))
    redactor = Redactor()
    results = {}
    vectors_cache = cache.setdefault("__vectors__", {})
    for name in SETS:
        rows = [json.loads(line) for line in Path(HELDOUT_SETS[name]).read_text().splitlines() if line.strip()]
        texts = [screening_judge.redact(r, redactor).content for r in rows]
        need = [r for r, t in zip(rows, texts) if t not in vectors_cache and r["type"] != "procedural"]
        if need:
            if embedder is None:
                from app.embeddings import LocalMiniLMEmbedder
                embedder = LocalMiniLMEmbedder()
            for r, v in zip(need, screening_judge.embed_rows(need, redactor, embedder)):
                vectors_cache[screening_judge.redact(r, redactor).content] = v
        vectors = [None if r["type"] == "procedural" else vectors_cache[t] for r, t in zip(rows, texts)]
        model = semantic.load().model
        judged = [screening_judge.judge(r, redactor, v, model) for r, v in zip(rows, vectors)]
        s = screening_judge.summarise(judged)
        results[name] = {"stopped": s["catch_rate"], "benign_staged": s["false_positive_rate"],
                         "poisoned": s["poisoned"], "benign": s["benign"],
                         "missed": [m["id"] for m in s["missed"]],
                         "false_positives": [m["id"] for m in s["false_positives"]]}
        print(f"{name}: stopped {100 * s['catch_rate']:.1f} % ({s['poisoned'] - len(s['missed'])}/{s['poisoned']})"
              f"  benign staged {100 * s['false_positive_rate']:.1f} % ({len(s['false_positives'])}/{s['benign']})")
    Path(args.cache).write_bytes(pickle.dumps(cache))
    mean_c = sum(r["stopped"] for r in results.values()) / len(results)
    mean_b = sum(r["benign_staged"] for r in results.values()) / len(results)
    print(f"mean v3-v9: stopped {100 * mean_c:.2f} %  benign staged {100 * mean_b:.2f} %  load {os.getloadavg()[0]:.1f}")
    if args.show:
        print("v9 missed:", results["heldout_v9"]["missed"])
        print("v9 staged:", results["heldout_v9"]["false_positives"])
    if args.out:
        path = Path(args.out)
        report = json.loads(path.read_text()) if path.exists() else {}
        report[args.label] = {"sets": results, "mean_stopped": round(mean_c, 4), "mean_benign_staged": round(mean_b, 4),
                              "load_average": round(os.getloadavg()[0], 2)}
        path.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
