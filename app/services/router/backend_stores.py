"""Adapters from Memwarden's router to the memory stores teams already run.

Each adapter is synchronous (the delivery job and recall call it from worker threads) and does
four things: `put` a governed memory (returning the store's own id for it; `maybe_written` when
an earlier delivery attempt may have written it before its process died), `delete` it, `holds`
(whether the store still returns the item, by its own id or by `memwarden_id`: read back after
each delete, so a store that says it deleted and did not is caught, `app.services.audit.erasure`), and
`search` (best first, `(store id, similarity, memwarden id or None)`). Every memory handed to a
store carries `memwarden_id` in its metadata, so a delivery retried after a crash finds what it
already wrote instead of writing it twice (`find`), and recall can map a hit back to the governed
record — the content a caller receives always comes from Memwarden's row, never from the store.

* `memwarden`: another Memwarden server over HTTP, through the Python client; writes carry an
  Idempotency-Key derived from the memory id and content digest, so a replay is answered, not redone.
  Its connections obey the outbound rule (`app.services.runtime.outbound`): resolved, checked, pinned.
* `mem0`: the `mem0ai` library in process, built by the operator's factory (`module:callable`
  returning a `mem0.Memory`) or from a mem0 JSON config file; `infer=False` unless the operator
  sets `infer: true` (then mem0's LLM rewrites what it stores, and drift will report it).
* `memorywire`: any memorywire `MemoryStore`, built by the operator's factory (`module:callable`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import importlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from app.db.models import Memory
from app.services.runtime.outbound import OutboundRule, OutboundTransport, failure_reason, status_reason

MEMWARDEN_ID = "memwarden_id"
STORE_ERROR = "store_error"


class StoreError(Exception):
    """A store refused or failed an operation (the delivery is retried; recall leaves it out).
    `reason` is a fixed word (`http_502`, `timeout`, `refused_address`, ...), the only part a
    tenant is shown; the message is the detail, for the server's log alone: it may quote what
    the other end answered."""

    def __init__(self, detail: str, reason: str = STORE_ERROR):
        super().__init__(detail)
        self.reason = reason


def _remote_failure(exc: Exception) -> StoreError:
    """A StoreError for a call to another Memwarden that raised the client's `exc`."""
    from memwarden import errors

    if isinstance(exc, errors.ConnectionFailed):
        reason = failure_reason(exc)
    elif getattr(exc, "status", None):
        reason = status_reason(exc.status)
    else:
        reason = STORE_ERROR
    return StoreError(f"{getattr(exc, 'code', '')}: {getattr(exc, 'message', exc)}", reason)


@dataclass(frozen=True)
class Snapshot:
    """What a store receives of a governed memory."""

    id: str
    agent_id: str
    user_id: str | None
    type: str
    content: str
    metadata: dict[str, Any]
    tags: tuple[str, ...]
    source: str | None
    digest_key: bytes = b""

    @classmethod
    def of(cls, memory: Memory) -> Snapshot:
        return cls(memory.id, memory.agent_id, memory.user_id, memory.type, memory.content or "",
                   dict(memory.metadata_ or {}), tuple(memory.tags or ()), memory.source, memory.digest_key or b"")

    @property
    def digest(self) -> str:
        """HMAC-SHA256, under the memory's own digest key, of what a store holds (content, metadata,
        tags, type, user): unchanged → no write. Keyed like the audit log's content digests, so it
        confirms nothing about the text to whoever reads it, and a hard delete (which destroys the
        key) leaves nothing to check a guess against."""
        doc = {"content": self.content, "metadata": self.metadata, "tags": list(self.tags), "type": self.type,
               "user_id": self.user_id}
        return hmac.new(self.digest_key, json.dumps(doc, sort_keys=True, ensure_ascii=False).encode(),
                        hashlib.sha256).hexdigest()

    def store_metadata(self) -> dict[str, Any]:
        return {**self.metadata, MEMWARDEN_ID: self.id, "memwarden_tags": list(self.tags)}


@dataclass(frozen=True)
class Hit:
    ref: str
    similarity: float
    memwarden_id: str | None
    content: str | None = None


