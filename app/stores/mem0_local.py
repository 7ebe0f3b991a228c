"""An offline mem0 store for `memwarden backend add --kind mem0 --factory app.stores.mem0_local:memory`.

mem0 2.x's `Memory` with no model to download and no API to call:

- embeddings from Memwarden's bundled int8 MiniLM (384 dimensions, the model recall uses), so
  nothing is fetched from a hub and no key is needed;
- vectors in PostgreSQL with pgvector, in a schema `mem0` of Memwarden's own database unless a `dsn`
  names another, so every process that reads or writes the store sees the same one: the leading
  `serve` process that delivers, every worker that recalls, and `memwarden backend drift` / `show`
  run beside it (an in-process store would be a different, empty store in each of them);
- no LLM: mem0's `infer` stays off (the default of a mem0 backend), so what Memwarden approved is
  stored as written. A backend added with `--infer` needs a mem0 config with a real LLM instead.

Factory arguments (`--factory-arg KEY=VALUE`): `collection` (the table, default `memwarden`) and
`dsn` (a `postgresql://` URL; default: Memwarden's database, as its owner role).
"""

from __future__ import annotations

import functools
import os
import tempfile
from typing import Any

DIMENSIONS = 384
SCHEMA = "mem0"


@functools.cache
def _embedder():
    from app.embeddings import LocalMiniLMEmbedder

    return LocalMiniLMEmbedder()


def embed(text: str) -> list[float]:
    """The bundled model's embedding of `text`, as a list (what mem0's vector stores take)."""
    return _embedder().embed([text])[0].tolist()


def memwarden_dsn() -> str:
    """Memwarden's own database, as its owner role (mem0 creates its schema and tables), in the
    plain `postgresql://` form psycopg takes: the configured URLs, else the embedded cluster's."""
    from app.config import Settings
    from app.db.database import resolve_urls

    settings = Settings.from_env()
    url = settings.migration_database_url or settings.database_url or resolve_urls(settings).admin_url
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def memory(dsn: str | None = None, collection: str = "memwarden") -> Any:
    """mem0's `Memory` on pgvector (the schema `mem0` of `dsn`, default Memwarden's database),
    embedding with the bundled model; its LLM is never called (infer off)."""
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    try:
        from mem0 import Memory
    except ImportError as exc:
        raise ImportError("the mem0 backend needs mem0: pip install 'memwarden[mem0]'") from exc
    from app.repos.router.schemas import ensure_schema

    dsn = dsn or memwarden_dsn()
    # Its own schema: mem0 creates its tables wherever search_path points first, and they are not
    # Memwarden's (the schema checks look at `public`).
    ensure_schema(dsn, SCHEMA)
    scoped = dsn + ("&" if "?" in dsn else "?") + f"options=-csearch_path%3D{SCHEMA}%2Cpublic"
    home = tempfile.mkdtemp(prefix="mem0-")  # mem0's own change history (sqlite), per process
    store = Memory.from_config({
        "vector_store": {"provider": "pgvector", "config": {
            "connection_string": scoped, "collection_name": collection, "embedding_model_dims": DIMENSIONS,
            "hnsw": False}},
        # mem0 builds a client for each; neither is called: embeddings are replaced below, infer is off.
        "embedder": {"provider": "openai", "config": {"api_key": "unused", "embedding_dims": DIMENSIONS}},
        "llm": {"provider": "openai", "config": {"api_key": "unused"}},
        "history_db_path": os.path.join(home, "history.db"),
    })

    class BundledEmbedder:
        config = store.embedding_model.config

        def embed(self, text, memory_action=None):
            return embed(text)

    store.embedding_model = BundledEmbedder()
    return store
