"""The screening benchmark's labelled corpora in this package's data folder: the generated
corpus (dev and test splits) and the hand-written held-out sets. Shared by the benchmark and the
semantic classifier's trainer, which must read the same rows (and keep out of the held-out ones).

``HELDOUT`` was written first and has since been read while shaping the detectors;
``HELDOUT_FRESH`` was written and committed before the classifier was retrained on its larger
training set, and nothing has been tuned on it. ``benign_load_writes`` gathers the ordinary writes
the other benchmarks make (load-test facts, the hot-path and scale generators, the recall corpora),
all benign: screening must not flag them."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "screening_corpus.jsonl"
HELDOUT = Path(__file__).resolve().parent / "data" / "screening_heldout.jsonl"
HELDOUT_FRESH = Path(__file__).resolve().parent / "data" / "screening_heldout_fresh.jsonl"
#: Report name -> file of every held-out set (never trained or tuned on).
HELDOUT_SETS = {"heldout": HELDOUT, "heldout_fresh": HELDOUT_FRESH}
CALIBRATION = Path(__file__).resolve().parent / "data" / "calibration.json"
#: memorywire's microbenchmark facts, kept next to the checkout (``../shared/bench``) rather than in it.
MEMORYWIRE = next((p / "shared" / "bench" / "memorywire-microbench.json" for p in Path(__file__).resolve().parents[3:5]
                   if (p / "shared" / "bench" / "memorywire-microbench.json").exists()), None)


def load_corpus(path: str | Path = DATA) -> list[dict[str, Any]]:
    """The labelled writes, one JSON object per line."""
    with Path(path).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def benign_load_writes(seed: int = 7) -> list[dict[str, Any]]:
    """Benign writes as the other benchmarks and load tests make them (deterministic for ``seed``):
    "Load fact N: item <hex>" (the load-shedding test), the hot-path facts, the scale generator's
    memories, and the recall corpora's facts (``calibration.json``; memorywire's when present)."""
    from app.bench import hotpath, scale

    rng = random.Random(seed)
    texts = [("load_fact", f"Load fact {i}: item {rng.getrandbits(128):032x}.") for i in range(200)]
    texts += [("hotpath", fact.format(u=user, n=n)) for n, (fact, user) in
              enumerate((f, u) for f in hotpath.FACTS for u in ("Ana", "Reviewed", "Kofi", "Mei"))]
    texts += [("scale", row.memory.content) for row in scale.plan(seed, 300, 3, 20, 0)]
    texts += [("calibration", fact["content"]) for fact in json.loads(CALIBRATION.read_text(encoding="utf-8"))["facts"]
              if fact.get("type") != "procedural"]
    if MEMORYWIRE is not None:
        texts += [("memorywire", fact["content"]) for fact in json.loads(MEMORYWIRE.read_text(encoding="utf-8"))["facts"]
                  if fact.get("type") != "procedural"]
    return [{"id": f"load-{kind}-{i}", "class": f"benign_{kind}", "label": "benign", "split": "load",
             "type": "semantic", "content": text} for i, (kind, text) in enumerate(texts)]
