"""`/v1/memories`: the agents' memory API (contract §3). Handlers validate, then call services
in the thread pool (database and embedding work stay off the event loop); remember and recall, the
hot paths, take one trip there for the key's verification and their service together."""

from __future__ import annotations

from typing import Any, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from app.api.auth import Refusal, refusal_response
from app.api.hop import in_thread
from app.api.jsonio import json_body, json_response, read_json
from app.api.routes import (DEFERRED_AUTH, ApiRoute, ctx_of, note_key_write_here, parse_query, path_id,
                             require_scope)
from app.core.access import Principal
from app.services.router import backends
from app.services.memory import early_embedding, memories, reads, recall as recall_service, remembering
from app.services.audit import erasure, read_audit


def _one_hop(service: Callable, schema: str, scope: str, respond: Callable[[Any], Response], embeds: str):
    """A handler that runs the key's verification (when the auth middleware deferred it), the
    scope check, the body's parsing and validation and `service` in one trip to the thread pool:
    a trip costs a thread's wake-up, which a loaded machine makes dear. Refusals keep their order:
    401/429 first, then 403, then the body's 413/415/400/422, then the service's own.

    The body's field `embeds` (the text the service embeds) starts embedding as soon as the body
    is read, for a key verified here lately (`app.services.memory.early_embedding`)."""
    writes = not scope.endswith(":read")  # read replicas: a write makes the key's reads wait for it

    async def handler(request: Request, principal: Principal | None):
        authenticate = request.scope["state"][DEFERRED_AUTH] if principal is None else None
        try:
            raw, unread = await request.body(), None
        except Exception as exc:  # noqa: BLE001 — e.g. 413 while streaming: raised after the key's check
            raw, unread = b"", exc
        content_type, ctx = request.headers.get("content-type", ""), ctx_of(request)
        early = early_embedding.start(ctx, authenticate.token, raw, embeds) if authenticate and not unread else None

        def serve():
            caller = principal
            try:
                if authenticate is not None:
                    caller = authenticate()
                    require_scope(caller, scope)
                if unread is not None:
                    raise unread
                body = json_body(content_type, raw, schema)
            except BaseException:
                if early is not None:
                    early.drop()
                raise
            try:
                return service(ctx, caller, body, early=early)
            finally:  # the route notes the key's write only when it authenticated (not deferred)
                if writes and authenticate is not None:
                    note_key_write_here(ctx, caller)

        try:
            return respond(await in_thread(serve))
        except Refusal as refusal:
            return refusal_response(refusal.error, request.url.path)

    handler.__name__ = service.__name__
    return handler


def _outcome(outcome) -> Response:
    return json_response(outcome.body, outcome.status)


def _mutation(service: Callable, schema: str):
    async def handler(request: Request, principal: Principal):
        body = await read_json(request, schema)
        outcome = await run_in_threadpool(service, ctx_of(request), principal, body)
        return json_response(outcome.body, outcome.status)

    handler.__name__ = service.__name__
    return handler


async def list_memories(request: Request, principal: Principal):
    query = parse_query(request, "list.query")
    return json_response(await run_in_threadpool(reads.list_memories, ctx_of(request), principal, query))


def _memory_id(request: Request) -> str:
    return path_id(request, "memory_id", "mem", "memory")


async def get_memory(request: Request, principal: Principal):
    query = parse_query(request, "get.query")
    entry = await run_in_threadpool(reads.get_memory, ctx_of(request), principal, _memory_id(request),
                                    query.get("as_of"))
    return json_response(entry)


async def delete_memory(request: Request, principal: Principal):
    outcome = await run_in_threadpool(memories.delete_memory, ctx_of(request), principal, _memory_id(request))
    return json_response(outcome.body, outcome.status)


async def readers(request: Request, principal: Principal):
    query = parse_query(request, "readers.query")
    page = await run_in_threadpool(read_audit.readers, ctx_of(request), principal.tenant_id, _memory_id(request),
                                   query.get("limit", read_audit.DEFAULT_LIMIT), query.get("cursor"))
    return json_response(page)


