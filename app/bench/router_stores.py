"""Store factories for memory backends in benchmarks and tests (`--factory app.bench.router_stores:…`):
mem0's `Memory` on an in-memory Qdrant and memorywire's `PgVectorStore` in the test database, both embedding
with Memwarden's own int8 MiniLM so no model is downloaded."""

from __future__ import annotations

import functools
import os
import tempfile


@functools.cache
def _embedder():
    from app.embeddings import LocalMiniLMEmbedder

    return LocalMiniLMEmbedder()


def embed(text: str) -> list[float]:
    return _embedder().embed([text])[0].tolist()


def mem0_memory():
    """mem0 2.x `Memory`: Qdrant in memory, history in a temp dir, the LLM never called (infer off)."""
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    from mem0 import Memory

    home = tempfile.mkdtemp(prefix="mem0-")
    memory = Memory.from_config({
        "vector_store": {"provider": "qdrant", "config": {"collection_name": "memwarden", "embedding_model_dims": 384,
                                                          "on_disk": False, "path": os.path.join(home, "qdrant")}},
        "embedder": {"provider": "openai", "config": {"api_key": "unused", "embedding_dims": 384}},
        "llm": {"provider": "openai", "config": {"api_key": "unused"}},
        "history_db_path": os.path.join(home, "history.db"),
    })

    class LocalEmbedder:
        config = memory.embedding_model.config

        def embed(self, text, memory_action=None):
            return embed(text)

    memory.embedding_model = LocalEmbedder()
    return memory


def pgvector_store(dsn: str | None = None, schema: str | None = None):
    """memorywire's PostgreSQL + pgvector store in its own schema (arguments, else
    MEMWARDEN_TEST_MEMORYWIRE_DSN and MEMWARDEN_TEST_MEMORYWIRE_SCHEMA)."""
    from memorywire.store.pgvector_adapter import PgVectorStore

    return PgVectorStore(dsn or os.environ["MEMWARDEN_TEST_MEMORYWIRE_DSN"],
                         schema=schema or os.environ.get("MEMWARDEN_TEST_MEMORYWIRE_SCHEMA", "memorywire"),
                         embedder=embed)
