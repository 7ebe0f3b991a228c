"""The audit page (auditor or admin): chain status, verify against the database, export as JSONL.

Contract §5 hooks: `audit-export` (download link), `audit-verify` (button), `audit-status`
(`verified` or `broken`). Verification and export are themselves audited after they run."""

from __future__ import annotations

import itertools
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from app.services import auditing
from app.web.auth import current_user, pick_tenant
from app.web.memories import wants_fragment
from app.web.templating import render


def _page(request: Request, role, tenants, status: dict, report=None, code: int = 200):
    return render(request, "audit/index.html", {"role": role, "tenants": tenants, "status": status,
                                                "report": report, "tenant_q": quote(role.tenant_name)},
                  status=code)


async def index(request: Request):
    user = current_user(request)
    role = pick_tenant(request, user, "audit")
    status = await run_in_threadpool(auditing.chain_status, request.app.state.ctx, role.tenant_id)
    return _page(request, role, user.tenants_with("audit"), status)


async def verify(request: Request):
    user = current_user(request)
    role = pick_tenant(request, user, "audit")
    ctx = request.app.state.ctx
    report = await run_in_threadpool(auditing.verify, ctx, tenant_id=role.tenant_id, actor=user.actor)
    if wants_fragment(request):
        return render(request, "audit/_status.html", {"report": report, "role": role})
    status = await run_in_threadpool(auditing.chain_status, ctx, role.tenant_id)
    return _page(request, role, user.tenants_with("audit"), status, report)


async def export(request: Request):
    user = current_user(request)
    role = pick_tenant(request, user, "audit")
    lines = auditing.export(request.app.state.ctx, tenant_id=role.tenant_id, actor=user.actor)
    # The first line (after the fresh checkpoint is signed) is produced before the response
    # starts, so a failure there is a proper error page rather than a truncated download.
    first = await run_in_threadpool(next, lines, None)
    body = itertools.chain([] if first is None else [first], lines)
    filename = f"memwarden-audit-{role.tenant_name}.jsonl"
    return StreamingResponse((line + "\n" for line in body), media_type="application/x-ndjson",
                             headers={"content-disposition": f'attachment; filename="{filename}"'})


routes = [
    Route("/audit", index, methods=["GET"]),
    Route("/audit/verify", verify, methods=["POST"]),
    Route("/audit/export", export, methods=["GET"]),
]
