"""OpenWOP MemoryAdapter (RFC 0004) over opaque refs, and runs (contract §7).

A thin adapter: the OpenWOP wire shape (camelCase; entries `{id, content, tags, createdAt,
expiresAt?}`) is translated to and from the memory services, so policy, redaction, review and
audit behave exactly as on `/v1/memories`. Reads take `snapshot=` (RFC 3339 or epoch ms) or
`run_id=` (the run's start instant) and answer as of that instant.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.api.jsonio import json_response, read_json
from app.api.routes import ApiRoute, ctx_of, parse_query
from app.core.access import Principal
from app.core.ids import has_prefix
from app.core.timefmt import format_ts, parse_ts
from app.errors import NotFound, ValidationFailed
from app.services.memory import memories, reads, refs, remembering
from app.services.runtime.context import AppContext

# OpenWOP request field → memorywire field of `remember`.
PUT_FIELDS = {"type": "type", "tags": "tags", "metadata": "metadata", "expiresAt": "expires_at", "runId": "run_id",
              "nodeId": "node_id", "confidence": "confidence", "source": "source",
              "approvalRequired": "approval_required"}


def openwop_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A contract Entry in OpenWOP shape."""
    out = {"id": entry["id"], "content": entry["content"], "tags": entry["tags"], "createdAt": entry["created_at"]}
    if entry.get("expires_at"):
        out["expiresAt"] = entry["expires_at"]
    return out


def _pending(body: dict[str, Any]) -> dict[str, Any]:
    out = {"status": "pending", "changeId": body["change_id"], "reviewUrl": body["review_url"]}
    if body.get("id"):
        out["id"] = body["id"]
    return out


def _as_of(ctx: AppContext, principal: Principal, query: dict[str, Any]) -> str | None:
    """The read instant from `snapshot=` or `run_id=` (not both), as the services take it."""
    if "snapshot" in query and "run_id" in query:
        raise ValidationFailed("give `snapshot` or `run_id`, not both",
                               details=[{"path": "/snapshot", "message": "conflicts with run_id"},
                                        {"path": "/run_id", "message": "conflicts with snapshot"}])
    if "run_id" in query:
        return format_ts(refs.run_snapshot(ctx, principal, query["run_id"]))
    if "snapshot" in query:
        raw = query["snapshot"]
        try:
            return format_ts(parse_ts(int(raw) if raw.isdigit() else raw))
        except ValueError:
            raise ValidationFailed.at("/snapshot", "not an RFC 3339 timestamp or epoch milliseconds") from None
    return None


def _entry_in_scope(ctx: AppContext, principal: Principal, scope: refs.RefScope, memory_id: str,
                    as_of: str | None) -> dict[str, Any]:
    if not has_prefix(memory_id, "mem"):
        raise NotFound("entry not found")
    entry = reads.get_memory(ctx, principal, memory_id, as_of)
    if entry["agent_id"] != scope.agent_id or (scope.user_id is not None and entry["user_id"] != scope.user_id):
        raise NotFound("entry not found")
    return entry


def _scope_body(scope: refs.RefScope) -> dict[str, Any]:
    body: dict[str, Any] = {"agent_id": scope.agent_id}
    if scope.user_id is not None:
        body["user_id"] = scope.user_id
    return body


# --- services in the OpenWOP shape (run in the thread pool) --------------------------------------

def list_entries(ctx: AppContext, principal: Principal, ref: str, query: dict[str, Any]) -> dict[str, Any]:
    scope = refs.resolve(ctx, principal, ref)
    body = {**_scope_body(scope), **{k: query[k] for k in ("limit", "cursor", "tag") if k in query}}
    as_of = _as_of(ctx, principal, query)
    if as_of:
        body["as_of"] = as_of
    page = reads.list_memories(ctx, principal, body)
    return {"entries": [openwop_entry(e) for e in page["items"]], "nextCursor": page["next_cursor"]}


def get_entry(ctx: AppContext, principal: Principal, ref: str, memory_id: str, query: dict[str, Any]) -> dict:
    scope = refs.resolve(ctx, principal, ref)
    return openwop_entry(_entry_in_scope(ctx, principal, scope, memory_id, _as_of(ctx, principal, query)))


