"""`/v1/changes`: staged changes for agents (status, withdraw) and for review keys (decide) — §4."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.api.jsonio import json_response, read_json
from app.api.routes import ApiRoute, ctx_of, parse_query, path_id
from app.core.access import Principal
from app.core.cursor import encode_cursor
from app.services.review import changes, diffs, review
from app.services.runtime.cursors import decode_cursor


def _change_id(request: Request) -> str:
    return path_id(request, "change_id", "chg", "change")


async def get_change(request: Request, principal: Principal):
    return json_response(await run_in_threadpool(
        changes.get_change_for_key, ctx_of(request), principal, _change_id(request)))


async def get_diff(request: Request, principal: Principal):
    return json_response(await run_in_threadpool(
        diffs.review_view_for_key, ctx_of(request), principal, _change_id(request)))


async def list_changes(request: Request, principal: Principal):
    query = parse_query(request, "changes.query")
    flt = changes.QueueFilter(status=query.get("status", "pending"), agent_id=query.get("agent_id"),
                             operation=query.get("operation"))
    after = decode_cursor(query["cursor"]) if query.get("cursor") else None
    limit = query.get("limit", 50)
    rows, total = await run_in_threadpool(changes.list_changes, ctx_of(request), principal.tenant_id,
                                          principal.agents, flt, limit, after)
    cursor = encode_cursor(rows[-1].submitted_at, rows[-1].id) if len(rows) == limit else None
    return json_response({"items": [changes.change_json(c) for c in rows], "total": total, "next_cursor": cursor})


def _decision(kind: str):
    async def handler(request: Request, principal: Principal):
        body = await read_json(request, f"{kind}.request")
        decision = review.DecisionRequest(decision=kind, reason=body.get("reason"), edits=body.get("edits"),
                                          seen_state=body.get("seen_state"), merge_into=body.get("merge_into"),
                                          supersedes=body.get("supersedes"),
                                          confirm_risk=bool(body.get("confirm_risk")),
                                          keep_both=bool(body.get("keep_both")),
                                          memory_ids=tuple(body["memory_ids"]) if "memory_ids" in body else None)
        change_id = _change_id(request)
        result = await run_in_threadpool(
            review.decide, ctx_of(request), tenant_id=principal.tenant_id, change_id=change_id,
            actor=principal.reviewer_actor, may_see=principal.may_act_for, request=decision,
            shown=diffs.key_shown(request.app.state.ctx, principal, change_id))
        return json_response(result)

    handler.__name__ = kind
    return handler


async def withdraw(request: Request, principal: Principal):
    return json_response(await run_in_threadpool(
        review.withdraw, ctx_of(request), tenant_id=principal.tenant_id, change_id=_change_id(request),
        actor=principal.actor, may_see=principal.may_act_for))


routes = [
    ApiRoute("/v1/changes", list_changes, method="GET", summary="Staged changes, oldest first",
             scope="memory:read", request="changes.query", responses={200: "changes.response"}, tag="governance"),
    ApiRoute("/v1/changes/{change_id}", get_change, method="GET", summary="One staged change",
             scope="memory:read", responses={200: "change"}, tag="governance", reads_memory=True),
    ApiRoute("/v1/changes/{change_id}/diff", get_diff, method="GET",
             summary="The change diffed against live state now, with its fingerprint", scope="memory:read",
             responses={200: "change-diff.response"}, tag="governance", reads_memory=True),
    ApiRoute("/v1/changes/{change_id}/withdraw", withdraw, method="POST", summary="Withdraw a pending change",
             scope="memory:write", responses={200: "change"}, tag="governance"),
    ApiRoute("/v1/changes/{change_id}/approve", _decision("approve"), method="POST",
             summary="Approve (medium/high risk, a hard delete or a lossy merge needs `confirm_risk`, else 422 "
                     "`confirmation_required`; a remember retires what it replaces unless `keep_both`)",
             scope="review:decide", request="approve.request", responses={200: "change"}, tag="governance",
             reads_memory=True),  # a stale review's 409 quotes the fresh diff
    ApiRoute("/v1/changes/{change_id}/reject", _decision("reject"), method="POST", summary="Reject",
             scope="review:decide", request="reject.request", responses={200: "change"}, tag="governance",
             reads_memory=True),
]
