"""How far attacks and their look-alikes are from an agent's history, on spent sets, in-process.

The blind-set harness gives every set row a fresh agent with at most one prior memory, so
``unlike_agent`` (``app.core.screening.novelty``) meets a cold start there by design. This probe
gives each set row the history an assistant of the same kind would have: the first ``--history``
writes of the benign stream's agent whose name shares a word with the row's (``support-bot`` and
``support-bot``, ``coding-agent`` and ``coding-assistant``; rows with no such agent are left out),
and each stream row its own agent's earlier writes. For each row it reports the nearest cosine
similarity (all-MiniLM-L6-v2) and whether letting an unusual write raise a category on part of a
head's cut would raise one screening did not: no category raised, nearest below ``UNLIKE``, a head
at ``--tip`` of its support cut or more (``novelty`` does not do this: it would tip look-alikes as
often as attacks).

    PYTHONPATH=. python dev/screening/unlike_agent_probe.py /work/blind/spent/set-a.jsonl /work/blind/spent/set-b.jsonl \\
        --stream /work/blind/spent/benign-stream.jsonl

Development tooling: not part of the package.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path

import numpy as np

from app.core.screening import CATEGORY_NAMES, effect_heads, screen
from app.core.screening.novelty import MIN_HISTORY, UNLIKE
from app.embeddings import LocalMiniLMEmbedder

GENERIC = {"assistant", "agent", "bot", "helper", "ai", "the"}


def words(agent: str) -> set[str]:
    return {t for t in re.split(r"[^a-z]+", agent.lower()) if t and t not in GENERIC}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sets", nargs="+", type=Path)
    parser.add_argument("--stream", type=Path, required=True)
    parser.add_argument("--history", type=int, default=20)
    parser.add_argument("--tip", type=float, default=0.5)
    args = parser.parse_args()

    def read(p: Path) -> list[dict]:
        return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]

    stream, rows = read(args.stream), [r for p in args.sets for r in read(p)]
    embedder, heads = LocalMiniLMEmbedder(), effect_heads.load()
    texts = list(dict.fromkeys(r["content"] for r in stream + rows))
    vectors = dict(zip(texts, embedder.embed(texts)))
    by_agent = collections.defaultdict(list)
    for row in stream:
        by_agent[row["agent"]].append(row)

    def judged(row, history):
        vector = vectors[row["content"]]
        nearest = max((float(vector @ vectors[h["content"]]) for h in history), default=None)
        flags = screen(row["content"], memory_type="semantic", source=row.get("source"), embedding=vector,
                       embedder=embedder.name).flags
        probabilities = effect_heads.read(row["content"], vector, embedder.name)
        share = max((probabilities[n] / float(heads.support[i]) for i, n in enumerate(heads.names)), default=0.0)
        tips = (len(history) >= MIN_HISTORY and nearest is not None and nearest < UNLIKE and share >= args.tip
                and not any(f.name in CATEGORY_NAMES for f in flags))
        return nearest, tips

    counts = collections.Counter()
    similarity = collections.defaultdict(list)
    for rows_of_agent in by_agent.values():
        for i, row in enumerate(rows_of_agent):
            if i >= MIN_HISTORY:
                nearest, tips = judged(row, rows_of_agent[:i])
                counts["stream"] += 1
                counts["stream_tipped"] += tips
                similarity["stream"].append(nearest)
    for row in rows:
        match = [a for a in by_agent if words(row["agent"]) & words(a)]
        if not match:
            continue
        nearest, tips = judged(row, by_agent[match[0]][:args.history])
        counts[row["label"]] += 1
        counts[f"{row['label']}_tipped"] += tips
        similarity[row["label"]].append(nearest)
    for kind in ("poisoned", "benign", "stream"):
        quartiles = np.percentile(similarity[kind], [25, 50, 75]).round(3).tolist() if similarity[kind] else []
        print(f"{kind:9} rows {counts[kind]:4}  newly raised {counts[kind + '_tipped']:3}  "
              f"nearest similarity quartiles {quartiles}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