async def history(request: Request, principal: Principal):
    return json_response(await run_in_threadpool(reads.history, ctx_of(request), principal, _memory_id(request)))


async def erasure_receipts(request: Request, principal: Principal):
    return json_response(await run_in_threadpool(erasure.receipts_of, ctx_of(request), principal, _memory_id(request)))


async def deliveries(request: Request, principal: Principal):
    return json_response(await run_in_threadpool(backends.deliveries_of, ctx_of(request), principal,
                                                 _memory_id(request)))


routes = [
    ApiRoute("/v1/memories/remember", _one_hop(remembering.remember, "remember.request", "memory:write", _outcome, "content"),
             method="POST", summary="Remember a memory (201), or stage it for review (202)", scope="memory:write",
             request="remember.request", responses={201: "remember.response", 202: "pending.response"}, one_hop=True),
    ApiRoute("/v1/memories/recall", _one_hop(recall_service.recall, "recall.request", "memory:read", json_response, "query"),
             method="POST", summary="Hybrid recall for one agent", scope="memory:read", request="recall.request",
             responses={200: "recall.response", 409: "error"}, one_hop=True, reads_memory=True),
    ApiRoute("/v1/memories/forget", _mutation(memories.forget, "forget.request"), method="POST",
             summary="Forget by ids and/or filter (soft by default)", scope="memory:write",
             request="forget.request", responses={200: "forget.response", 202: "pending.response"}),
    ApiRoute("/v1/memories/merge", _mutation(memories.merge, "merge.request"), method="POST",
             summary="Merge duplicates into a canonical memory", scope="memory:write",
             request="merge.request", responses={200: "merge.response", 202: "pending.response"}, reads_memory=True),
    ApiRoute("/v1/memories/expire", _mutation(memories.expire, "expire.request"), method="POST",
             summary="Apply a TTL policy", scope="memory:write", request="expire.request",
             responses={200: "expire.response", 202: "pending.response"}),
    ApiRoute("/v1/memories", list_memories, method="GET", summary="List an agent's memories, newest first",
             scope="memory:read", request="list.query", responses={200: "list.response", 409: "error"},
             reads_memory=True),
    ApiRoute("/v1/memories/{memory_id}", get_memory, method="GET", summary="Get one memory",
             scope="memory:read", ids={"memory_id": "mem"}, request="get.query", responses={200: "entry", 409: "error"},
             reads_memory=True),
    ApiRoute("/v1/memories/{memory_id}", delete_memory, method="DELETE", summary="Delete (forget) one memory",
             scope="memory:write", ids={"memory_id": "mem"},
             responses={200: "delete.response", 202: "pending.response"}),
    ApiRoute("/v1/memories/{memory_id}/history", history, method="GET", summary="A memory's audit trail",
             scope="memory:read", ids={"memory_id": "mem"}, responses={200: "history.response"}, reads_memory=True),
    ApiRoute("/v1/memories/{memory_id}/deliveries", deliveries, method="GET",
             summary="Where the memory was delivered (memory backends)", scope="memory:read",
             ids={"memory_id": "mem"}, responses={200: "deliveries.response"}),
    ApiRoute("/v1/memories/{memory_id}/erasure-receipts", erasure_receipts, method="GET",
             summary="The memory's signed erasure receipts: each store that confirmed it no longer holds it",
             scope="audit:read", ids={"memory_id": "mem"}, tag="audit",
             responses={200: "erasure-receipts.response"}),
    ApiRoute("/v1/memories/{memory_id}/readers", readers, method="GET",
             summary="Who read a memory: every read that returned it, newest first (the read audit)",
             scope="audit:read", ids={"memory_id": "mem"}, request="readers.query", tag="audit",
             responses={200: "readers.response"}),
]
