"""The review queue and change pages (contract §5). Pages work without JavaScript; htmx adds
live-appearing rows, in-place decisions, counts that follow every decision and keyboard review.
Permission checks live here, never in templates: a client can ask for any partial."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import select
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from app.contracts import default_contracts
from app.core import jsontext
from app.core.cursor import encode_cursor, pack, unpack
from app.core.timefmt import utcnow
from app.db.models import Change
from app.errors import AppError, Conflict, NotFound, ValidationFailed
from app.services import browse, review
from app.services.cursors import decode_cursor
from app.services.users import Reviewer, TenantRole
from app.web.auth import current_user, pick_tenant
from app.web.templating import is_htmx, render, risk_of, tenant_query

PAGE = 50
OPERATIONS = ("remember", "forget", "merge", "expire", "workspace_write", "workspace_delete")
TYPES = ("semantic", "episodic", "procedural", "emotional")
SORTS = {"oldest": "Oldest first", "newest": "Newest first", "risk": "Highest risk first"}
RISKS = {"low": "low or higher", "medium": "medium or higher", "high": "high"}
CHANGE_ID = re.compile(r"^chg_[0-9a-z]{1,64}$")


# --- the queue -----------------------------------------------------------------------------------

def _cursor(change: Change, sort: str = "oldest") -> str:
    """Where the next page starts, in the queue's sort order (opaque to clients)."""
    if sort != "risk":
        return encode_cursor(change.submitted_at, change.id)
    return pack([review.RISK_RANK.get(change.risk_level, 0), change.submitted_at.isoformat(), change.id])


def _uncursor(value: str | None, sort: str = "oldest") -> tuple | None:
    if not value:
        return None
    if sort != "risk":
        return decode_cursor(value, "/after")
    try:
        rank, ts, change_id = unpack(value)
        if not isinstance(rank, int) or not isinstance(change_id, str) or not CHANGE_ID.match(change_id):
            raise ValueError(change_id)  # forged: only ids this page issued reach SQL
        return rank, datetime.fromisoformat(ts), change_id
    except (ValueError, TypeError):
        raise ValidationFailed.at("/after", "not a cursor returned by this page") from None


def _filters(request: Request) -> tuple[review.QueueFilter, dict[str, str]]:
    q = request.query_params
    raw = {k: q.get(k, "").strip() for k in ("agent", "operation", "type", "rule", "age", "risk", "sort")}
    age = int(raw["age"]) if raw["age"].isascii() and raw["age"].isdigit() and len(raw["age"]) < 7 else None
    flt = review.QueueFilter(
        status="pending", agent_id=raw["agent"][:128] or None,
        operation=raw["operation"] if raw["operation"] in OPERATIONS else None,
        memory_type=raw["type"] if raw["type"] in TYPES else None, policy_rule=raw["rule"][:64] or None,
        older_than_minutes=age, min_risk=raw["risk"] if raw["risk"] in RISKS else None,
        sort=raw["sort"] if raw["sort"] in SORTS else "oldest")
    shown = {k: v for k, v in raw.items() if v}
    if shown.get("sort") == "oldest":
        del shown["sort"]  # the default stays out of URLs
    return flt, shown


async def _page(request: Request, flt: review.QueueFilter, after: tuple | None):
    """The signed-in user's role and one keyset page of pending changes matching `flt`, with previews."""
    user = current_user(request)
    role = pick_tenant(request, user, "read")
    ctx = request.app.state.ctx
    rows, total = await run_in_threadpool(review.list_changes, ctx, role.tenant_id, role.agents, flt, PAGE, after)
    previews = await run_in_threadpool(browse.queue_previews, ctx, role.tenant_id, rows)
    return user, role, rows, total, previews


def _newest(rows: list[Change]) -> str:
    """Cursor of the most recently submitted row shown: the poller asks for anything newer."""
    return _cursor(max(rows, key=lambda c: (c.submitted_at, c.id))) if rows else ""


async def queue(request: Request):
    flt, shown = _filters(request)
    after_param = request.query_params.get("after")
    user, role, rows, total, previews = await _page(request, flt, _uncursor(after_param, flt.sort))
    next_cursor = _cursor(rows[-1], flt.sort) if len(rows) == PAGE else None
    # New changes arrive last in oldest-first order and first in newest-first order, so only the
    # page where they belong polls. Under the risk sort they are added at the end, marked new.
    polls = not after_param if flt.sort == "newest" else next_cursor is None
    context = {
        "role": role, "tenants": user.tenants_with("read"), "rows": rows, "total": total, "filters": shown,
        "previews": previews, "operations": OPERATIONS, "types": TYPES, "sorts": SORTS, "risks": RISKS,
        "sort": flt.sort, "can_decide": role.can("decide"), "now": utcnow(), "fresh": False,
        "next_url": f"/review?{tenant_query(role.tenant_name, shown, after=next_cursor)}" if next_cursor else None,
        "poll_url": f"/review/rows?{tenant_query(role.tenant_name, shown, since=_newest(rows))}" if polls else None,
        "qs": tenant_query(role.tenant_name, shown),
    }
    return render(request, "review/queue.html", context)


