"""mem0's side of `memwarden bench compare`, run inside *mem0's* Python.

Standalone on purpose, like `memorywire_driver.py`: the standard library, mem0 (and what it needs)
and the sibling `driver_common.py`, never `app`. mem0's `Memory` runs in process with its default
local vector store (Qdrant in local mode, in memory, under a temp dir) and its SQLite history, with
`infer=False` (the text is stored as given, no LLM call) and, as its embedder, Memwarden's int8
all-MiniLM-L6-v2 (one call per text, as mem0 makes it), so every side embeds with the same model.
No LLM is ever called (mem0 is given an unused key for the client it builds), telemetry is off,
and nothing is downloaded. Scopes are mem0's `agent_id`, with each fact's and query's `user_id`.

Prints one JSON object on stdout: per-level throughput and latency, quality and versions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import driver_common  # the sibling script (this file's directory is first on sys.path)

WARMUP_FACTS = ["The warm-up user prefers window seats on long flights.",
                "The warm-up user keeps a sourdough starter named Clint."]


class SharedEmbedder:
    """mem0's embedder interface (`embed`, `embed_batch`) over Memwarden's int8 MiniLM."""

    def __init__(self) -> None:
        self.model = driver_common.load_minilm()

    def embed(self, text, memory_action=None):
        return self.model.embed([text])[0].tolist()

    def embed_batch(self, texts, memory_action="add"):
        return [row.tolist() for row in self.model.embed(list(texts))]


def run(corpus: dict, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="mem0-bench-") as tmp:
        os.environ.update({"MEM0_TELEMETRY": "False", "MEM0_DIR": tmp})
        import mem0
        from mem0 import Memory
        from mem0.configs.base import MemoryConfig

        unused = {"api_key": "unused-no-llm-or-remote-embedder-is-called"}
        memory = Memory(MemoryConfig(
            vector_store={"provider": "qdrant", "config": {"collection_name": "bench", "embedding_model_dims": 384,
                                                            "path": str(Path(tmp) / "qdrant")}},
            embedder={"provider": "openai", "config": {**unused, "embedding_dims": 384}},
            llm={"provider": "openai", "config": unused},
            history_db_path=str(Path(tmp) / "history.db"),
        ))
        memory.embedding_model = SharedEmbedder()

        def remember(scope: str, fact: dict) -> str:
            added = memory.add(fact["content"], agent_id=f"{args.agent_id}-{scope}", user_id=fact.get("user_id"),
                               infer=False)
            return str(added["results"][0]["id"])

        def recall(scope: str, query: dict, k: int) -> list[str]:
            filters = {"agent_id": f"{args.agent_id}-{scope}"}
            if query.get("user_id") is not None:
                filters["user_id"] = query["user_id"]
            return [str(h["id"]) for h in memory.search(query["query"], filters=filters, top_k=k)["results"]]

        for text in WARMUP_FACTS:
            remember("warmup", {"content": text, "user_id": "warmup"})
        for _ in range(3):
            recall("warmup", {"query": "where does the user sit?", "user_id": "warmup"}, args.k)
        report = driver_common.run_levels(corpus, remember, recall, levels=args.levels, rounds=args.rounds, k=args.k)
    from importlib.metadata import version

    return {**report, "embedder": "minilm-int8",
            "versions": {"mem0ai": getattr(mem0, "__version__", None) or version("mem0ai"),
                         "qdrant-client": version("qdrant-client"), "python": sys.version.split()[0]}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", help="corpus JSON in shared/bench's shape")
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
