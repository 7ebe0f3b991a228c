"""The incident report page (auditor or admin): for a recover that ran, or a principal and window,
each recovered memory, what was derived from it and the reads that returned any of them, with a
JSON download of the whole report. The page is capped (the totals say how much more the download
holds); the content excerpts it quotes are recorded in the read audit (`incident.shown`)."""

from __future__ import annotations

import json
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.ids import has_prefix
from app.errors import AppError, NotFound, ValidationFailed
from app.services.audit import incident, recover
from app.web.auth import current_user, pick_tenant
from app.web.reads import ReadingRoute
from app.web.templating import render

FIELDS = ("recover", "kind", "value", "since", "until")
ROOTS_SHOWN = 50
DERIVED_SHOWN = 50
READS_SHOWN = 200
RUNS_SHOWN = 50


def _form(request: Request) -> dict[str, str]:
    form = {name: request.query_params.get(name, "").strip()[:256] for name in FIELDS}
    form["kind"] = form["kind"] or "key"
    return form


def _wanted(form: dict[str, str]) -> bool:
    return bool(form["recover"] or form["value"])


def _compute(ctx, tenant_id: str, form: dict[str, str]) -> dict:
    """The report the form asks for: of a recover id, else of a principal and window (422 for bad input)."""
    if form["recover"]:
        if not has_prefix(form["recover"], "rcv"):
            raise NotFound("recover not found")
        return incident.report_of_recover(ctx, tenant_id, form["recover"])
    return incident.report(ctx, tenant_id, recover.parse_form_target(form["kind"], form["value"], form["since"],
                                                                     form["until"]))


def _capped(report: dict) -> dict:
    """What the page shows of `report`: the first roots, derived memories, reads and agent runs."""
    roots = [{**r, "derived_shown": r["derived"][:DERIVED_SHOWN]} for r in report["recovered"][:ROOTS_SHOWN]]
    return {"roots": roots, "reads": report["reads"][:READS_SHOWN], "agent_runs": report["agent_runs"][:RUNS_SHOWN]}


async def page(request: Request):
    user = current_user(request)
    role = pick_tenant(request, user, "audit")
    ctx = request.app.state.ctx
    form = _form(request)
    report = shown_report = None
    excerpts: dict[str, str] = {}
    error = None
    if _wanted(form):
        try:
            report = await run_in_threadpool(_compute, ctx, role.tenant_id, form)
            shown_report = _capped(report)
            ids = [i for r in shown_report["roots"] for i in [r["memory_id"], *(d["memory_id"] for d in r["derived_shown"])]]
            excerpts = await run_in_threadpool(lambda: incident.shown(
                ctx, tenant_id=role.tenant_id, actor=user.actor, memory_ids=ids, may_see=role.sees_agent,
                query={k: v for k, v in form.items() if v}))
        except AppError as exc:
            error = exc
    query = urlencode({"tenant": role.tenant_name, **{k: v for k, v in form.items() if v}})
    return render(request, "audit/incident.html", {
        "role": role, "tenants": user.tenants_with("audit"), "form": form, "report": report, "shown": shown_report,
        "excerpts": excerpts, "error": error, "query": query, "tenant_q": quote(role.tenant_name),
        "kinds": recover.KIND_LABELS,
        "caps": {"roots": ROOTS_SHOWN, "derived": DERIVED_SHOWN, "reads": READS_SHOWN, "runs": RUNS_SHOWN},
    }, status=error.status if error else 200)


async def download(request: Request):
    user = current_user(request)
    role = pick_tenant(request, user, "audit")
    form = _form(request)
    if not _wanted(form):
        raise ValidationFailed.at("/recover", "name a recover id, or a principal and window")
    report = await run_in_threadpool(_compute, request.app.state.ctx, role.tenant_id, form)
    name = report["recover_id"] or f"{report['principal']['kind']}"
    return Response(json.dumps(report, indent=2) + "\n", media_type="application/json",
                    headers={"content-disposition": f'attachment; filename="memwarden-incident-{name}.json"'})


routes = [
    ReadingRoute("/audit/incident", page, methods=["GET"]),
    Route("/audit/incident.json", download, methods=["GET"]),
]
