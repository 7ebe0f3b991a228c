"""The whole default policy on hand-written held-out sets, for a screening pass's protocol table
(`screening-pass8.py`, `screening-pass9.py`, `screening-pass10.py` each name their sets and call `main`).

Judges each row as `remember` would (redaction, every rule, the shipped classifier and second stage,
the default policy) with `screening_judge.judge`. The rules are what a pass changes and the models
are not, so the `semantic_attack` flag and the embedding of each row are computed once and cached by
content (``--cache``) to make re-runs after a rule edit take seconds; delete the cache after a model
changes. Prints stopped / benign staged per set and their means; with ``--out``, adds the figures
under ``--label`` to that JSON file (and the ids missed / staged).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
from pathlib import Path
from typing import Sequence

from app.bench import screening_judge
from dev.screening.heldout import HELDOUT_SETS
from app.core.redaction import Redactor
from app.core.screening import semantic

VECTORS = "__vectors__"
"""The cache's key for its content -> embedding map (every other key is a content -> flag entry)."""


def main(sets: Sequence[str], default_cache: str) -> int:
    """Judge `sets` (names in `HELDOUT_SETS`) under the options of the command line."""
    last = sets[-1].removeprefix("heldout_")
    span = f"{sets[0].removeprefix('heldout_')}-{last}"
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", default="current")
    parser.add_argument("--out")
    parser.add_argument("--cache", default=default_cache)
    parser.add_argument("--show", action="store_true", help=f"print the ids missed and staged on {last}")
    args = parser.parse_args()
    cache: dict[str, object] = pickle.loads(Path(args.cache).read_bytes()) if os.path.exists(args.cache) else {}
    original = semantic.detect

    def cached(content, embedding, name, classifier=None):
        if content in cache and content != VECTORS:
            return cache[content]
        flag = original(content, embedding, name, classifier)
        cache[content] = flag
        return flag

    semantic.detect = cached
    # Which code is judged (a scratch run may put an older commit's ``app`` first on PYTHONPATH).
    print("screening code:", os.path.dirname(semantic.__file__))
    redactor, embedder, results = Redactor(), None, {}
    vectors_cache = cache.setdefault(VECTORS, {})
    for name in sets:
        rows = [json.loads(line) for line in Path(HELDOUT_SETS[name]).read_text().splitlines() if line.strip()]
        texts = [screening_judge.redact(r, redactor).content for r in rows]
        need = [(r, t) for r, t in zip(rows, texts) if t not in vectors_cache and r["type"] != "procedural"]
        if need:
            if embedder is None:
                from app.embeddings import LocalMiniLMEmbedder
                embedder = LocalMiniLMEmbedder()
            vectors_cache.update(zip((t for _, t in need),
                                     screening_judge.embed_rows([r for r, _ in need], redactor, embedder)))
        vectors = [None if r["type"] == "procedural" else vectors_cache[t] for r, t in zip(rows, texts)]
        model = semantic.load().model
        s = screening_judge.summarise(screening_judge.judge(r, redactor, v, model) for r, v in zip(rows, vectors))
        results[name] = {"stopped": s["catch_rate"], "benign_staged": s["false_positive_rate"],
                         "poisoned": s["poisoned"], "benign": s["benign"],
                         "missed": [m["id"] for m in s["missed"]],
                         "false_positives": [m["id"] for m in s["false_positives"]]}
        print(f"{name}: stopped {100 * s['catch_rate']:.1f} % ({s['poisoned'] - len(s['missed'])}/{s['poisoned']})"
              f"  benign staged {100 * s['false_positive_rate']:.1f} % ({len(s['false_positives'])}/{s['benign']})")
    Path(args.cache).write_bytes(pickle.dumps(cache))
    mean_c = sum(r["stopped"] for r in results.values()) / len(results)
    mean_b = sum(r["benign_staged"] for r in results.values()) / len(results)
    print(f"mean {span}: stopped {100 * mean_c:.2f} %  benign staged {100 * mean_b:.2f} %  load {os.getloadavg()[0]:.1f}")
    if args.show:
        print(f"{last} missed:", results[sets[-1]]["missed"])
        print(f"{last} staged:", results[sets[-1]]["false_positives"])
    if args.out:
        path = Path(args.out)
        report = json.loads(path.read_text()) if path.exists() else {}
        report[args.label] = {"sets": results, "mean_stopped": round(mean_c, 4), "mean_benign_staged": round(mean_b, 4),
                              "load_average": round(os.getloadavg()[0], 2)}
        path.write_text(json.dumps(report, indent=1) + "\n")
    return 0
