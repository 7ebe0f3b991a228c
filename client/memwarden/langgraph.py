"""LangGraph long-term memory on Memwarden: `MemwardenStore`, a `langgraph.store.base.BaseStore`.

    from memwarden.client import Client
    from memwarden.langgraph import MemwardenStore

    store = MemwardenStore(Client(url, api_key=key), agent_id="support-bot", user_index=1)
    graph = builder.compile(store=store)          # the graph's `store` is now governed memory

How LangGraph's model maps onto the memory API (install with `pip install 'memwarden[langgraph]'`):

- An item is one memory of the store's `agent_id`. Its `content` is `value["content"]` when that is
  a string, else the value as JSON (what recall embeds). The whole value, the namespace and the key
  are kept in `metadata` (`lg_value`, `lg_namespace`, `lg_key`), so `get` returns the value as put
  (after redaction: secret-shaped strings come back as `<REDACTED:label>`).
- Namespaces become tags: one per prefix of the namespace, plus one for the (namespace, key) pair
  (hashed, so any length fits), so a prefix search is a tag match. `user_index` picks the namespace
  element used as `user_id` (e.g. `("memories", "<user>")` → 1).
- `put` remembers the new value, then forgets earlier memories with the same key once the new one
  is live. When a policy stages the write (202), the old value stays live until a reviewer decides;
  `get` always answers the newest *live* value, and pending writes are invisible, as everywhere.
- `search(query=…)` is recall (hybrid, ranked, `score` set); without a query it lists newest first.
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
from datetime import datetime, timezone
from typing import Any, Iterable

from langgraph.store.base import (
    BaseStore, GetOp, Item, ListNamespacesOp, MatchCondition, Op, PutOp, Result, SearchItem, SearchOp,
)

from memwarden.client import Client
from memwarden.models import Memory

NS_TAG = "lgns:"
ITEM_TAG = "lgitem:"
PAGE = 500
_COMPARE = {"$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b, "$gt": lambda a, b: a > b,
            "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b}


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
                 approval_required: bool = False, source: str | None = "langgraph"):
        self.client = client
        self.agent_id = agent_id
        self.user_index = user_index
        self.memory_type = memory_type
        self.approval_required = approval_required
        self.source = source

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
        content = value["content"] if isinstance(value.get("content"), str) and value["content"] else \
            json.dumps(value, ensure_ascii=False, sort_keys=True)
        tags = [namespace_tag(op.namespace[:depth]) for depth in range(len(op.namespace) + 1)]
        saved = self.client.remember(
            agent_id=self.agent_id, user_id=self._user(op.namespace), type=self.memory_type, content=content,
            tags=[*tags, item_tag(op.namespace, op.key)], source=self.source,
            metadata={"lg_namespace": list(op.namespace), "lg_key": op.key, "lg_value": value},
            approval_required=self.approval_required or None)
        if not saved.pending and earlier:
            self.client.forget(agent_id=self.agent_id, ids=earlier)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        equal, compared = _split_filter(op.filter or {})
        wanted = op.offset + op.limit
        if op.query:
            hits = self.client.recall(agent_id=self.agent_id, query=op.query, k=min(1000, wanted * (2 if compared else 1)),
                                      tags=[namespace_tag(op.namespace_prefix)],
                                      filter={"lg_value": equal} if equal else None).hits
            found = [_item(h, score=h.score) for h in hits if _matches(h, compared)]
            return found[op.offset:wanted]
        found = []
        for memory in self.client.iter_memories(agent_id=self.agent_id, tag=namespace_tag(op.namespace_prefix),
                                                page_size=PAGE):
            if _matches(memory, {**{k: {"$eq": v} for k, v in equal.items()}, **compared}):
                found.append(_item(memory))
                if len(found) >= wanted:
                    break
        return found[op.offset:wanted]

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
