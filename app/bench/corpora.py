"""The screening benchmark's labelled corpora: the generated corpus in this package's data folder
(dev and test splits, written by ``dev/screening/train/corpus.py``), the external corpora from
installed packages (the ``bench`` extra: bastioncorpus's labelled injections and
agent-memory-guard's AMSB scenarios), and ``benign_load_writes``: the ordinary writes the other
benchmarks make (load-test facts, the hot-path and scale generators, the recall corpora), all
benign, which screening must not flag. The hand-written held-out sets are development data and
live in the checkout (``dev/screening/heldout.py``), not in the package."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "screening_corpus.jsonl"
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
    from app.bench import hotpath, scale_data

    rng = random.Random(seed)
    texts = [("load_fact", f"Load fact {i}: item {rng.getrandbits(128):032x}.") for i in range(200)]
    texts += [("hotpath", fact.format(u=user, n=n)) for n, (fact, user) in
              enumerate((f, u) for f in hotpath.FACTS for u in ("Ana", "Reviewed", "Kofi", "Mei"))]
    texts += [("scale", row.memory.content) for row in scale_data.plan(seed, 300, 3, 20, 0)]
    texts += [("calibration", fact["content"]) for fact in json.loads(CALIBRATION.read_text(encoding="utf-8"))["facts"]
              if fact.get("type") != "procedural"]
    if MEMORYWIRE is not None:
        texts += [("memorywire", fact["content"]) for fact in json.loads(MEMORYWIRE.read_text(encoding="utf-8"))["facts"]
                  if fact.get("type") != "procedural"]
    return [{"id": f"load-{kind}-{i}", "class": f"benign_{kind}", "label": "benign", "split": "load",
             "type": "semantic", "content": text} for i, (kind, text) in enumerate(texts)]


CANARY = "CANARY-7Q2X"
"""What the external corpus's ``{canary}`` placeholders are filled with."""


AMSB = "external:agent-memory-guard-amsb"


def amsb_corpus() -> list[dict[str, Any]] | None:
    """agent-memory-guard's own benchmark scenarios (AMSB, ``agent_memory_guard.bench.scenarios``,
    Apache-2.0) as writes: each step's value is the content and its dotted key becomes nested
    metadata (``identity.role`` -> ``{"identity": {"role": value}}``, the nearest thing a memory has
    to a key); a scenario is one row per step (all of them single-step today). None when absent."""
    try:
        from agent_memory_guard.bench.scenarios import default_corpus
    except ImportError:
        return None
    rows = []
    for scenario in default_corpus():
        for i, step in enumerate(scenario.steps):
            metadata: dict[str, Any] = {}
            node = metadata
            *parents, leaf = step.key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = step.value
            rows.append({"id": f"amsb-{scenario.id}-{i}", "class": scenario.category, "split": "external",
                         "type": "semantic", "label": "poisoned" if scenario.malicious else "benign",
                         "content": step.value, "metadata": metadata, "guard_key": step.key})
    return rows


def external_corpus() -> list[dict[str, Any]] | None:
    """bastioncorpus's labelled rows as writes (None when the package is not installed)."""
    try:
        from importlib import resources

        text = (resources.files("bastioncorpus") / "corpus" / "injections.jsonl").read_text(encoding="utf-8")
    except (ImportError, FileNotFoundError, ModuleNotFoundError):
        return None
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        item = json.loads(line)
        rows.append({"id": f"bastion-{item['id']}", "class": item["category"], "split": "external", "type": "semantic",
                     "label": "poisoned" if item["label"] == "malicious" else "benign",
                     "content": str(item["text"]).replace("{canary}", CANARY)})
    return rows