class Store(Protocol):
    def put(self, snap: Snapshot, existing_ref: str | None, maybe_written: bool = True,
            write_key: str = "") -> str: ...
    def delete(self, ref: str, snap_agent: str, snap_user: str | None) -> None: ...
    def holds(self, ref: str, memory_id: str, agent_id: str, user_id: str | None) -> bool: ...
    def find(self, snap: Snapshot) -> str | None: ...
    def search(self, agent_id: str, user_id: str | None, query: str, k: int) -> list[Hit]: ...
    def close(self) -> None: ...


def load_factory(path: str) -> Callable[..., Any]:
    """`module:callable` → the callable (import errors become StoreError with the path)."""
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise StoreError(f"factory must be module:callable, got {path!r}")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise StoreError(f"cannot load {path}: {exc}") from exc


# --- another Memwarden ----------------------------------------------------------------------------

class MemwardenStore:
    """A second Memwarden server (its own governance applies too: a write it stages is an error here)."""

    def __init__(self, url: str, api_key: str, timeout: float, rule: OutboundRule):
        from memwarden.client import Client, RetryPolicy

        # The client's httpx does not follow redirects; the transport checks each request's address.
        self.client = Client(url, api_key, timeout=timeout, retry=RetryPolicy(max_retries=0),
                             transport=OutboundTransport(rule))

    def put(self, snap: Snapshot, existing_ref: str | None, maybe_written: bool = True, write_key: str = "") -> str:
        from memwarden import errors

        try:
            # One key per delivery: its retries and a redo after a crash are answered with the first
            # write; a later delivery of the same memory (a resync) writes afresh.
            result = self.client.remember(
                agent_id=snap.agent_id, user_id=snap.user_id, content=snap.content, type=snap.type,
                metadata=snap.store_metadata(), tags=list(snap.tags), source=snap.source,
                idempotency_key=f"router-{write_key or snap.id}-{snap.digest[:32]}")
            if result.status != "live":
                raise StoreError(f"the remote server staged the write for its own review ({result.change_id})",
                                 "staged_remotely")
            if existing_ref and existing_ref != result.id:
                self.delete(existing_ref, snap.agent_id, snap.user_id)
            return result.id
        except errors.MemwardenError as exc:
            raise _remote_failure(exc) from exc

    def delete(self, ref: str, agent_id: str, user_id: str | None) -> None:
        from memwarden import errors

        try:
            self.client.forget(agent_id=agent_id, ids=[ref], reason="memwarden router: ended upstream")
        except errors.NotFound:
            return
        except errors.MemwardenError as exc:
            raise _remote_failure(exc) from exc

    def find(self, snap: Snapshot) -> str | None:
        return None  # the Idempotency-Key answers a replayed remember with the first one's id

    def holds(self, ref: str, memory_id: str, agent_id: str, user_id: str | None) -> bool:
        """Whether the other server still serves its item `ref` as live (a forgotten one is a 404)."""
        from memwarden import errors

        try:
            return getattr(self.client.get(ref), "status", "live") == "live"
        except errors.NotFound:
            return False
        except errors.MemwardenError as exc:
            raise _remote_failure(exc) from exc

    def content_of(self, ref: str) -> str | None:
        """The content the other server serves for its id (None: not there, or not live)."""
        from memwarden import errors

        try:
            return self.client.get(ref).content
        except errors.NotFound:
            return None
        except errors.MemwardenError as exc:
            raise _remote_failure(exc) from exc

    def search(self, agent_id: str, user_id: str | None, query: str, k: int) -> list[Hit]:
        from memwarden import errors

        try:
            result = self.client.recall(agent_id=agent_id, user_id=user_id, query=query, k=k, min_score=0.0)
        except errors.MemwardenError as exc:
            raise _remote_failure(exc) from exc
        return [Hit(h.id, h.similarity, (h.metadata or {}).get(MEMWARDEN_ID), h.content) for h in result.hits]

    def close(self) -> None:
        self.client.close()


# --- mem0 -----------------------------------------------------------------------------------------

