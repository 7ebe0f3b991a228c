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


class LossyStore:
    """A memorywire store that answers a forget as done and deletes nothing, on every
    `lose_every`-th forget (1: every one): the store `memwarden bench router --lossy` and the
    erasure tests deliver to, so the read-back after each delete has something to catch."""

    def __init__(self, store, lose_every: int = 1):
        self.store = store
        self.lose_every = max(1, int(lose_every))
        self.forgets = 0

    async def remember(self, req):
        return await self.store.remember(req)

    async def recall(self, req):
        return await self.store.recall(req)

    async def forget(self, req):
        from memorywire.models import ForgetResponse

        self.forgets += 1
        if self.forgets % self.lose_every == 0:
            return ForgetResponse(forgotten_ids=list(req.ids or []), hard_delete=bool(req.hard_delete), stores=[])
        return await self.store.forget(req)

    async def close(self):
        await self.store.close()


def lossy_pgvector_store(dsn: str, schema: str = "memorywire", lose_every: int | str = 1):
    """`pgvector_store`, wrapped in a `LossyStore`."""
    return LossyStore(pgvector_store(dsn, schema), int(lose_every))
