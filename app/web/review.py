"""The review queue and change pages (contract §5). Pages work without JavaScript; htmx adds
live-appearing rows, in-place decisions and keyboard review. Permission checks live here, never
in templates: a client can ask for any partial."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import select
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from app.contracts import default_contracts
from app.core.cursor import decode_cursor, encode_cursor
from app.db.models import Change
from app.errors import AppError, Conflict, NotFound, ValidationFailed
from app.services import review
from app.services.users import Reviewer, TenantRole
from app.web.auth import current_user, pick_tenant
from app.web.templating import is_htmx, render, tenant_query

PAGE = 50
OPERATIONS = ("remember", "forget", "merge", "expire", "workspace_write", "workspace_delete")
TYPES = ("semantic", "episodic", "procedural", "emotional")


def _cursor(change: Change) -> str:
    return encode_cursor(change.submitted_at, change.id)


def _uncursor(value: str | None) -> tuple[datetime, str] | None:
    return decode_cursor(value, "/after") if value else None


def _filters(request: Request) -> tuple[review.QueueFilter, dict[str, str]]:
    q = request.query_params
    raw = {k: q.get(k, "").strip() for k in ("agent", "operation", "type", "rule", "age")}
    age = int(raw["age"]) if raw["age"].isdigit() else None
    flt = review.QueueFilter(
        status="pending", agent_id=raw["agent"][:128] or None,
        operation=raw["operation"] if raw["operation"] in OPERATIONS else None,
        memory_type=raw["type"] if raw["type"] in TYPES else None, policy_rule=raw["rule"][:64] or None,
        older_than_minutes=age)
    return flt, {k: v for k, v in raw.items() if v}


async def _page(request: Request):
    """The signed-in user's role, the filters shown, and one keyset page of matching changes."""
    user = current_user(request)
    role = pick_tenant(request, user, "read")
    flt, shown = _filters(request)
    after = _uncursor(request.query_params.get("after"))
    rows, total = await run_in_threadpool(review.list_changes, request.app.state.ctx, role.tenant_id, role.agents,
                                          flt, PAGE, after)
    return user, role, shown, rows, total


async def queue(request: Request):
    user, role, shown, rows, total = await _page(request)
    next_cursor = _cursor(rows[-1]) if len(rows) == PAGE else None
    context = {
        "role": role, "tenants": user.tenants_with("read"), "rows": rows, "total": total, "filters": shown,
        "operations": OPERATIONS, "types": TYPES, "can_decide": role.can("decide"),
        "next_url": f"/review?{tenant_query(role.tenant_name, shown, after=next_cursor)}" if next_cursor else None,
        # Only the last page polls: new changes arrive at its end (the queue is oldest first).
        "poll_url": f"/review/rows?{tenant_query(role.tenant_name, shown, after=_cursor(rows[-1]) if rows else '')}"
        if next_cursor is None else None,
        "qs": tenant_query(role.tenant_name, shown),
    }
    return render(request, "review/queue.html", context)


async def new_rows(request: Request):
    """Polled by the queue: rows submitted after the newest one shown, appended out of band."""
    _, role, shown, rows, total = await _page(request)
    newest = _cursor(rows[-1]) if rows else request.query_params.get("after", "")
    return render(request, "review/_new_rows.html", {
        "rows": rows, "total": total, "role": role, "can_decide": role.can("decide"), "qs": tenant_query(role.tenant_name, shown),
        "poll_url": f"/review/rows?{tenant_query(role.tenant_name, shown, after=newest)}"})


def _locate(request: Request, user: Reviewer, power: str) -> tuple[TenantRole, str]:
    """The tenant role under which this user may open the change in the URL; 404 if none."""
    change_id = request.path_params["change_id"]
    ctx = request.app.state.ctx
    with ctx.db.sessions() as session:
        row = session.execute(select(Change.tenant_id, Change.agent_id).where(Change.id == change_id)).first()
    if row is None or not user.may("read", row.tenant_id, row.agent_id):
        raise NotFound("change not found")
    role = user.role_in(row.tenant_id)
    if power != "read" and not role.can(power):
        raise NotFound("change not found")
    return role, change_id


async def detail(request: Request):
    user = current_user(request)
    role, change_id = await run_in_threadpool(_locate, request, user, "read")
    view = await run_in_threadpool(review.review_view, request.app.state.ctx, role.tenant_id, change_id,
                                   role.sees_agent)
    return render(request, "review/detail.html", {"role": role, "view": view, "change": view["change"],
                                                  "diff": view.get("diff"), "can_decide": role.can("decide"),
                                                  "message": None})


