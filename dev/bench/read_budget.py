"""`memwarden bench read-budget`: how many distinct memories a normal agent is returned, on the
benchmark corpora, to choose the read-budget defaults (docs/benchmarks.md, "Read budgets").

For each corpus (Memwarden's calibration set, memorywire's microbenchmark) every labelled query
and probe is asked once, as its agent would, of its own user's scope and of the whole agent (all
users): the top k by cosine similarity with the server's embedder and no relevance floor (so an
upper bound on what recall returns; the floor only removes hits). Reported per corpus and k: the
queries, the results returned, the distinct memories among them, and distinct per query — the rate
at which a working agent's session meets new memories. Embedding only: no database, no server.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from app.bench.recall import DEFAULT_CORPUS
from app.paths import PACKAGE_DIR

CALIBRATION = PACKAGE_DIR / "bench" / "data" / "calibration.json"


def measure(corpus: dict[str, Any], embed, k: int, per_user: bool) -> dict[str, Any]:
    """Distinct memories returned by asking every query of `corpus` once, top `k` by cosine."""
    facts, queries = corpus["facts"], corpus["queries"]
    fact_vecs = embed([f["content"] for f in facts])
    query_vecs = embed([q["query"] for q in queries])
    returned, distinct = 0, set()
    for query, vec in zip(queries, query_vecs):
        scope = [i for i, f in enumerate(facts) if not per_user or f["user_id"] == query.get("user_id")]
        scores = fact_vecs[scope] @ vec
        top = [scope[i] for i in np.argsort(-scores)[:k]]
        returned += len(top)
        distinct.update(top)
    return {"facts": len(facts), "queries": len(queries), "k": k, "scope": "user" if per_user else "agent",
            "returned": returned, "distinct": len(distinct),
            "distinct_per_query": round(len(distinct) / len(queries), 3),
            "share_of_memories": round(len(distinct) / len(facts), 3)}


def run(args: argparse.Namespace, settings) -> int:
    from app.embeddings import get_embedder

    embedder = get_embedder(settings.embedder)

    def embed(texts: list[str]) -> np.ndarray:
        vecs = np.asarray(embedder.embed(texts), dtype=np.float32)
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)

    rows = []
    for name, path in (("calibration", CALIBRATION), ("memorywire", args.memorywire)):
        if not Path(path).exists():
            print(f"{name}: {path} not found, skipped")
            continue
        corpus = json.loads(Path(path).read_text(encoding="utf-8"))
        for per_user in (True, False):
            for k in (5, 10):
                row = {"corpus": name, **measure(corpus, embed, k, per_user)}
                rows.append(row)
                print(f"{name:12} scope={row['scope']:5} k={k:2}: {row['queries']} queries returned {row['returned']} "
                      f"results, {row['distinct']} distinct ({row['distinct_per_query']} per query, "
                      f"{row['share_of_memories']:.0%} of {row['facts']} memories)")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows}, indent=2) + "\n", encoding="utf-8")
    return 0


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("read-budget", help="distinct memories a normal agent is returned, on the corpora")
    parser.add_argument("--memorywire", default=DEFAULT_CORPUS, help="memorywire's microbenchmark corpus")
    parser.add_argument("--out", help="write the JSON report here (e.g. docs/bench/read-budget.json)")
    parser.set_defaults(func=run)
