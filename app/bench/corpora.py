"""The screening benchmark's labelled corpora in this package's data folder: the generated
corpus (dev and test splits) and the hand-written held-out sets. Shared by the benchmark and the
semantic classifier's trainer, which must read the same rows (and keep out of the held-out ones).

``HELDOUT`` was written first and has since been read while shaping the detectors;
``HELDOUT_FRESH`` was written and committed before the classifier was retrained on its larger
training set, and nothing has been tuned on it. ``HELDOUT_V3`` (issue 21) was written by hand by a
helper who never opened the detectors, their training data or the other held-out rows: ten
attack families (secret harvesting, PII profiles and protected tag/metadata keys among them) and
eleven benign families of look-alikes, at least 15 writes each. Those three were measured once
each and then **spent**: the fourth screening pass read them and trains on them (the report labels
them ``seen/trained``). ``HELDOUT_V4`` was written blind while that pass was under way (its writer never
opened the detectors, nor the detector work the held-out rows): ten attack families and thirteen
benign ones, measured once after the pass was merged, then spent by the fifth pass.
``HELDOUT_V5`` was written blind during the fifth pass in the same way, measured once after it
(91.5 % stopped, 5.1 % benign staged; docs/benchmarks.md) and spent by the sixth pass, which
trains on it. ``MEASURED_SETS`` names sets measured blind once and read but not yet trained on.
``HELDOUT_V6`` was written blind during the sixth pass in the same way (fifteen benign families, five
of them kinds of agent no earlier set had) and measured once after it (89.5 % stopped, 3.1 % benign
staged; docs/benchmarks.md) and spent by the seventh pass, which trains on it. ``HELDOUT_V7`` was
written blind during the seventh pass in the same way (fifteen benign families, seven of them kinds
of agent no earlier set had) and measured once after it (82.5 % stopped, 3.9 % benign staged;
docs/benchmarks.md); the eighth pass read it and changed rules only, so it is still untrained on.
``HELDOUT_V8`` was written blind during the eighth pass in the same way (sixteen benign families,
eight of them kinds of agent no earlier set had) and measured once after it (87.5 % stopped, 3.7 %
benign staged; docs/benchmarks.md). Both were in ``MEASURED_SETS`` (read, not trained on) until the
ninth pass, which trains on them. ``HELDOUT_V9`` was written blind during the ninth pass in the same
way (fifteen benign families, eight of them kinds of agent no earlier set had) and measured once
after it (87.5 % stopped, 2.9 % benign staged; docs/benchmarks.md): read, in ``MEASURED_SETS``; the
tenth pass changed rules only after reading it. ``HELDOUT_V10`` was written blind during the tenth pass
in the same way (fourteen benign families, five of them kinds of agent no earlier set had) and
measured once after it (92.0 % stopped, 2.7 % benign staged; docs/benchmarks.md): read, in
``MEASURED_SETS``. ``benign_load_writes`` gathers the ordinary writes
the other benchmarks make (load-test facts, the hot-path and scale generators, the recall corpora),
all benign: screening must not flag them. The external corpora come from installed packages (the
``bench`` extra): bastioncorpus's labelled injections and agent-memory-guard's AMSB scenarios."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "screening_corpus.jsonl"
HELDOUT = Path(__file__).resolve().parent / "data" / "screening_heldout.jsonl"
HELDOUT_FRESH = Path(__file__).resolve().parent / "data" / "screening_heldout_fresh.jsonl"
HELDOUT_V3 = Path(__file__).resolve().parent / "data" / "screening_heldout_v3.jsonl"
HELDOUT_V4 = Path(__file__).resolve().parent / "data" / "screening_heldout_v4.jsonl"
HELDOUT_V5 = Path(__file__).resolve().parent / "data" / "screening_heldout_v5.jsonl"
HELDOUT_V6 = Path(__file__).resolve().parent / "data" / "screening_heldout_v6.jsonl"
HELDOUT_V7 = Path(__file__).resolve().parent / "data" / "screening_heldout_v7.jsonl"
HELDOUT_V8 = Path(__file__).resolve().parent / "data" / "screening_heldout_v8.jsonl"
HELDOUT_V9 = Path(__file__).resolve().parent / "data" / "screening_heldout_v9.jsonl"
HELDOUT_V10 = Path(__file__).resolve().parent / "data" / "screening_heldout_v10.jsonl"
#: Report name -> file of every hand-written held-out set. Those in
#: ``make_screening_exemplars.SEEN_SETS`` are spent (measured, read, trained on); the rest are blind.
HELDOUT_SETS = {"heldout": HELDOUT, "heldout_fresh": HELDOUT_FRESH, "heldout_v3": HELDOUT_V3,
                "heldout_v4": HELDOUT_V4, "heldout_v5": HELDOUT_V5, "heldout_v6": HELDOUT_V6,
                "heldout_v7": HELDOUT_V7, "heldout_v8": HELDOUT_V8,
                "heldout_v9": HELDOUT_V9, "heldout_v10": HELDOUT_V10}
#: Held-out sets measured once and read (docs/benchmarks.md keeps that one figure) but not trained on.
MEASURED_SETS: frozenset[str] = frozenset({"heldout_v9", "heldout_v10"})
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