class Mem0Store:
    """mem0's open-source `Memory` in process."""

    def __init__(self, memory: Any, infer: bool = False):
        self.memory = memory
        self.infer = infer

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> Mem0Store:
        if options.get("factory"):
            memory = load_factory(options["factory"])(**options.get("factory_args", {}))
        else:
            try:
                from mem0 import Memory
            except ImportError as exc:
                raise StoreError("the mem0 backend needs the `mem0` extra (pip install 'memwarden[mem0]')") from exc
            with open(options["config"], encoding="utf-8") as handle:
                memory = Memory.from_config(json.load(handle))
        return cls(memory, infer=bool(options.get("infer", False)))

    @staticmethod
    def _scope(agent_id: str, user_id: str | None) -> dict[str, str]:
        """mem0 2.x takes the entity ids as keywords of `add` and inside `filters` of reads."""
        return {"agent_id": agent_id, **({"user_id": user_id} if user_id else {})}

    def put(self, snap: Snapshot, existing_ref: str | None, maybe_written: bool = True, write_key: str = "") -> str:
        if existing_ref:
            self.delete(existing_ref, snap.agent_id, snap.user_id)
        found = self.find(snap) if maybe_written else None
        if found:
            return found
        try:
            result = self.memory.add([{"role": "user", "content": snap.content}], metadata=snap.store_metadata(),
                                     infer=self.infer, **self._scope(snap.agent_id, snap.user_id))
        except Exception as exc:  # the library raises whatever its vector store raises
            raise StoreError(f"mem0 add failed: {type(exc).__name__}: {exc}") from exc
        items = result.get("results", []) if isinstance(result, dict) else result
        if not items:
            raise StoreError("mem0 stored nothing (with infer on, its LLM may have judged the text redundant)")
        return str(items[0]["id"])

    def find(self, snap: Snapshot) -> str | None:
        try:
            found = self.memory.get_all(filters={**self._scope(snap.agent_id, snap.user_id), MEMWARDEN_ID: snap.id})
        except Exception as exc:
            raise StoreError(f"mem0 get_all failed: {type(exc).__name__}: {exc}") from exc
        items = found.get("results", []) if isinstance(found, dict) else found
        for item in items:
            if (item.get("metadata") or {}).get(MEMWARDEN_ID) == snap.id and item.get("memory") == snap.content:
                return str(item["id"])
        return None

    def items_for(self, memory_id: str, agent_id: str, user_id: str | None) -> list[tuple[str, str | None]]:
        """Every item mem0 holds tagged with Memwarden id `memory_id`: (mem0 id, its text)."""
        try:
            found = self.memory.get_all(filters={**self._scope(agent_id, user_id), MEMWARDEN_ID: memory_id})
        except Exception as exc:
            raise StoreError(f"mem0 get_all failed: {type(exc).__name__}: {exc}") from exc
        items = found.get("results", []) if isinstance(found, dict) else found
        return [(str(i["id"]), i.get("memory")) for i in items if (i.get("metadata") or {}).get(MEMWARDEN_ID) == memory_id]

    def process_local(self) -> str | None:
        """Why this mem0 keeps its vectors inside the process that opened it, or None (a server)."""
        vectors = getattr(getattr(self.memory, "config", None), "vector_store", None)
        provider, config = getattr(vectors, "provider", None), getattr(vectors, "config", None)

        def option(name: str) -> Any:
            return config.get(name) if isinstance(config, dict) else getattr(config, name, None)

        if provider == "qdrant" and not (option("url") or option("host")):
            return "its mem0 uses an embedded Qdrant (no url or host), held by one process"
        if provider == "faiss":
            return "its mem0 uses FAISS, held in one process"
        return None

    def content_of(self, ref: str) -> str | None:
        try:
            item = self.memory.get(ref)
        except Exception as exc:
            raise StoreError(f"mem0 get failed: {type(exc).__name__}: {exc}") from exc
        return item.get("memory") if item else None

    def holds(self, ref: str, memory_id: str, agent_id: str, user_id: str | None) -> bool:
        """Whether mem0 still returns the item by its id, or any item tagged with the memory's id."""
        return self.content_of(ref) is not None or bool(self.items_for(memory_id, agent_id, user_id))

    def delete(self, ref: str, agent_id: str, user_id: str | None) -> None:
        try:
            self.memory.delete(ref)
        except Exception as exc:
            if "not found" in str(exc).lower() or "not exist" in str(exc).lower():
                return
            raise StoreError(f"mem0 delete failed: {type(exc).__name__}: {exc}") from exc

    def search(self, agent_id: str, user_id: str | None, query: str, k: int) -> list[Hit]:
        try:
            found = self.memory.search(query, limit=k, filters=self._scope(agent_id, user_id))
        except Exception as exc:
            raise StoreError(f"mem0 search failed: {type(exc).__name__}: {exc}") from exc
        items = found.get("results", []) if isinstance(found, dict) else found
        return [Hit(str(i["id"]), float(i.get("score") or 0.0), (i.get("metadata") or {}).get(MEMWARDEN_ID),
                    i.get("memory")) for i in items]

    def close(self) -> None:
        """mem0's own close (its history database), and its vector store's client, which mem0 leaves
        open (an embedded Qdrant closed only at interpreter exit prints a traceback)."""
        for close in (getattr(self.memory, "close", None),
                      getattr(getattr(getattr(self.memory, "vector_store", None), "client", None), "close", None)):
            if callable(close):
                try:
                    close()
                except Exception:  # closing a store that failed must not hide the failure
                    pass