async def new_rows(request: Request):
    """Polled by the queue: rows submitted after the newest one shown are added and rows decided
    meanwhile (by anyone) removed, out of band, with fresh counts."""
    flt, shown = _filters(request)
    since = request.query_params.get("since", "")
    _, role, rows, total, previews = await _page(request, replace(flt, sort="oldest"), _uncursor(since))
    listed = [i for i in request.query_params.getlist("shown")[:PAGE] if CHANGE_ID.match(i)]
    pending = await run_in_threadpool(browse.still_pending, request.app.state.ctx, role.tenant_id, listed)
    return render(request, "review/_new_rows.html", {
        "gone": [i for i in listed if i not in pending],
        "rows": rows, "total": total, "role": role, "can_decide": role.can("decide"), "previews": previews,
        "now": utcnow(), "fresh": True, "position": "afterbegin" if flt.sort == "newest" else "beforeend",
        "poll_url": f"/review/rows?{tenant_query(role.tenant_name, shown, since=_newest(rows) or since)}"})


async def bulk(request: Request):
    """Approve or reject the selected rows, each decided and audited on its own. htmx gets the
    outcomes, the decided rows removed and the counts updated (out of band)."""
    user = current_user(request)
    role = pick_tenant(request, user, "decide")
    form = await request.form()
    action = str(form.get("action", ""))
    if action not in ("approve", "reject"):
        raise ValidationFailed.at("/action", "choose approve or reject")
    reason = str(form.get("reason", "")).strip() or None
    ctx = request.app.state.ctx
    outcomes = []
    for change_id in form.getlist("change_id")[:200]:
        try:
            result = await run_in_threadpool(
                review.decide, ctx, tenant_id=role.tenant_id, change_id=str(change_id), actor=user.actor,
                may_see=role.sees_agent, request=review.DecisionRequest(decision=action, reason=reason))
            outcomes.append({"id": str(change_id), "ok": True, "status": result["status"],
                             "gone": result["status"] != "pending"})
        except AppError as error:
            # Decided meanwhile by someone else: it has left the queue all the same.
            gone = isinstance(error, Conflict) and isinstance(error.details, dict) \
                and error.details.get("reason") == "already_decided"
            outcomes.append({"id": str(change_id), "ok": False, "status": error.message, "gone": gone})
    if not is_htmx(request):
        return RedirectResponse(f"/review?tenant={role.tenant_name}", 303)
    flt, _ = _filters(request)
    _, total = await run_in_threadpool(review.list_changes, ctx, role.tenant_id, role.agents, flt, 1)
    return render(request, "review/_bulk_result.html", {"outcomes": outcomes, "total": total})


# --- one change ----------------------------------------------------------------------------------

def _locate(request: Request, user: Reviewer, power: str) -> tuple[TenantRole, Change]:
    """The tenant role under which this user may open the change in the URL, and the change; 404 if none."""
    change_id = request.path_params["change_id"]
    with request.app.state.ctx.db.sessions() as session:
        change = session.scalars(select(Change).where(Change.tenant_id.in_([r.tenant_id for r in user.roles]),
                                                      Change.id == change_id)).first()
    if change is None or not user.may("read", change.tenant_id, change.agent_id):
        raise NotFound("change not found")
    role = user.role_in(change.tenant_id)
    if power != "read" and not role.can(power):
        raise NotFound("change not found")
    return role, change


def _contradicted(diff: dict[str, Any] | None, risk: dict[str, Any]) -> str | None:
    """The live memory a flagged contradiction points at, when it is among the similar memories shown."""
    if not diff or diff.get("operation") != "remember":
        return None
    similar = [m["id"] for m in diff.get("similar") or []]
    found = (diff.get("flags") or {}).get("contradiction")
    if found and found.get("memory_id") in similar:
        return found["memory_id"]
    flag = next((f for f in risk["flags"] if f["name"] == "contradiction"), None)
    if flag is None or not similar:
        return None
    named = flag.get("memory_id")
    return named if named in similar else similar[0]


EXCERPT_CHARS = 160


