"""`/v1/audit`: export the key's tenant chain, list its checkpoints, publish the verifier key (contract §6),
and the decisions log (who approved or rejected what, as JSON or CSV)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse

from app.api.jsonio import json_response
from app.api.routes import ApiRoute, ctx_of, parse_query
from app.core.access import Principal
from app.errors import ValidationFailed
from app.services.audit import decisions, read_audit, state_check
from app.services.audit.audit import chain_for, list_checkpoints


async def export(request: Request, principal: Principal):
    spec = parse_query(request, "audit-export.query")
    if spec.get("to_seq") is not None and spec.get("from_seq", 1) > spec["to_seq"]:
        raise ValidationFailed.at("/from_seq", "from_seq must not be greater than to_seq")
    ctx = ctx_of(request)
    chain_id = chain_for(principal.tenant_id)
    # Signs a checkpoint and verifies the range before returning: a broken chain is a 409
    # `audit_chain_broken` here, never a 200 whose body stops part way.
    lines = await run_in_threadpool(ctx.audit.export, ctx.db.sessions, chain_id, from_seq=spec.get("from_seq", 1),
                                    to_seq=spec.get("to_seq"))
    filename = f"memwarden-audit-{principal.tenant_id}.jsonl"
    return StreamingResponse((line + "\n" for line in lines), media_type="application/x-ndjson",
                             headers={"content-disposition": f'attachment; filename="{filename}"'})


async def checkpoints(request: Request, principal: Principal):
    ctx = ctx_of(request)
    notes = await run_in_threadpool(list_checkpoints, ctx, chain_for(principal.tenant_id))
    return json_response({"chain_id": chain_for(principal.tenant_id), "vkey": ctx.audit.vkey, "checkpoints": notes})


async def decisions_log(request: Request, principal: Principal):
    spec = parse_query(request, "decisions.query")
    flt = decisions.filter_from(spec)
    page = await run_in_threadpool(decisions.list_decisions, ctx_of(request), principal.tenant_id, flt,
                                   spec.get("limit", decisions.DEFAULT_LIMIT), spec.get("cursor"))
    if spec.get("format") != "csv":
        return json_response(page)
    # The CSV carries the rows only; the next page's cursor travels in a header.
    headers = {"content-disposition": 'attachment; filename="memwarden-decisions.csv"'}
    if page["next_cursor"]:
        headers["x-next-cursor"] = page["next_cursor"]
    return PlainTextResponse("".join(decisions.csv_lines(page["items"])), media_type="text/csv", headers=headers)


async def access_log(request: Request, principal: Principal):
    spec = parse_query(request, "access.query")
    flt = read_audit.access_filter(spec)
    page = await run_in_threadpool(read_audit.access, ctx_of(request), principal.tenant_id, flt,
                                   spec.get("limit", read_audit.DEFAULT_LIMIT), spec.get("cursor"))
    return json_response(page)


async def state_check_report(request: Request, principal: Principal):
    ctx = ctx_of(request)
    report = await run_in_threadpool(state_check.run_check, ctx, principal.tenant_id, principal.actor, "api")
    return json_response({"chain_id": chain_for(principal.tenant_id), **report.to_json()})


async def public_key(request: Request, principal: Principal | None):
    ctx = ctx_of(request)
    if "application/json" in request.headers.get("accept", ""):
        return json_response({"vkey": ctx.audit.vkey, "algorithm": "Ed25519", "format": "C2SP signed-note vkey"})
    return PlainTextResponse(ctx.audit.vkey + "\n")


routes = [
    ApiRoute("/v1/audit/export", export, method="GET", summary="Export the tenant's audit chain as JSONL",
             scope="audit:read", request="audit-export.query", tag="audit",
             responses={200: {"application/x-ndjson": None}, 409: "error"}),
    ApiRoute("/v1/audit/checkpoints", checkpoints, method="GET", summary="Signed checkpoints of the tenant chain",
             scope="audit:read", responses={200: "audit-checkpoints.response"}, tag="audit"),
    ApiRoute("/v1/audit/decisions", decisions_log, method="GET",
             summary="The decisions log: who approved or rejected which change (JSON, or CSV with format=csv)",
             scope="audit:read", request="decisions.query", tag="audit",
             responses={200: {"application/json": "decisions.response", "text/csv": None}}),
    ApiRoute("/v1/audit/access", access_log, method="GET",
             summary="The read access log: who was returned which memories, newest read first",
             scope="audit:read", request="access.query", tag="audit", responses={200: "access.response"}),
    ApiRoute("/v1/audit/state-check", state_check_report, method="GET",
             summary="Hold every stored memory to its last audited state (edited, flipped, inserted, deleted rows)",
             scope="audit:read", responses={200: "state-check.response"}, tag="audit"),
    ApiRoute("/v1/audit/public-key", public_key, method="GET", summary="The Ed25519 checkpoint verifier key",
             scope=None, tag="audit", public=True,
             responses={200: {"text/plain": None, "application/json": "public-key.response"}}),
]
