"""A store factory whose data lives inside the process that opened it (mem0 on an embedded,
in-memory Qdrant), for the tests that check it is refused where another process must read it."""

from __future__ import annotations

import os
import tempfile


def embedded_qdrant_mem0(collection: str = "local"):
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    from mem0 import Memory

    from app.stores.mem0_local import DIMENSIONS, embed

    home = tempfile.mkdtemp(prefix="mem0-local-")
    memory = Memory.from_config({
        "vector_store": {"provider": "qdrant", "config": {"collection_name": collection, "on_disk": False,
                                                          "embedding_model_dims": DIMENSIONS,
                                                          "path": os.path.join(home, "qdrant")}},
        "embedder": {"provider": "openai", "config": {"api_key": "unused", "embedding_dims": DIMENSIONS}},
        "llm": {"provider": "openai", "config": {"api_key": "unused"}},
        "history_db_path": os.path.join(home, "history.db"),
    })

    class Embedder:
        config = memory.embedding_model.config

        def embed(self, text, memory_action=None):
            return embed(text)

    memory.embedding_model = Embedder()
    return memory