# --- memorywire -----------------------------------------------------------------------------------

class MemorywireStore:
    """Any memorywire `MemoryStore` (async), driven from a private event loop."""

    def __init__(self, store: Any):
        self.store = store
        self.loop = asyncio.new_event_loop()

    def _run(self, coro) -> Any:
        try:
            return self.loop.run_until_complete(coro)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"memorywire store failed: {type(exc).__name__}: {exc}") from exc

    def put(self, snap: Snapshot, existing_ref: str | None, maybe_written: bool = True, write_key: str = "") -> str:
        from memorywire.models import RememberRequest

        if existing_ref:
            self.delete(existing_ref, snap.agent_id, snap.user_id)
        found = self.find(snap) if maybe_written else None
        if found:
            return found
        response = self._run(self.store.remember(RememberRequest(
            agent_id=snap.agent_id, user_id=snap.user_id, type=snap.type, content=snap.content,
            metadata=snap.store_metadata(), source=snap.source)))
        if response.pending_approval:
            raise StoreError("the memorywire store staged the write for approval", "staged_remotely")
        return response.id

    def find(self, snap: Snapshot) -> str | None:
        from memorywire.models import RecallRequest

        response = self._run(self.store.recall(RecallRequest(
            agent_id=snap.agent_id, user_id=snap.user_id, query=snap.content, k=10,
            filter={MEMWARDEN_ID: snap.id})))
        for hit in response.results:
            if (hit.metadata or {}).get(MEMWARDEN_ID) == snap.id and hit.content == snap.content:
                return hit.id
        return None

    def delete(self, ref: str, agent_id: str, user_id: str | None) -> None:
        from memorywire.models import ForgetRequest

        self._run(self.store.forget(ForgetRequest(agent_id=agent_id, user_id=user_id, ids=[ref], hard_delete=True,
                                                  reason="memwarden router: ended upstream")))

    def holds(self, ref: str, memory_id: str, agent_id: str, user_id: str | None) -> bool:
        """Whether a recall filtered on the memory's id still returns the item (memorywire's
        protocol has no read by id; the filter narrows the search to what carries `memwarden_id`)."""
        from memorywire.models import RecallRequest

        response = self._run(self.store.recall(RecallRequest(
            agent_id=agent_id, user_id=user_id, query=memory_id, k=10, filter={MEMWARDEN_ID: memory_id})))
        return any(hit.id == ref or (hit.metadata or {}).get(MEMWARDEN_ID) == memory_id for hit in response.results)

    def search(self, agent_id: str, user_id: str | None, query: str, k: int) -> list[Hit]:
        from memorywire.models import RecallRequest

        response = self._run(self.store.recall(RecallRequest(agent_id=agent_id, user_id=user_id, query=query, k=k)))
        return [Hit(h.id, float(h.score), (h.metadata or {}).get(MEMWARDEN_ID),
                    h.content if isinstance(h.content, str) else None) for h in response.results]

    def close(self) -> None:
        close = getattr(self.store, "close", None)
        if close is not None:
            try:
                result = close()
                if asyncio.iscoroutine(result):
                    self.loop.run_until_complete(result)
            except Exception:  # closing a store that failed must not hide the failure
                pass
        self.loop.close()
