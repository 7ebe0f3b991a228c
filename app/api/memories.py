"""`/v1/memories`: the agents' memory API (contract §3). Handlers validate, then call services
in the thread pool (database and embedding work stay off the event loop)."""

from __future__ import annotations

from typing import Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.api.jsonio import json_response, read_json
from app.api.routing import ApiRoute, ctx_of, parse_query, path_id
from app.core.access import Principal
from app.services import backends, memories, read_audit, recall as recall_service


def _mutation(service: Callable, schema: str):
    async def handler(request: Request, principal: Principal):
        body = await read_json(request, schema)
        outcome = await run_in_threadpool(service, ctx_of(request), principal, body)
        return json_response(outcome.body, outcome.status)

    handler.__name__ = service.__name__
    return handler


async def recall(request: Request, principal: Principal):
    body = await read_json(request, "recall.request")
    return json_response(await run_in_threadpool(recall_service.recall, ctx_of(request), principal, body))


async def list_memories(request: Request, principal: Principal):
    query = parse_query(request, "list.query")
    return json_response(await run_in_threadpool(memories.list_memories, ctx_of(request), principal, query))


def _memory_id(request: Request) -> str:
    return path_id(request, "memory_id", "mem", "memory")


async def get_memory(request: Request, principal: Principal):
    query = parse_query(request, "get.query")
    entry = await run_in_threadpool(memories.get_memory, ctx_of(request), principal, _memory_id(request),
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
    return json_response(await run_in_threadpool(memories.history, ctx_of(request), principal, _memory_id(request)))


async def deliveries(request: Request, principal: Principal):
    return json_response(await run_in_threadpool(backends.deliveries_of, ctx_of(request), principal,
                                                 _memory_id(request)))


routes = [
    ApiRoute("/v1/memories/remember", _mutation(memories.remember, "remember.request"), method="POST",
             summary="Remember a memory (201), or stage it for review (202)", scope="memory:write",
             request="remember.request", responses={201: "remember.response", 202: "pending.response"}),
    ApiRoute("/v1/memories/recall", recall, method="POST", summary="Hybrid recall for one agent",
             scope="memory:read", request="recall.request", responses={200: "recall.response", 409: "error"}),
    ApiRoute("/v1/memories/forget", _mutation(memories.forget, "forget.request"), method="POST",
             summary="Forget by ids and/or filter (soft by default)", scope="memory:write",
             request="forget.request", responses={200: "forget.response", 202: "pending.response"}),
    ApiRoute("/v1/memories/merge", _mutation(memories.merge, "merge.request"), method="POST",
             summary="Merge duplicates into a canonical memory", scope="memory:write",
             request="merge.request", responses={200: "merge.response", 202: "pending.response"}),
    ApiRoute("/v1/memories/expire", _mutation(memories.expire, "expire.request"), method="POST",
             summary="Apply a TTL policy", scope="memory:write", request="expire.request",
             responses={200: "expire.response", 202: "pending.response"}),
    ApiRoute("/v1/memories", list_memories, method="GET", summary="List an agent's memories, newest first",
             scope="memory:read", request="list.query", responses={200: "list.response", 409: "error"}),
    ApiRoute("/v1/memories/{memory_id}", get_memory, method="GET", summary="Get one memory",
             scope="memory:read", ids={"memory_id": "mem"}, request="get.query", responses={200: "entry", 409: "error"}),
    ApiRoute("/v1/memories/{memory_id}", delete_memory, method="DELETE", summary="Delete (forget) one memory",
             scope="memory:write", ids={"memory_id": "mem"},
             responses={200: "delete.response", 202: "pending.response"}),
    ApiRoute("/v1/memories/{memory_id}/history", history, method="GET", summary="A memory's audit trail",
             scope="memory:read", ids={"memory_id": "mem"}, responses={200: "history.response"}),
    ApiRoute("/v1/memories/{memory_id}/deliveries", deliveries, method="GET",
             summary="Where the memory was delivered (memory backends)", scope="memory:read",
             ids={"memory_id": "mem"}, responses={200: "deliveries.response"}),
    ApiRoute("/v1/memories/{memory_id}/readers", readers, method="GET",
             summary="Who read a memory: every read that returned it, newest first (the read audit)",
             scope="audit:read", ids={"memory_id": "mem"}, request="readers.query", tag="audit",
             responses={200: "readers.response"}),
]
