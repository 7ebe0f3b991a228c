"""`POST /v1/recover`: quarantine what a compromised key, agent or source wrote in a window, and
everything derived from it, and offer its forgets, merges and expires for revert (scope `admin`;
app/services/audit/recover.py). `GET /v1/recover/report` and `GET /v1/recover/{id}/report`: the
incident report of a target or of a recover that ran (scope `audit:read`; app/services/audit/incident.py)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.api.jsonio import json_response, read_json
from app.api.routes import ApiRoute, ctx_of, parse_query, path_id
from app.core.access import Principal
from app.services.audit import incident
from app.services.audit import recover as recover_service


async def recover(request: Request, principal: Principal):
    body = await read_json(request, "recover.request")
    target = recover_service.parse_target(key=body.get("key"), agent=body.get("agent"), source=body.get("source"),
                                          since=body.get("since"), until=body.get("until"))
    report = await run_in_threadpool(recover_service.recover, ctx_of(request), tenant_id=principal.tenant_id,
                                     target=target, actor=principal.actor, dry_run=bool(body.get("dry_run")))
    return json_response(report)


async def target_report(request: Request, principal: Principal):
    spec = parse_query(request, "recover-report.query")
    target = recover_service.parse_target(key=spec.get("key"), agent=spec.get("agent"), source=spec.get("source"),
                                          since=spec.get("since"), until=spec.get("until"))
    return json_response(await run_in_threadpool(incident.report, ctx_of(request), principal.tenant_id, target))


async def recover_report(request: Request, principal: Principal):
    recover_id = path_id(request, "recover_id", "rcv", "recover")
    return json_response(await run_in_threadpool(incident.report_of_recover, ctx_of(request), principal.tenant_id,
                                                 recover_id))


routes = [
    ApiRoute("/v1/recover", recover, method="POST",
             summary="Recover from a compromised key, agent or source: quarantine what it wrote in a window and "
                     "what was derived from it, offer what it forgot, merged or expired for revert "
                     "(`dry_run`: report only)",
             scope="admin", request="recover.request", responses={200: "recover.response"}, tag="governance"),
    ApiRoute("/v1/recover/report", target_report, method="GET",
             summary="The incident report of a recover target: each recovered memory, what was derived from it, "
                     "and the reads that returned any of them (ids, never content)",
             scope="audit:read", request="recover-report.query", responses={200: "recover-report.response"},
             tag="governance"),
    ApiRoute("/v1/recover/{recover_id}/report", recover_report, method="GET",
             summary="The incident report of a recover that ran (its principal and window, from its audit entry)",
             scope="audit:read", responses={200: "recover-report.response", 404: "error"}, tag="governance",
             ids={"recover_id": "rcv"}),
]
