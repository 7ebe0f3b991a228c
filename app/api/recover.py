"""`POST /v1/recover`: quarantine what a compromised key, agent or source wrote in a window and
offer its forgets, merges and expires for revert (scope `admin`; app/services/recover.py)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.api.jsonio import json_response, read_json
from app.api.routing import ApiRoute, ctx_of
from app.core.access import Principal
from app.services import recover as recover_service


async def recover(request: Request, principal: Principal):
    body = await read_json(request, "recover.request")
    target = recover_service.parse_target(key=body.get("key"), agent=body.get("agent"), source=body.get("source"),
                                          since=body.get("since"), until=body.get("until"))
    report = await run_in_threadpool(recover_service.recover, ctx_of(request), tenant_id=principal.tenant_id,
                                     target=target, actor=principal.actor, dry_run=bool(body.get("dry_run")))
    return json_response(report)


routes = [
    ApiRoute("/v1/recover", recover, method="POST",
             summary="Recover from a compromised key, agent or source: quarantine what it wrote in a window, "
                     "offer what it forgot, merged or expired for revert (`dry_run`: report only)",
             scope="admin", request="recover.request", responses={200: "recover.response"}, tag="governance"),
]
