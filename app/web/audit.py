"""The audit pages (auditor or admin): chain status, verify against the database, export as JSONL;
a memory's erasure receipts (each store that confirmed it no longer holds it) and their download;
and the decisions log (who approved or rejected what), filtered, downloadable as CSV or JSON.

Contract §5 hooks: `audit-export` (download link), `audit-verify` (button), `audit-status`
(`verified` or `broken`). Verification and export are themselves audited after they run."""

from __future__ import annotations

import itertools
import json
from datetime import date, datetime, time, timedelta, timezone
from functools import partial
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from app.errors import AppError, ValidationFailed
from app.web import audit_view
from app.services.review import canaries
from app.services.audit import decisions, erasure
from app.web.auth import current_user, pick_tenant
from app.web.memories import wants_fragment
from app.web.templating import render


async def _page(request: Request, role, tenants, status: dict, report=None, code: int = 200, receipts=None):
    ctx = request.app.state.ctx
    rates = await run_in_threadpool(canaries.catch_rates, ctx, role.tenant_id)
    config = await run_in_threadpool(canaries.get_config, ctx, role.tenant_id)
    return render(request, "audit/index.html", {"role": role, "tenants": tenants, "status": status,
                                                "report": report, "tenant_q": quote(role.tenant_name),
                                                "receipts": receipts, "canaries": rates,
                                                "canaries_on": config["enabled"]}, status=code)


async def index(request: Request):
    user = current_user(request)
    role = pick_tenant(request, user, "audit")
    ctx = request.app.state.ctx
    status = await run_in_threadpool(audit_view.chain_status, ctx, role.tenant_id)
    receipts = None
    memory_id = request.query_params.get("receipts_for", "").strip()
    if memory_id:  # any memory of the tenant, ended or not: receipts are about memories that ended
        if len(memory_id) > 64:
            raise ValidationFailed.at("/receipts_for", "a memory id (mem_...)")
        rows = await run_in_threadpool(erasure.receipts_listed, ctx, tenant_id=role.tenant_id, memory_id=memory_id)
        receipts = {"memory_id": memory_id, "rows": rows}
    return await _page(request, role, user.tenants_with("audit"), status, receipts=receipts)


async def receipts_download(request: Request):
    user = current_user(request)
    role = pick_tenant(request, user, "audit")
    lines = erasure.export_lines(request.app.state.ctx, tenant_id=role.tenant_id)
    first = await run_in_threadpool(next, lines, None)
    body = itertools.chain([] if first is None else [first], lines)
    filename = f"memwarden-receipts-{role.tenant_name}.jsonl"
    return StreamingResponse((line + "\n" for line in body), media_type="application/x-ndjson",
                             headers={"content-disposition": f'attachment; filename="{filename}"'})


async def verify(request: Request):
    user = current_user(request)
    role = pick_tenant(request, user, "audit")
    ctx = request.app.state.ctx
    report = await run_in_threadpool(audit_view.verify, ctx, tenant_id=role.tenant_id, actor=user.actor)
    if wants_fragment(request):
        return render(request, "audit/_status.html", {"report": report, "role": role})
    status = await run_in_threadpool(audit_view.chain_status, ctx, role.tenant_id)
    return await _page(request, role, user.tenants_with("audit"), status, report)


async def export(request: Request):
    user = current_user(request)
    role = pick_tenant(request, user, "audit")
    lines = audit_view.export(request.app.state.ctx, tenant_id=role.tenant_id, actor=user.actor)
    # The first line (after the fresh checkpoint is signed) is produced before the response
    # starts, so a failure there is a proper error page rather than a truncated download.
    first = await run_in_threadpool(next, lines, None)
    body = itertools.chain([] if first is None else [first], lines)
    filename = f"memwarden-audit-{role.tenant_name}.jsonl"
    return StreamingResponse((line + "\n" for line in body), media_type="application/x-ndjson",
                             headers={"content-disposition": f'attachment; filename="{filename}"'})


FILTERS = ("reviewer", "status", "agent_id", "operation", "from", "to")


def _day(form: dict[str, str], name: str, *, end: bool) -> str | None:
    # The form's dates are whole UTC days: "to" includes its day, so it ends at the next midnight.
    if not form.get(name):
        return None
    try:
        day = date.fromisoformat(form[name])
    except ValueError:
        raise ValidationFailed.at(f"/{name}", f"{name} must be a date (YYYY-MM-DD)") from None
    at = datetime.combine(day, time(), tzinfo=timezone.utc) + (timedelta(days=1) if end and day < date.max else
                                                              timedelta())
    return at.isoformat()


def _decision_filter(request: Request):
    """The page's form (GET) as the filter's spec and the form values to show back."""
    form = {name: request.query_params.get(name, "").strip()[:200] for name in FILTERS}
    if form["status"] not in ("", "approved", "rejected"):
        raise ValidationFailed.at("/status", "status must be approved or rejected")
    spec = {k: v for k, v in form.items() if v and k not in ("from", "to")}
    spec["from"], spec["to"] = _day(form, "from", end=False), _day(form, "to", end=True)
    return decisions.filter_from(spec), form


async def decisions_page(request: Request):
    user = current_user(request)
    role = pick_tenant(request, user, "audit")
    form = {name: request.query_params.get(name, "") for name in FILTERS}
    page, error = {"items": [], "next_cursor": None}, None
    try:
        flt, form = _decision_filter(request)
        page = await run_in_threadpool(partial(decisions.list_decisions, with_names=True), request.app.state.ctx,
                                       role.tenant_id, flt, decisions.DEFAULT_LIMIT,
                                       request.query_params.get("cursor") or None)
    except AppError as exc:
        error = exc
    query = urlencode({"tenant": role.tenant_name, **{k: v for k, v in form.items() if v}})
    return render(request, "audit/decisions.html",
                  {"role": role, "tenants": user.tenants_with("audit"), "form": form, "page": page,
                   "operations": decisions.operations(),
                   "error": error, "query": query, "tenant_q": quote(role.tenant_name)},
                  status=error.status if error else 200)


async def decisions_download(request: Request):
    user = current_user(request)
    role = pick_tenant(request, user, "audit")
    flt, _ = _decision_filter(request)
    kind = request.url.path.rsplit(".", 1)[1]
    rows = decisions.all_decisions(request.app.state.ctx, role.tenant_id, flt)
    if kind == "csv":
        lines, media = decisions.csv_lines(rows), "text/csv"
    else:  # one JSON array, written a row at a time
        lines = itertools.chain(["["], (("," if n else "") + json.dumps(item) for n, item in enumerate(rows)),
                                ["]\n"])
        media = "application/json"
    # The first chunk is produced before the response starts, so a failure is an error page.
    first = await run_in_threadpool(next, lines, None)
    body = itertools.chain([] if first is None else [first], lines)
    filename = f"memwarden-decisions-{role.tenant_name}.{kind}"
    return StreamingResponse(body, media_type=media,
                             headers={"content-disposition": f'attachment; filename="{filename}"'})


routes = [
    Route("/audit", index, methods=["GET"]),
    Route("/audit/verify", verify, methods=["POST"]),
    Route("/audit/export", export, methods=["GET"]),
    Route("/audit/receipts.jsonl", receipts_download, methods=["GET"]),
    Route("/audit/decisions", decisions_page, methods=["GET"]),
    Route("/audit/decisions.csv", decisions_download, methods=["GET"]),
    Route("/audit/decisions.json", decisions_download, methods=["GET"]),
]