def _edits(form) -> dict[str, Any] | None:
    edits: dict[str, Any] = {}
    if form.get("edit") != "1":
        return None
    if form.get("content") is not None:
        edits["content"] = str(form["content"])
    if form.get("tags") is not None:
        edits["tags"] = [t.strip() for t in str(form["tags"]).split(",") if t.strip()]
    if form.get("type"):
        edits["type"] = str(form["type"])
    if form.get("metadata"):
        try:
            metadata = json.loads(str(form["metadata"]))
        except ValueError:
            raise ValidationFailed.at("/edits/metadata", "metadata must be a JSON object") from None
        if not isinstance(metadata, dict):
            raise ValidationFailed.at("/edits/metadata", "metadata must be a JSON object")
        edits["metadata"] = metadata
    default_contracts().validate("approve.request", {"edits": edits})
    return edits


async def decide(request: Request):
    user = current_user(request)
    role, change_id = await run_in_threadpool(_locate, request, user, "decide")
    kind = request.path_params["kind"]
    if kind not in ("approve", "reject"):
        raise NotFound("no such action")
    form = await request.form()
    decision = review.DecisionRequest(
        decision=kind, reason=str(form.get("reason", "")).strip() or None,
        edits=_edits(form) if kind == "approve" else None, seen_state=str(form.get("seen_state", "")) or None,
        merge_into=str(form.get("merge_into", "")) or None if kind == "approve" else None,
        supersedes=str(form.get("supersedes", "")) or None if kind == "approve" else None)
    ctx = request.app.state.ctx
    try:
        result = await run_in_threadpool(review.decide, ctx, tenant_id=role.tenant_id, change_id=change_id,
                                         actor=user.actor, may_see=role.sees_agent, request=decision)
    except Conflict as error:
        details = error.details if isinstance(error.details, dict) else {}
        view = await run_in_threadpool(review.review_view, ctx, role.tenant_id, change_id, role.sees_agent)
        message = ("Live memory changed while you were reviewing: this is the fresh diff. Review it again."
                   if details.get("reason") == "stale_review" else error.message)
        template = "review/_body.html" if is_htmx(request) else "review/detail.html"
        return render(request, template, {"role": role, "view": view, "change": view["change"],
                                          "diff": view.get("diff"), "can_decide": True, "message": message},
                      status=409, headers={"HX-Retarget": "#review-body", "HX-Reswap": "outerHTML"})
    next_id = await run_in_threadpool(_next_pending, ctx, role, change_id)
    if is_htmx(request):
        return render(request, "review/_decided.html", {"result": result, "next_id": next_id, "role": role})
    return RedirectResponse(f"/review/{next_id}" if next_id else f"/review?tenant={role.tenant_name}", 303)


def _next_pending(ctx, role: TenantRole, after_id: str) -> str | None:
    rows, _ = review.list_changes(ctx, role.tenant_id, role.agents, review.QueueFilter(), 5)
    return next((c.id for c in rows if c.id != after_id), None)


async def bulk(request: Request):
    """Approve or reject the selected rows, each decided and audited on its own."""
    user = current_user(request)
    role = pick_tenant(request, user, "decide")
    form = await request.form()
    action = str(form.get("action", ""))
    if action not in ("approve", "reject"):
        raise ValidationFailed.at("/action", "choose approve or reject")
    reason = str(form.get("reason", "")).strip() or None
    outcomes = []
    for change_id in form.getlist("change_id")[:200]:
        try:
            result = await run_in_threadpool(
                review.decide, request.app.state.ctx, tenant_id=role.tenant_id, change_id=str(change_id),
                actor=user.actor, may_see=role.sees_agent, request=review.DecisionRequest(decision=action, reason=reason))
            outcomes.append({"id": str(change_id), "ok": True, "status": result["status"]})
        except AppError as error:
            outcomes.append({"id": str(change_id), "ok": False, "status": error.message})
    if is_htmx(request):
        return render(request, "review/_bulk_result.html", {"outcomes": outcomes})
    return RedirectResponse(f"/review?tenant={role.tenant_name}", 303)


routes = [
    Route("/review", queue, methods=["GET"]),
    Route("/review/rows", new_rows, methods=["GET"]),
    Route("/review/bulk", bulk, methods=["POST"]),
    Route("/review/{change_id}", detail, methods=["GET"]),
    Route("/review/{change_id}/{kind:str}", decide, methods=["POST"]),
]
