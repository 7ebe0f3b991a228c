"""LangGraph long-term memory on Memwarden: `MemwardenStore`, a `langgraph.store.base.BaseStore`.

    from memwarden.client import Client
    from memwarden.langgraph import MemwardenStore

    store = MemwardenStore(Client(url, api_key=key), agent_id="support-bot", user_index=1)
    graph = builder.compile(store=store)          # the graph's `store` is now governed memory

How LangGraph's model maps onto the memory API (install with `pip install 'memwarden-client[langgraph]'`):

- An item is one memory of the store's `agent_id`. Its `content` is the text recall embeds:
  `value["content"]` when that is a string; else the text at the store's `index={"fields": [...]}`
  paths or the put's `index=[...]` paths (LangGraph's path syntax, joined by newlines); else the
  value's string fields, one a line. The whole value, the namespace and the key are kept
  in `metadata` (`lg_value`, `lg_namespace`, `lg_key`), so `get` returns the value as put (after
  redaction: secret-shaped strings come back as `<REDACTED:label>`). `put(..., index=False)` (or
  index paths that hold no text) marks the item unindexed (`lg_index: false`): semantic search ranks
  it after every indexed item, with `score=None`, as LangGraph's `InMemoryStore` does (and leaves it
  out when a `min_score` asks for relevance).
- Namespaces become tags: one per prefix of the namespace, plus one for the (namespace, key) pair
  (hashed, so any length fits), so a prefix search is a tag match. `user_index` picks the namespace
  element used as `user_id` (e.g. `("memories", "<user>")` → 1).
- `put` remembers the new value, then forgets earlier memories with the same key once the new one
  is live; `put(namespace, key, None)` (`delete`) forgets them. When a policy holds the write for
  review (202), the old value stays live until a reviewer decides; approving it retires the key's
  old value on the server (the key's tag marks it the same item), so `get` and `search` then answer
  only the new one. `get` always answers the newest *live* value, and pending writes are invisible,
  as everywhere.
- A held `put` still returns None (`BaseStore.put`'s contract), and tells the caller two ways: it
  warns `HeldWrite` (a `UserWarning`; its `change_id`, `namespace` and `key` say which), and
  `store.held` maps each held (namespace, key) to its change id, the newest last, until
  `store.forget_held(namespace, key)` drops it. Turn the warning into an error with
  `warnings.simplefilter("error", HeldWrite)` where a graph must stop on a held write.
- `search(query=…)` is recall with no relevance floor (`min_score=-1`), re-ranked by cosine
  similarity, which is the item's `score`, as `InMemoryStore` ranks; without a query it lists newest
  first. `MemwardenStore(..., min_score=0.3)` keeps only hits at least that similar;
  `min_score=None` applies the server's calibrated relevance gate (a no-match query comes back empty).
  `filter` is metadata equality on the value's fields; `$ne`, `$gt`, `$gte`, `$lt`, `$lte` are
  applied client-side to what the server returned.
- `list_namespaces` reads the agent's items page by page (the API has no namespace index).
- TTLs are not supported (`supports_ttl = False`); use `expires_at` through the client for that.

`abatch` runs `batch` in a worker thread with the same blocking client.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import warnings
from datetime import datetime, timezone
from typing import Any, Iterable

from langgraph.store.base import (
    BaseStore, GetOp, Item, ListNamespacesOp, MatchCondition, Op, PutOp, Result, SearchItem, SearchOp,
)
from langgraph.store.base.embed import get_text_at_path

from memwarden.client import Client
from memwarden.models import Memory

NS_TAG = "lgns:"
ITEM_TAG = "lgitem:"
PAGE = 500
UNINDEXED = "lg_index"  # metadata flag, False on an item semantic search must not rank
MAX_K = 1000  # recall's largest k
_COMPARE = {"$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b, "$gt": lambda a, b: a > b,
            "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b}


class HeldWrite(UserWarning):
    """A `put` was held for review: nothing changed yet; `change_id` is the change a reviewer decides."""

    def __init__(self, change_id: str, namespace: tuple[str, ...], key: str):
        super().__init__(f"put {namespace!r}/{key!r} was held for review as change {change_id}; the old value "
                         "stays live until a reviewer approves it")
        self.change_id, self.namespace, self.key = change_id, namespace, key


def _digest(parts: list[str]) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()[:32]


def namespace_tag(prefix: tuple[str, ...]) -> str:
    """The tag every item whose namespace starts with `prefix` carries."""
    return NS_TAG + _digest(list(prefix))


def item_tag(namespace: tuple[str, ...], key: str) -> str:
    """The tag of one (namespace, key) pair."""
    return ITEM_TAG + _digest([*namespace, "\x00key", key])


class MemwardenStore(BaseStore):
    """A LangGraph store whose items are governed Memwarden memories (see the module docstring)."""

    supports_ttl = False

    def __init__(self, client: Client, *, agent_id: str, user_index: int | None = None, memory_type: str = "semantic",
                 approval_required: bool = False, source: str | None = "langgraph",
                 index: dict[str, Any] | None = None, min_score: float | None = -1):
        """`index` is LangGraph's index config; only its `fields` applies, because the server embeds
        with its own model (`dims`/`embed` are refused rather than silently ignored). `min_score` is
        recall's cosine floor for `search(query=…)`: -1 (the default) ranks everything in scope,
        None applies the server's relevance gate."""
        unsupported = set(index or {}) - {"fields"}
        if unsupported:
            raise ValueError(f"MemwardenStore index config takes only 'fields'; the server embeds, so "
                             f"{sorted(unsupported)} cannot apply")
        self.index_fields: list[str] | None = list((index or {}).get("fields") or []) or None
        self.min_score = min_score
        self.client = client
        self.agent_id = agent_id
        self.user_index = user_index
        self.memory_type = memory_type
        self.approval_required = approval_required
        self.source = source
        self.held: dict[tuple[tuple[str, ...], str], str] = {}
        """Each (namespace, key) whose latest `put` was held for review, and its change id."""

    def forget_held(self, namespace: tuple[str, ...], key: str) -> str | None:
        """Stop tracking a held put (decided, or no longer of interest); its change id, if it was held."""
        return self.held.pop((tuple(namespace), key), None)

    # --- BaseStore ---------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # --- operations --------------------------------------------------------------------------

    def _user(self, namespace: tuple[str, ...]) -> str | None:
        if self.user_index is None or self.user_index >= len(namespace):
            return None
        return namespace[self.user_index]

    def _same_key(self, namespace: tuple[str, ...], key: str) -> list[Memory]:
        return list(self.client.iter_memories(agent_id=self.agent_id, tag=item_tag(namespace, key), page_size=100))

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        page = self.client.list(agent_id=self.agent_id, tag=item_tag(namespace, key), limit=1)
        return _item(page.items[0]) if page.items else None

    def _put(self, op: PutOp) -> None:
        earlier = [m.id for m in self._same_key(op.namespace, op.key)]
        if op.value is None:
            if earlier:
                self.client.forget(agent_id=self.agent_id, ids=earlier)
            return
        value = dict(op.value)
        content, indexed = self._embedded_text(value, op.index)
        tags = [namespace_tag(op.namespace[:depth]) for depth in range(len(op.namespace) + 1)]
        metadata = {"lg_namespace": list(op.namespace), "lg_key": op.key, "lg_value": value}
        if not indexed:
            metadata[UNINDEXED] = False
        saved = self.client.remember(
            agent_id=self.agent_id, user_id=self._user(op.namespace), type=self.memory_type, content=content,
            tags=[*tags, item_tag(op.namespace, op.key)], source=self.source, metadata=metadata,
            approval_required=self.approval_required or None)
        if saved.pending:
            # The server retires the key's old value when a reviewer approves this write (same key tag).
            self.held[(tuple(op.namespace), op.key)] = saved.change_id
            warnings.warn(HeldWrite(saved.change_id, tuple(op.namespace), op.key), stacklevel=4)
            return
        self.held.pop((tuple(op.namespace), op.key), None)
        if earlier:
            self.client.forget(agent_id=self.agent_id, ids=earlier)

    def _embedded_text(self, value: dict[str, Any], index: Any) -> tuple[str, bool]:
        """The memory's content (what recall embeds) and whether semantic search may rank it."""
        paths = None if index is False else (list(index) if index is not None else self.index_fields)
        if index is False or not paths:
            return _document_text(value), index is not False
        texts = [text for path in paths for text in get_text_at_path(value, path) if text.strip()]
        if not texts:  # nothing to embed at those paths: findable by listing only, as in LangGraph
            return _document_text(value), False
        return "\n".join(texts), True

    def _search(self, op: SearchOp) -> list[SearchItem]:
        equal, compared = _split_filter(op.filter or {})
        wanted = op.offset + op.limit
        if op.query:
            ranked, complete = self._ranked(op, equal, compared, wanted)
            if complete and len(ranked) < wanted and self.min_score == -1:
                # Every indexed item ranked: unindexed ones follow, unscored (not when relevance was asked for).
                ranked += [_item(m) for m in self._listed(op, equal, compared, wanted - len(ranked),
                                                          unindexed_only=True)]
            return ranked[op.offset:wanted]
        return [_item(m) for m in self._listed(op, equal, compared, wanted)][op.offset:wanted]

    def _ranked(self, op: SearchOp, equal: dict[str, Any], compared: dict[str, dict[str, Any]],
                wanted: int) -> tuple[list[SearchItem], bool]:
        """Indexed items by cosine similarity to the query, and whether that is all of them.

        Recall returns its top k by fused (vector + keyword) rank; any memory among the top
        ceil(k/2) by similarity is always inside that top k (RRF: at most 2r-2 memories outrank the
        r-th by similarity), so that prefix, re-sorted by similarity, is exact (for memories no reviewer
        demoted: a demotion scales the fused score down). k grows until the prefix holds `wanted`
        matching items or the scope is exhausted."""
        k = min(MAX_K, max(2 * wanted, 20))
        while True:
            hits = self.client.recall(agent_id=self.agent_id, query=op.query, k=k,
                                      tags=[namespace_tag(op.namespace_prefix)],
                                      filter={"lg_value": equal} if equal else None, min_score=self.min_score).hits
            complete = len(hits) < k
            hits.sort(key=lambda h: -(h.similarity if h.similarity is not None else h.score))
            exact = hits if complete or k == MAX_K else hits[:(k + 1) // 2]
            found = [_item(h, score=h.similarity) for h in exact
                     if h.metadata.get(UNINDEXED) is not False and _matches(h, compared)]
            if len(found) >= wanted or complete or k == MAX_K:
                return found, complete
            k = min(MAX_K, k * 4)

    def _listed(self, op: SearchOp, equal: dict[str, Any], compared: dict[str, dict[str, Any]],
                wanted: int, unindexed_only: bool = False) -> list[Memory]:
        """Up to `wanted` items under the prefix that match the filter, newest first."""
        found = []
        for memory in self.client.iter_memories(agent_id=self.agent_id, tag=namespace_tag(op.namespace_prefix),
                                                page_size=PAGE):
            if unindexed_only and memory.metadata.get(UNINDEXED) is not False:
                continue
            if _matches(memory, {**{k: {"$eq": v} for k, v in equal.items()}, **compared}):
                found.append(memory)
                if len(found) >= wanted:
                    break
        return found

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        seen: dict[tuple[str, ...], None] = {}
        for memory in self.client.iter_memories(agent_id=self.agent_id, tag=namespace_tag(()), page_size=PAGE):
            namespace = tuple(memory.metadata.get("lg_namespace") or ())
            if all(_condition(namespace, c) for c in op.match_conditions or ()):
                seen[namespace[:op.max_depth] if op.max_depth is not None else namespace] = None
        return sorted(seen)[op.offset:op.offset + op.limit]


def _item(memory: Memory, score: float | None = None) -> SearchItem:
    meta = memory.metadata
    created = memory.created_at or datetime.now(timezone.utc)
    return SearchItem(namespace=tuple(meta.get("lg_namespace") or ()), key=meta.get("lg_key", memory.id),
                      value=meta.get("lg_value") or {"content": memory.content}, created_at=created,
                      updated_at=memory.updated_at or created, score=score)


def _document_text(value: dict[str, Any]) -> str:
    """What to embed when no index paths are given: the `content` string, else the value's string
    fields, depth first, one a line, else the value as JSON. Not JSON syntax (it dilutes the
    embedding) and not `key: value` lines (screening reads "score: 5" after "score: 3" in another
    item as a contradiction and stages the write)."""
    if isinstance(value.get("content"), str) and value["content"].strip():
        return value["content"]
    texts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)
        elif isinstance(node, str) and node.strip():
            texts.append(node)

    walk(value)
    return "\n".join(texts) if texts else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _split_filter(flt: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Equality the server can apply (JSONB containment) and comparisons applied here."""
    equal, compared = {}, {}
    for field, condition in flt.items():
        if isinstance(condition, dict) and condition and all(k in _COMPARE for k in condition):
            if set(condition) == {"$eq"}:
                equal[field] = condition["$eq"]
            else:
                compared[field] = condition
        else:
            equal[field] = condition
    return equal, compared


def _matches(memory: Memory, compared: dict[str, dict[str, Any]]) -> bool:
    value = memory.metadata.get("lg_value") or {}
    for field, condition in compared.items():
        if field not in value:
            return False
        for op, operand in condition.items():
            try:
                if not _COMPARE[op](value[field], operand):
                    return False
            except TypeError:
                return False
    return True


def _condition(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[:len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path):]
    return all(p == "*" or p == n for p, n in zip(path, part))