def put_entry(ctx: AppContext, principal: Principal, ref: str, body: dict[str, Any]) -> tuple[int, dict]:
    scope = refs.resolve(ctx, principal, ref)
    remember = {**_scope_body(scope), "type": "semantic", "content": body["content"]}
    remember.update({wire: body[field] for field, wire in PUT_FIELDS.items() if field in body})
    outcome = remembering.remember(ctx, principal, remember)
    if outcome.status == 201:
        return 201, openwop_entry(outcome.body["memory"])
    return outcome.status, _pending(outcome.body)


def delete_entry(ctx: AppContext, principal: Principal, ref: str, memory_id: str) -> tuple[int, dict]:
    scope = refs.resolve(ctx, principal, ref)
    _entry_in_scope(ctx, principal, scope, memory_id, None)
    outcome = memories.forget(ctx, principal, {**_scope_body(scope), "ids": [memory_id]})
    if outcome.status != 200:
        return outcome.status, _pending(outcome.body)
    if memory_id not in outcome.body["forgotten"]:
        raise NotFound("entry not found")
    return 200, {"deleted": True, "id": memory_id}


# --- handlers ------------------------------------------------------------------------------------

async def ref_lookup(request: Request, principal: Principal):
    query = parse_query(request, "refs.query")
    return json_response(await run_in_threadpool(refs.get_ref, ctx_of(request), principal, query["agent_id"],
                                                 query.get("user_id")))


async def ref_entries_list(request: Request, principal: Principal):
    query = parse_query(request, "ref-entries.query")
    return json_response(await run_in_threadpool(list_entries, ctx_of(request), principal,
                                                 request.path_params["memory_ref"], query))


async def ref_entry_get(request: Request, principal: Principal):
    query = parse_query(request, "ref-entry.query")
    return json_response(await run_in_threadpool(get_entry, ctx_of(request), principal,
                                                 request.path_params["memory_ref"],
                                                 request.path_params["memory_id"], query))


async def ref_entry_post(request: Request, principal: Principal):
    body = await read_json(request, "ref-put.request")
    status, out = await run_in_threadpool(put_entry, ctx_of(request), principal, request.path_params["memory_ref"],
                                          body)
    return json_response(out, status)


async def ref_entry_delete(request: Request, principal: Principal):
    status, out = await run_in_threadpool(delete_entry, ctx_of(request), principal,
                                          request.path_params["memory_ref"], request.path_params["memory_id"])
    return json_response(out, status)


async def run_start(request: Request, principal: Principal):
    body = await read_json(request, "run.request")
    run = await run_in_threadpool(refs.start_run, ctx_of(request), principal, body.get("agent_id"))
    return json_response(run, 201)


ENTRIES = "/v1/refs/{memory_ref}/entries"
routes = [
    ApiRoute("/v1/refs", ref_lookup, method="GET", tag="openwop", scope="memory:read", request="refs.query",
             summary="The opaque memory ref of an (agent, user) scope", responses={200: "ref.response"}),
    ApiRoute(ENTRIES, ref_entries_list, method="GET", tag="openwop", scope="memory:read", request="ref-entries.query",
             summary="Entries behind a ref, newest first (snapshot= / run_id= for run-start reads)",
             responses={200: "ref-entries.response"}, reads_memory=True),
    ApiRoute(ENTRIES, ref_entry_post, method="POST", tag="openwop", scope="memory:write", request="ref-put.request",
             summary="Write an entry (201), or stage it for review (202)",
             responses={201: "ref-entry", 202: "ref-pending.response"}),
    ApiRoute(ENTRIES + "/{memory_id}", ref_entry_get, method="GET", tag="openwop", scope="memory:read",
             request="ref-entry.query", summary="One entry behind a ref", responses={200: "ref-entry"},
             reads_memory=True),
    ApiRoute(ENTRIES + "/{memory_id}", ref_entry_delete, method="DELETE", tag="openwop", scope="memory:write",
             summary="Forget an entry (202 when review is required)",
             responses={200: "delete.response", 202: "ref-pending.response"}),
    ApiRoute("/v1/runs", run_start, method="POST", tag="openwop", scope="memory:read", request="run.request",
             summary="Start a run; its reads (run_id=) see the memory as of its start",
             responses={201: "run.response"}),
]
