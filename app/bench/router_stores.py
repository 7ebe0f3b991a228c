"""Store factories for memory backends in benchmarks (`--factory app.bench.router_stores:…`):
memorywire's `PgVectorStore` on PostgreSQL (so every process of a benchmark's servers sees the same
store), embedding with Memwarden's own int8 MiniLM so no model is downloaded. mem0's is the product's
offline factory, `app.stores.mem0_local:memory`."""

from __future__ import annotations

from app.stores.mem0_local import embed


def pgvector_store(dsn: str, schema: str = "memorywire"):
    """memorywire's PostgreSQL + pgvector store, in its own schema of `dsn`'s database."""
    from memorywire.store.pgvector_adapter import PgVectorStore

    return PgVectorStore(dsn, schema=schema, embedder=embed)
