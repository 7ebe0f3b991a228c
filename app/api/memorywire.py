"""`/memorywire/v0`: memorywire's wire format over the `/v1` memory services (contract, turn 3).

A memorywire client (its `MemoryRouter` through `memwarden.memorywire.MemwardenStore`, or any HTTP
caller) speaks memorywire's operation schemas here. Requests are the `/v1` request schemas, which
take every memorywire field (and Memwarden's extras); the handlers call the same services as
`/v1/memories`, so authentication, scopes, agent allow-lists, rate limits, redaction, screening,
review policies and audit are the same. Only the answers are reshaped into memorywire's:

- Governance goes through memorywire's channel: a staged write answers 200 with
  `pending_approval: true` and `approval_url` (the review page), never 202. A staged remember's
  `id` is the id the memory will have once approved (it is invisible until then).
- Timestamps are epoch milliseconds; `stores` names this server `memwarden`.
- Errors stay in Memwarden's envelope (memorywire defines none).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.api.jsonio import json_response, read_json
from app.api.routes import ApiRoute, ctx_of
from app.core.access import Principal
from app.core.timefmt import parse_ts
from app.services.memory import memories, recall as recall_service, remembering
from app.services.memory.memories import Outcome
from app.surfaces import MEMORYWIRE

STORE = "memwarden"
"""This server's name in memorywire's `stores`, `stores_queried` and `source_store`."""


def _epoch_ms(timestamp: str | None) -> int | None:
    return int(parse_ts(timestamp).timestamp() * 1000) if timestamp else None


def _approval_url(request: Request, outcome: Outcome) -> str | None:
    """The review page of a staged change, as `/v1` gives it (absolute under MEMWARDEN_PUBLIC_URL)."""
    if outcome.status != 202:
        return None
    return outcome.body["review_url"]


def _stores(outcome: Outcome) -> list[str]:
    """memorywire's `stores`: who applied the operation; nobody yet while it waits for review."""
    return [] if outcome.status == 202 else [STORE]


def _remember(request: Request, outcome: Outcome, body: dict[str, Any]) -> dict[str, Any]:
    pending = outcome.status == 202
    stored = None if pending else _epoch_ms(outcome.body["memory"]["created_at"])
    return {"id": outcome.body["id"], "stored_at": stored or int(time.time() * 1000),
            "stores": _stores(outcome), "pending_approval": pending,
            "approval_url": _approval_url(request, outcome)}


def _forget(request: Request, outcome: Outcome, body: dict[str, Any]) -> dict[str, Any]:
    forgotten = outcome.body.get("forgotten", [])
    return {"forgotten_ids": forgotten, "stores": [{"store": STORE, "count": len(forgotten)}],
            "hard_delete": bool(body.get("hard_delete")), "pending_approval": outcome.status == 202,
            "approval_url": _approval_url(request, outcome)}


def _merge(request: Request, outcome: Outcome, body: dict[str, Any]) -> dict[str, Any]:
    # memorywire publishes no merge response schema; this is its MergeResponse model, plus the
    # governance channel of its other responses (its models allow extra fields).
    return {"canonical": body["canonical"], "merged_count": len(outcome.body.get("merged", [])),
            "strategy_used": body.get("strategy", "keep_canonical"), "stores": _stores(outcome),
            "pending_approval": outcome.status == 202, "approval_url": _approval_url(request, outcome)}


def _expire(request: Request, outcome: Outcome, body: dict[str, Any]) -> dict[str, Any]:
    # Likewise memorywire's ExpireResponse model: a staged expire has matched rows and changed none.
    matched = outcome.body["matched"] if outcome.status == 202 else len(outcome.body["affected"])
    return {"matched_count": matched, "action_taken": body.get("action", "forget"), "stores": _stores(outcome),
            "pending_approval": outcome.status == 202, "approval_url": _approval_url(request, outcome)}


def _hit(hit: dict[str, Any]) -> dict[str, Any]:
    out = {"id": hit["id"], "type": hit["type"], "content": hit["content"], "score": hit["score"],
           "metadata": hit["metadata"], "created_at": _epoch_ms(hit["created_at"]),
           "source_store": hit.get("stores", [STORE])[0],  # with memory backends: the first store that had it
           "user_id": hit["user_id"], "tags": hit["tags"], "similarity": hit["similarity"]}
    if "supporting" in hit:
        out["supporting"] = hit["supporting"]
    return out


def _mutation(service: Callable, reshape: Callable, **options: Any) -> Callable:
    """A handler for the write `service` (`memories.forget`…), its answer reshaped by `reshape`;
    `options` go to the service."""
    async def handler(request: Request, principal: Principal):
        body = await read_json(request, f"{service.__name__}.request")
        outcome = await run_in_threadpool(lambda: service(ctx_of(request), principal, body, **options))
        return json_response(reshape(request, outcome, body))

    handler.__name__ = f"memorywire_{service.__name__}"
    return handler


async def memorywire_recall(request: Request, principal: Principal):
    body = await read_json(request, "recall.request")
    found = await run_in_threadpool(recall_service.recall, ctx_of(request), principal, body)
    return json_response({"results": [_hit(h) for h in found["hits"]], "fusion_used": found["fusion"],
                          "stores_queried": found.get("stores_queried", [STORE]),
                          "latency_ms": round(found["latency_ms"])})


def _route(verb: str, handler: Callable, summary: str, scope: str, reads_memory: bool = False) -> ApiRoute:
    """`POST /memorywire/v0/<verb>`: `/v1`'s request schema for the verb, memorywire's answer."""
    return ApiRoute(f"{MEMORYWIRE}{verb}", handler, method="POST", summary=summary, scope=scope,
                    request=f"{verb}.request", responses={200: f"memorywire-{verb}.response"}, tag="memorywire",
                    reads_memory=reads_memory)


routes = [
    _route("remember", _mutation(remembering.remember, _remember),
           "memorywire remember: stored, or staged for review (pending_approval)", "memory:write"),
    _route("recall", memorywire_recall, "memorywire recall (hops boost linked hits)", "memory:read",
           reads_memory=True),
    _route("forget", _mutation(memories.forget, _forget), "memorywire forget by ids and/or filter", "memory:write"),
    # memorywire's merge answer names no content, so it is no read (`memories.merge`).
    _route("merge", _mutation(memories.merge, _merge, shows_content=False),
           "memorywire merge duplicates into a canonical memory", "memory:write"),
    _route("expire", _mutation(memories.expire, _expire), "memorywire expire by a TTL policy", "memory:write"),
]