def _evidence(flag: dict[str, Any], proposed: dict[str, Any]) -> list[dict[str, Any]]:
    """A flag's evidence spans, each with the flagged text when it is in the proposed content."""
    spots = []
    for item in flag.get("evidence") or []:
        if not isinstance(item, dict):
            continue
        start, end, field = item.get("start"), item.get("end"), str(item.get("field", ""))
        excerpt = None
        if field == "content" and isinstance(start, int) and isinstance(end, int) and 0 <= start <= end:
            excerpt = str(proposed.get("content") or "")[start:min(end, start + EXCERPT_CHARS)] or None
        spots.append({"field": field, "start": start, "end": end, "excerpt": excerpt})
    return spots


async def _body_context(request: Request, role: TenantRole, change: Change, **extra: Any) -> dict[str, Any]:
    """Everything the change page shows: the change, its live diff, risk flags and what approve would do."""
    view = await run_in_threadpool(review.review_view, request.app.state.ctx, role.tenant_id, change.id,
                                   role.sees_agent)
    diff = view.get("diff")
    risk = risk_of(change)
    proposed = (diff or {}).get("proposed") or {}
    risk["flags"] = [{**flag, "spots": _evidence(flag, proposed)} for flag in risk["flags"]]
    context = {"role": role, "view": view, "change": view["change"], "diff": diff, "risk": risk,
               "contradicts": _contradicted(diff, risk), "can_decide": role.can("decide"), "message": None,
               "result": None, "next_id": None, "total": None, "also_live": None, "pending": None}
    context.update(extra)
    return context


async def detail(request: Request):
    user = current_user(request)
    role, change = await run_in_threadpool(_locate, request, user, "read")
    _, pending = await run_in_threadpool(_pending_after, request.app.state.ctx, role, change.id)
    return render(request, "review/detail.html", await _body_context(request, role, change, pending=pending))


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
            metadata = jsontext.loads(str(form["metadata"]))
        except ValueError:
            raise ValidationFailed.at("/edits/metadata", "metadata must be a JSON object") from None
        if not isinstance(metadata, dict):
            raise ValidationFailed.at("/edits/metadata", "metadata must be a JSON object")
        edits["metadata"] = metadata
    default_contracts().validate("approve.request", {"edits": edits})
    return edits


def _pending_after(ctx, role: TenantRole, decided_id: str) -> tuple[str | None, int]:
    """The next pending change to review (oldest first, not the one just decided) and how many are pending."""
    rows, total = review.list_changes(ctx, role.tenant_id, role.agents, review.QueueFilter(), 5)
    return next((c.id for c in rows if c.id != decided_id), None), total


def _still_live(ctx, role: TenantRole, memory_id: str, result: dict[str, Any]) -> str | None:
    """After a plain approve of a remember, the similar memory the reviewer was shown if it is still
    live — both now are, and the page says so; None when there was none or the decision ended it."""
    outcome = result.get("result") or {}
    if (result.get("operation") != "remember" or result.get("status") != "approved" or not memory_id
            or outcome.get("superseded") or outcome.get("merged_into")):
        return None
    found = browse.locate(ctx, [role.tenant_id], memory_id)
    return memory_id if found and found[0] == role.tenant_id and role.sees_agent(found[1]) else None


async def decide(request: Request):
    """Approve or reject one change. htmx gets the change's body re-rendered with its new status, what
    the decision did to live memory and the queue count (out of band); other clients a redirect."""
    user = current_user(request)
    role, change = await run_in_threadpool(_locate, request, user, "decide")
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
    template = "review/_body.html" if is_htmx(request) else "review/detail.html"
    try:
        result = await run_in_threadpool(review.decide, ctx, tenant_id=role.tenant_id, change_id=change.id,
                                         actor=user.actor, may_see=role.sees_agent, request=decision)
    except Conflict as error:
        details = error.details if isinstance(error.details, dict) else {}
        message = ("Live memory changed while you were reviewing: this is the fresh diff. Review it again."
                   if details.get("reason") == "stale_review" else error.message)
        return render(request, template, await _body_context(request, role, change, message=message), status=409,
                      headers={"HX-Retarget": "#review-body", "HX-Reswap": "outerHTML"})
    next_id, pending = await run_in_threadpool(_pending_after, ctx, role, change.id)
    if not is_htmx(request):
        return RedirectResponse(f"/review/{next_id}" if next_id else f"/review?tenant={role.tenant_name}", 303)
    also_live = await run_in_threadpool(_still_live, ctx, role, str(form.get("also_live", "")), result)
    return render(request, template, await _body_context(
        request, role, change, result=result, next_id=next_id, total=pending, also_live=also_live))


routes = [
    Route("/review", queue, methods=["GET"]),
    Route("/review/rows", new_rows, methods=["GET"]),
    Route("/review/bulk", bulk, methods=["POST"]),
    Route("/review/{change_id}", detail, methods=["GET"]),
    Route("/review/{change_id}/{kind:str}", decide, methods=["POST"]),
]
