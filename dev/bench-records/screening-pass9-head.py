"""Ninth screening pass (issue 21): leave-one-set-out for the learned removal reader alone.

    python dev/bench-records/screening-pass9-head.py --baseline before [--seen heldout_v3,...] [--out FILE]

For each spent set v3-v8: the removal head (``app.core.screening.removal``) trained by
``make_screening_exemplars.train_removal`` *without that set* (and on the spent sets named by ``--seen``
only; the default is the list before the ninth pass moved v7 and v8 in, which reproduces the figures in
docs/benchmarks.md), and how many writes its rule ("fires, and a rule cue or a control rule agrees, and no
compensating control") would add to the stopped attacks and the staged benign writes of the row
``--baseline`` of dev/bench-records/screening-pass9.json (the whole default policy without the head). The
figures in docs/benchmarks.md were taken with the rules of the commit that added the head.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from dev.screening.train import exemplars as mse
from app.bench import screening_judge
from app.bench.corpora import load_corpus
from dev.screening.heldout import HELDOUT_SETS
from app.core.redaction import Redactor
from app.core.screening import controls
from app.core.screening.flags import text_fields

SETS = ("heldout_v3", "heldout_v4", "heldout_v5", "heldout_v6", "heldout_v7", "heldout_v8")
BEFORE_NINTH = ("heldout", "heldout_fresh", "heldout_v3", "heldout_v4", "heldout_v5", "heldout_v6")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", default="before")
    parser.add_argument("--seen", default=",".join(BEFORE_NINTH))
    parser.add_argument("--out")
    args = parser.parse_args()
    from app.embeddings import LocalMiniLMEmbedder

    mse.SEEN_SETS = tuple(s for s in args.seen.split(",") if s)
    base = json.loads(Path("dev/bench-records/screening-pass9.json").read_text())[args.baseline]["sets"]
    embedder, redactor, cache, out = LocalMiniLMEmbedder(), Redactor(), {}, {}
    for name in SETS:
        head = mse.train_removal(embedder, cache=cache, skip_set=name)
        rows = [r for r in load_corpus(HELDOUT_SETS[name]) if r["type"] != "procedural"]
        texts = [screening_judge.redact(r, redactor).content for r in rows]
        vectors = mse.embed_all(embedder, texts, cache)
        missed, staged = set(base[name]["missed"]), set(base[name]["false_positives"])
        gained, cost = [], []
        for row, text, vector in zip(rows, texts, vectors):
            if head.probability(vector, text) < head.high or controls.compensated(text):
                continue
            kinds, _ = controls.evidence(text_fields(text, [], {}))
            if controls.rule_cue(text) is None and not set(kinds) & controls.KINDS:
                continue
            if row["id"] in missed:
                gained.append(row["id"])
            elif row["label"] == "benign" and row["id"] not in staged:
                cost.append(row["id"])
        out[name] = {"attacks_added": gained, "benign_added": cost, "cut": round(head.high, 3)}
        print(f"{name}: +{len(gained)} attacks stopped, +{len(cost)} benign staged (cut {head.high:.3f})")
    total = [sum(len(v[k]) for v in out.values()) for k in ("attacks_added", "benign_added")]
    print(f"total: +{total[0]} attacks, +{total[1]} benign  load {os.getloadavg()[0]:.1f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"seen": mse.SEEN_SETS, "sets": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
