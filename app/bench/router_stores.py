"""Store factories for memory backends in benchmarks and tests (`--factory app.bench.router_stores:…`):
mem0's `Memory` and memorywire's `PgVectorStore`, both on PostgreSQL (so every process of a test's
servers sees the same store), both embedding
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


def mem0_memory(dsn: str | None = None, collection: str = "memwarden"):
    """mem0 2.x `Memory`, its LLM never called (infer off): vectors in PostgreSQL (pgvector, the
    collection `collection` in `dsn`) so every process of a deployment sees one store, or, without
    a `dsn`, in an in-memory Qdrant of this process alone; history in a temp dir."""
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    from mem0 import Memory

    home = tempfile.mkdtemp(prefix="mem0-")
    if dsn:
        # Its own schema: mem0 creates its tables wherever search_path points first, and they are
        # not Memwarden's (the schema checks of the suite look at `public`).
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA IF NOT EXISTS mem0")
        scoped = dsn + ("&" if "?" in dsn else "?") + "options=-csearch_path%3Dmem0%2Cpublic"
        vectors = {"provider": "pgvector", "config": {"connection_string": scoped, "collection_name": collection,
                                                      "embedding_model_dims": 384, "hnsw": False}}
    else:
        vectors = {"provider": "qdrant", "config": {"collection_name": collection, "embedding_model_dims": 384,
                                                    "on_disk": False, "path": os.path.join(home, "qdrant")}}
    memory = Memory.from_config({
        "vector_store": vectors,
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


def pgvector_store(dsn: str, schema: str = "memorywire"):
    """memorywire's PostgreSQL + pgvector store, in its own schema of `dsn`'s database."""
    from memorywire.store.pgvector_adapter import PgVectorStore

    return PgVectorStore(dsn, schema=schema, embedder=embed)
