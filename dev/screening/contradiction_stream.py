"""How often screening's contradiction check fires on a stream of ordinary writes, and what the
contradiction model costs there: each write of the stream is compared, as screening compares it,
with its nearest earlier writes of the same agent and user (up to five, the stream's own order
standing in for what is live), by the rules with meaning and then by the rules with meaning and
the model. Ordinary writes rarely replace one another, so every flag here is a write that a
person would be asked about, and the model's share of them is what it adds to the queue.

    python dev/screening/contradiction_stream.py dev/screening/sets/benign-stream-2.jsonl OUT.json

Development tooling, outside the package.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.core import attributes  # noqa: E402
from app.core.screening import contradiction  # noqa: E402
from app.embeddings import get_embedder  # noqa: E402
from app.nli import get_scorer  # noqa: E402

NEIGHBOURS = 5


def main(path: str, out: str) -> None:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("type") != "procedural"]
    embedder, scorer = get_embedder(), get_scorer()
    assert scorer is not None, "the contradiction model is off or not installed"
    vectors = embedder.embed([r["content"] for r in rows])
    attributes.prototypes(embedder.embed, embedder.name)
    calls = {"pairs": 0, "seconds": 0.0}

    def counted(pairs):
        started = time.perf_counter()
        try:
            return scorer(pairs)
        finally:
            calls["pairs"] += len(pairs)
            calls["seconds"] += time.perf_counter() - started

    seen: dict[tuple[str, str], list[int]] = {}
    flagged = {"rules": [], "rules_and_model": []}
    for i, row in enumerate(rows):
        earlier = seen.setdefault((row.get("agent", ""), row.get("user", "")), [])
        if earlier:
            sims = vectors[earlier] @ vectors[i]
            nearest = [earlier[j] for j in np.argsort(-sims)[:NEIGHBOURS]]
            live = [rows[j]["content"] for j in nearest]
            meaning = attributes.meaning(embedder.embed, embedder.name, vectors[i], [vectors[j] for j in nearest])
            if contradiction.detect(row["content"], live, meaning) is not None:
                flagged["rules"].append(row["id"])
            states = [row.get("type") == rows[j].get("type") == "semantic" for j in nearest]
            if contradiction.detect(row["content"], live, meaning, counted, states) is not None:
                flagged["rules_and_model"].append(row["id"])
        earlier.append(i)
    added = sorted(set(flagged["rules_and_model"]) - set(flagged["rules"]))
    by_id = {r["id"]: r["content"] for r in rows}
    report = {"set": Path(path).name, "writes": len(rows), "flagged_by_rules": len(flagged["rules"]),
              "flagged_with_model": len(flagged["rules_and_model"]), "added_by_model": [
                  {"id": i, "content": by_id[i]} for i in added],
              "model_pairs": calls["pairs"], "model_ms_per_pair": round(calls["seconds"] * 1000 / max(calls["pairs"], 1), 2),
              "model_ms_per_write": round(calls["seconds"] * 1000 / len(rows), 3),
              "loadavg_1_5_15": list(os.getloadavg())}
    Path(out).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "added_by_model"}, indent=2))
    for item in report["added_by_model"]:
        print("+", item["id"], item["content"][:140])


if __name__ == "__main__":
    main(*sys.argv[1:3])
