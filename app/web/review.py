"""The review queue and change pages (contract §5). Pages work without JavaScript; htmx adds
live-appearing rows, in-place decisions, counts that follow every decision and keyboard review.
Permission checks live here, never in templates: a client can ask for any partial."""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace
from datetime import datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse

from app.contracts import default_contracts
from app.core import jsontext
from app.core.cursor import encode_cursor, pack, unpack
from app.core.diff import STRONG_MATCH_COSINE
from app.core.timefmt import utcnow
from app.db.models import Change
from app.core.durations import format_duration
from app.errors import AppError, ConfirmationRequired, Conflict, NotFound, ValidationFailed
from app.services.review import browse, canaries, change_reads, changes, diffs, review
from app.services.tenancy import tenant_config
from app.services.runtime.cursors import decode_cursor
from app.web import change_view
from app.web.auth import current_user, pick_tenant
from app.web.reads import ReadingRoute
from app.web.templating import is_htmx, render, risk_of, tenant_query

PAGE = 50
OPERATIONS = ("remember", "forget", "merge", "expire", "workspace_write", "workspace_delete", "quarantine", "revert")
TYPES = ("semantic", "episodic", "procedural", "emotional")
SORTS = {"risk": "Highest risk first", "oldest": "Oldest first", "newest": "Newest first"}
DEFAULT_SORT = "risk"
"""The queue opens on what most needs a person: highest risk first, then oldest (kept out of URLs)."""
RISKS = {"low": "low or higher", "medium": "medium or higher", "high": "high"}
CHANGE_ID = re.compile(r"^chg_[0-9a-z]{1,64}$")


# --- the queue -----------------------------------------------------------------------------------

def _cursor(change: Change, sort: str = "oldest") -> str:
    """Where the next page starts, in the queue's sort order (opaque to clients)."""
    if sort != "risk":
        return encode_cursor(change.submitted_at, change.id)
    return pack([changes.RISK_RANK.get(change.risk_level, 0), change.submitted_at.isoformat(), change.id])


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


def _filters(request: Request) -> tuple[changes.QueueFilter, dict[str, str]]:
    q = request.query_params
    raw = {k: q.get(k, "").strip() for k in ("agent", "operation", "type", "rule", "age", "risk", "sort", "overdue")}
    raw["overdue"] = "1" if raw["overdue"] in ("1", "on") else ""
    age = int(raw["age"]) if raw["age"].isascii() and raw["age"].isdigit() and len(raw["age"]) < 7 else None
    flt = changes.QueueFilter(
        status="pending", agent_id=raw["agent"][:128] or None,
        operation=raw["operation"] if raw["operation"] in OPERATIONS else None,
        memory_type=raw["type"] if raw["type"] in TYPES else None, policy_rule=raw["rule"][:64] or None,
        older_than_minutes=age, min_risk=raw["risk"] if raw["risk"] in RISKS else None,
        sort=raw["sort"] if raw["sort"] in SORTS else DEFAULT_SORT, overdue=raw["overdue"] == "1")
    shown = {k: v for k, v in raw.items() if v}
    if shown.get("sort") == DEFAULT_SORT:
        del shown["sort"]  # the default stays out of URLs
    return flt, shown


async def _page(request: Request, flt: changes.QueueFilter, after: tuple | None):
    """The signed-in user's role, one keyset page of pending changes matching `flt` with previews,
    and the tenant's review SLA in seconds (0: none). With `flt.overdue` and an SLA, only changes
    past it are listed."""
    user = current_user(request)
    role = pick_tenant(request, user, "read")
    ctx = request.app.state.ctx
    sla = await run_in_threadpool(tenant_config.tenant_review_sla, ctx, role.tenant_id)
    rows, total = await run_in_threadpool(changes.list_changes, ctx, role.tenant_id, role.agents, flt, PAGE, after)
    previews = await run_in_threadpool(browse.queue_previews, ctx, role.tenant_id, rows)
    await run_in_threadpool(_note_previews, ctx, user, role, rows, previews)
    return user, role, rows, total, previews, sla


def _note_previews(ctx, user, role, rows: list[Change], previews: dict[str, dict[str, Any]]) -> None:
    """The queue quotes the live memory a forget or merge targets: one read per agent shown."""
    by_agent: dict[str, list[str]] = {}
    for change in rows:
        quoted = previews.get(change.id, {}).get("quotes")
        if quoted:
            by_agent.setdefault(change.agent_id, []).append(quoted)
    for agent_id, ids in by_agent.items():
        change_reads.for_person(ctx, tenant_id=role.tenant_id, actor=user.actor, operation="review.queue",
                                agent_id=agent_id, memory_ids=ids)



def _newest(rows: list[Change]) -> str:
    """Cursor of the most recently submitted row shown: the poller asks for anything newer."""
    return _cursor(max(rows, key=lambda c: (c.submitted_at, c.id))) if rows else ""


def _arrived(request: Request, rows: list[Change]) -> set[str]:
    """Rows the live refresh brings that the page did not show before (it sends the ids it shows),
    marked new as the poller marks them."""
    if not is_htmx(request) or request.query_params.get("refresh") != "1":
        return set()
    shown = set(request.query_params.getlist("shown")[:PAGE])
    return {c.id for c in rows if c.id not in shown}


async def queue(request: Request):
    flt, shown = _filters(request)
    after_param = request.query_params.get("after")
    user, role, rows, total, previews, sla = await _page(request, flt, _uncursor(after_param, flt.sort))
    next_cursor = _cursor(rows[-1], flt.sort) if len(rows) == PAGE else None
    # New changes arrive last in oldest-first order and first in newest-first order, so only the
    # page where they belong polls. Under the risk sort they are added at the end, marked new.
    polls = not after_param if flt.sort == "newest" else next_cursor is None
    # Canaries this person approved, told once, on the next full queue page after the decision.
    missed = [] if is_htmx(request) else await run_in_threadpool(
        canaries.notices_for, request.app.state.ctx, role.tenant_id, (f"user:{user.user_id}",))
    context = {
        "missed_canaries": missed,
        "role": role, "tenants": user.tenants_with("read"), "rows": rows, "total": total, "filters": shown,
        "previews": previews, "operations": OPERATIONS, "types": TYPES, "sorts": SORTS, "risks": RISKS,
        "sort": flt.sort, "can_decide": role.can("decide"), "now": utcnow(), "fresh": False, "sla": sla,
        "arrived": _arrived(request, rows),
        "sla_text": format_duration(sla),
        "next_url": f"/review?{tenant_query(role.tenant_name, shown, after=next_cursor)}" if next_cursor else None,
        "poll_url": f"/review/rows?{tenant_query(role.tenant_name, shown, since=_newest(rows))}" if polls else None,
        "qs": tenant_query(role.tenant_name, shown),
        # What the live stream re-reads on each change: this very view (sort, filters, page).
        "self_url": f"/review?{tenant_query(role.tenant_name, shown, after=after_param or '')}",
    }
    return render(request, "review/queue.html", context)


async def new_rows(request: Request):
    """Polled by the queue: rows submitted after the newest one shown are added and rows decided
    meanwhile (by anyone) removed, out of band, with fresh counts."""
    flt, shown = _filters(request)
    since = request.query_params.get("since", "")
    _, role, rows, total, previews, sla = await _page(request, replace(flt, sort="oldest"), _uncursor(since))
    listed = [i for i in request.query_params.getlist("shown")[:PAGE] if CHANGE_ID.match(i)]
    pending = await run_in_threadpool(browse.still_pending, request.app.state.ctx, role.tenant_id, listed)
    return render(request, "review/_new_rows.html", {
        "gone": [i for i in listed if i not in pending],
        "rows": rows, "total": total, "role": role, "can_decide": role.can("decide"), "previews": previews,
        "now": utcnow(), "fresh": True, "arrived": set(), "sla": sla,
        "position": "afterbegin" if flt.sort == "newest" else "beforeend", "qs": tenant_query(role.tenant_name, shown),
        "poll_url": f"/review/rows?{tenant_query(role.tenant_name, shown, since=_newest(rows) or since)}"})


async def bulk(request: Request):
    """Approve or reject the selected rows, each decided and audited on its own. Approving first
    shows what each change will do and asks to confirm (and to confirm the risk when any is medium
    or high); the confirmed form applies each change's preselected outcome, as its own page would
    (supersede on a flagged contradiction). htmx gets the outcomes, the decided rows removed and
    the counts updated (out of band)."""
    user = current_user(request)
    role = pick_tenant(request, user, "decide")
    form = await request.form()
    action = str(form.get("action", ""))
    if action not in ("approve", "reject"):
        raise ValidationFailed.at("/action", "choose approve or reject")
    reason = str(form.get("reason", "")).strip() or None
    ctx = request.app.state.ctx
    ids = [str(change_id) for change_id in form.getlist("change_id")[:200]]
    if action == "reject":
        decisions = [(i, review.DecisionRequest(decision="reject", reason=reason)) for i in ids]
        outcomes = [await _decide_one(ctx, user, role, i, d) for i, d in decisions]
        return await _bulk_done(request, role, outcomes)
    confirmed = form.get("confirmed") == "1"
    # Each change that needs confirmation is confirmed by its own box, named with its flags: one
    # tick never confirms the batch. The batch is planned up front to show it or to find a change
    # left unconfirmed; each change is planned again below anyway, just before its decision.
    plans = await run_in_threadpool(_plans, ctx, role, ids, user)
    risky = [p for p in plans if p.get("confirm")]
    unconfirmed = [p for p in risky if not _ticked(form, f"confirm_risk:{p['id']}")]
    if not confirmed or unconfirmed:
        message = ("Confirm each flagged change by its own box to approve it: "
                   + ", ".join(p["id"] for p in unconfirmed) + ".") if confirmed else None
        _, shown = _filters(request)
        context = {"role": role, "plans": plans, "risky": risky, "reason": reason or "", "message": message,
                   "qs": tenant_query(role.tenant_name, shown),
                   "count": sum(1 for p in plans if not p.get("error"))}
        template = "review/_bulk_confirm.html" if is_htmx(request) else "review/bulk_confirm.html"
        return render(request, template, context, status=422 if confirmed else 200)
    outcomes = []
    for change_id in ids:
        # Each change is planned again just before its decision: an earlier one in the batch may have
        # changed live memory (a new neighbour, a superseded fact). What was confirmed must still hold.
        plan = (await run_in_threadpool(_plans, ctx, role, [change_id], user))[0]
        shown = form.get(f"plan:{change_id}")
        if plan.get("error"):
            outcomes.append({"id": change_id, "ok": False, "status": plan["error"], "gone": plan["gone"]})
        elif shown is not None and str(shown) != plan["key"]:
            outcomes.append({"id": change_id, "ok": False, "gone": False, "status": "what approving it does "
                             "changed since you confirmed (live memory changed): review it on its page"})
        else:
            # What it retires is the service's to decide (the plan shown is what it decides, or the
            # fingerprint refuses it): no supersedes is sent, so every replaced memory goes, not one.
            decision = review.DecisionRequest(
                decision="approve", reason=reason, seen_state=plan["diff"]["fingerprint"],
                confirm_risk=_ticked(form, f"confirm_risk:{change_id}"))
            outcomes.append(await _decide_one(ctx, user, role, change_id, decision))
    return await _bulk_done(request, role, outcomes)


def _plans(ctx, role, ids: list[str], user) -> list[dict[str, Any]]:
    """What approving each selected change would do now: its live diff, risk level and preselected
    outcome (the memory a flagged contradiction supersedes, as on the change page); or why it is
    skipped (gone, submitted by this `user`, or already approved by them: its other approval must be
    someone else's)."""
    plans = []
    for change_id in ids:
        try:
            if not CHANGE_ID.match(change_id):
                raise NotFound("change not found")
            view = diffs.review_view(ctx, role.tenant_id, change_id, role.sees_agent, reviewer=user.actor)
        except AppError as error:
            plans.append({"id": change_id, "error": error.message, "gone": False})
            continue
        change, diff = view["change"], view.get("diff")
        if diff is None:
            plans.append({"id": change_id, "error": f"already {change['status']}", "gone": True})
            continue
        if view["own_change"]:
            plans.append({"id": change_id, "error": "you submitted it, and you cannot decide your own change: "
                          "another reviewer must", "gone": False})
            continue
        if change_view.approved_by(view, user):
            plans.append({"id": change_id, "error": "you already approved it; another reviewer must give the "
                          "next approval", "gone": False})
            continue
        risk = risk_of(SimpleNamespace(**change))
        retires = [m["id"] for m in diff.get("replaces") or []]
        # What the reviewer confirms: for a remember, the outcome (store, or retire which memories);
        # for other operations, the exact live state shown (its fingerprint).
        key = ("retire:" + ",".join(retires) if retires else "store") if diff["operation"] == "remember" \
            else diff["fingerprint"]
        plans.append({"id": change_id, "change": change, "diff": diff, "risk": risk["level"], "flags": risk["names"],
                      "retires": diff.get("replaces") or [], "key": key,
                      "confirm": review.confirmation_reasons(change, diff)})
        change_reads.for_person(ctx, tenant_id=role.tenant_id, actor=user.actor, operation="review.bulk",
                                agent_id=change["agent_id"], memory_ids=change_reads.shown_in_diff(diff),
                                query={"change_id": change_id})
    return plans


async def _decide_one(ctx, user, role, change_id: str, decision: review.DecisionRequest) -> dict[str, Any]:
    """One bulk decision's outcome line: decided, or why not (an error never stops the others)."""
    try:
        result = await run_in_threadpool(
            review.decide, ctx, tenant_id=role.tenant_id, change_id=change_id, actor=user.actor,
            may_see=role.sees_agent, request=decision)
    except AppError as error:
        # Decided meanwhile by someone else: it has left the queue all the same.
        gone = isinstance(error, Conflict) and isinstance(error.details, dict) \
            and error.details.get("reason") == "already_decided"
        return {"id": change_id, "ok": False, "status": error.message, "gone": gone}
    retired = [r["id"] for r in (result.get("result") or {}).get("retired") or []]
    status = f"{result['status']}, retiring {', '.join(retired)}" if retired else result["status"]
    return {"id": change_id, "ok": True, "status": status, "gone": result["status"] != "pending",
            "decision": result["status"]}


async def _bulk_done(request: Request, role, outcomes: list[dict[str, Any]]):
    flt, shown = _filters(request)
    if not is_htmx(request):  # back to the queue as it was filtered and sorted
        return RedirectResponse(f"/review?{tenant_query(role.tenant_name, shown)}", 303)
    _, total = await run_in_threadpool(changes.list_changes, request.app.state.ctx, role.tenant_id, role.agents,
                                       flt, 1)
    return render(request, "review/_bulk_result.html", {"outcomes": outcomes, "total": total})


# --- one change ----------------------------------------------------------------------------------

def _contradicted(diff: dict[str, Any] | None, risk: dict[str, Any]) -> str | None:
    """The first live memory approving retires (`diff["replaces"]`, the service's plan), if any."""
    if not diff or diff.get("operation") != "remember":
        return None
    return next((m["id"] for m in diff.get("replaces") or []), None)


EXCERPT_CHARS = 160
QUOTED_FIELDS = ("content", "source")
"""Fields of the proposed memory whose flagged text is quoted beside the flag (others are named)."""


def _evidence(flag: dict[str, Any], proposed: dict[str, Any]) -> list[dict[str, Any]]:
    """A flag's evidence spans, each with the flagged text when it is in a quoted field."""
    spots = []
    for item in flag.get("evidence") or []:
        if not isinstance(item, dict):
            continue
        start, end, field = item.get("start"), item.get("end"), str(item.get("field", ""))
        excerpt = None
        if field in QUOTED_FIELDS and isinstance(start, int) and isinstance(end, int) and 0 <= start <= end:
            excerpt = str(proposed.get(field) or "")[start:min(end, start + EXCERPT_CHARS)] or None
        spots.append({"field": field, "start": start, "end": end, "excerpt": excerpt})
    return spots


def highlighted(content: str, flags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`content` cut where flag evidence in it starts and ends: pieces `{text, flags}`, `flags` naming
    the flags whose evidence covers the piece (empty for plain text). Joining the texts gives `content`."""
    spans = [(e["start"], min(e["end"], len(content)), str(f["name"])) for f in flags for e in f.get("spots", [])
             if e["field"] == "content" and isinstance(e["start"], int) and isinstance(e["end"], int)
             and 0 <= e["start"] < min(e["end"], len(content))]
    cuts = sorted({0, len(content), *[s for s, _, _ in spans], *[e for _, e, _ in spans]})
    pieces = []
    for start, end in zip(cuts, cuts[1:]):
        names = sorted({name for s, e, name in spans if s <= start and end <= e})
        pieces.append({"text": content[start:end], "flags": names})
    return pieces


SIMILAR_MIN_COSINE = STRONG_MATCH_COSINE
"""The similarity a live memory needs to be listed as similar to a proposed one: the calibrated
threshold the word diff uses (`python -m dev.bench diff-match`). Below it a neighbour is not about the
same thing, and listing it (at 0.02, say) only made reviewers read unrelated memories."""


def similar_listed(diff: dict[str, Any] | None, contradicts: str | None = None) -> tuple[list[dict[str, Any]], int]:
    """The similar live memories worth showing beside a proposed memory, and how many weaker ones are
    left out. The memory a flagged contradiction or duplicate points at is always shown."""
    if not diff or diff.get("operation") != "remember":
        return [], 0
    similar = diff.get("similar") or []
    named = {contradicts, ((diff.get("flags") or {}).get("contradiction") or {}).get("memory_id")}
    if diff.get("strong_match") and diff.get("closest"):
        named.add(diff["closest"].get("id"))
    listed = [m for m in similar if m.get("id") in named
              or (isinstance(m.get("similarity"), (int, float)) and m["similarity"] >= SIMILAR_MIN_COSINE)]
    return listed, len(similar) - len(listed)


def _body_context(page: change_view.ChangePage, shown: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """Everything the change page shows: the change, its live diff, risk flags and what approve would do.
    `shown` is the queue's filter and sort the page was opened with (kept in its links and forms)."""
    view, role = page.view, page.role
    diff, decided = view.get("diff"), view.get("decided_diff")
    risk = risk_of(page.change)
    proposed = (diff or decided or {}).get("proposed") or {}
    risk["flags"] = [{**flag, "spots": _evidence(flag, proposed)} for flag in risk["flags"]]
    if proposed:
        proposed["pieces"] = highlighted(str(proposed.get("content") or ""), risk["flags"])
    change = view["change"]
    # A decided change, opened later, says what its decision did as the page that decided it did.
    result = None if change["status"] == "pending" else {**change, "result": view.get("result") or {}}
    contradicts = _contradicted(diff, risk)
    listed, unlisted = similar_listed(diff or decided, contradicts if diff else None)
    context = {"role": role, "view": view, "change": change, "diff": diff, "risk": risk,
               "similar_listed": listed, "similar_unlisted": unlisted, "similar_min_cosine": SIMILAR_MIN_COSINE,
               "decided_diff": decided, "decided_erased": view.get("decided_erased", False),
               "strong_match_cosine": STRONG_MATCH_COSINE,
               "contradicts": contradicts, "can_decide": role.can("decide"), "message": None,
               "result": result, "next_id": None, "total": None, "also_live": None, "pending": None,
               "replaces": (diff or {}).get("replaces") or [],
               "confirm_reasons": (reasons := review.confirmation_reasons(change, diff) if diff else []),
               "confirm_needed": bool(reasons),
               "approved_by_you": page.approved_by_you, "own_change": page.own_change, "just_decided": False,
               "qs": tenant_query(role.tenant_name, shown or {})}
    context.update(extra)
    return context


async def detail(request: Request):
    """One change. The queue's filter and sort ride along in the query string, so "Next" and the
    way back keep them."""
    user = current_user(request)
    flt, shown = _filters(request)
    page = await run_in_threadpool(change_view.change_page, request.app.state.ctx, user,
                                   request.path_params["change_id"], flt)
    return render(request, "review/detail.html", _body_context(page, pending=page.pending, shown=shown))


async def peek(request: Request):
    """A queue row opened in place (`review/_peek.html`): the change's content, flags, the closest
    memory when it is about the same thing, and approve/reject that stay on the queue."""
    user = current_user(request)
    flt, shown = _filters(request)
    page = await run_in_threadpool(change_view.change_page, request.app.state.ctx, user,
                                   request.path_params["change_id"], flt)
    return render(request, "review/_peek.html", _body_context(page, shown=shown))


def _ticked(form, name: str) -> bool:
    """Whether a checkbox (or a submit button of that name) was sent with a true value."""
    return str(form.get(name, "")).lower() in ("1", "on", "true", "yes")


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


def _chosen_memories(form) -> tuple[str, ...] | None:
    """The memories ticked inside a multi-memory forget or expire (None: the page offered no choice)."""
    if form.get("choose_memories") != "1":
        return None
    chosen = tuple(dict.fromkeys(str(i) for i in form.getlist("memory_id")[:1000]))
    if not chosen:
        raise ValidationFailed.at("/memory_ids", "tick at least one memory to approve, or reject the change")
    return chosen


async def decide(request: Request):
    """Approve or reject one change, in one service call that also reads what the page shows next.
    htmx gets the change's body re-rendered with its new status, what the decision did to live
    memory and the queue count (out of band); other clients a redirect."""
    user = current_user(request)
    kind = request.path_params["kind"]
    if kind not in ("approve", "reject"):
        raise NotFound("no such action")
    form = await request.form()
    decision = review.DecisionRequest(
        decision=kind, reason=str(form.get("reason", "")).strip() or None,
        edits=_edits(form) if kind == "approve" else None, seen_state=str(form.get("seen_state", "")) or None,
        merge_into=str(form.get("merge_into", "")) or None if kind == "approve" else None,
        supersedes=str(form.get("supersedes", "")) or None if kind == "approve" else None,
        confirm_risk=_ticked(form, "confirm_risk"), keep_both=kind == "approve" and _ticked(form, "keep_both"),
        memory_ids=_chosen_memories(form) if kind == "approve" else None)
    template = "review/_body.html" if is_htmx(request) else "review/detail.html"
    flt, shown = _filters(request)
    page = await run_in_threadpool(change_view.decide_on_page, request.app.state.ctx, user,
                                   request.path_params["change_id"], decision, str(form.get("also_live", "")), flt)
    in_row = is_htmx(request) and form.get("from_queue") == "1"  # decided from a queue row opened in place
    if in_row:
        template = "review/_peek.html"
    if page.conflict is not None:
        details = page.conflict.details if isinstance(page.conflict.details, dict) else {}
        if isinstance(page.conflict, ConfirmationRequired):
            message = "This approval needs your confirmation: tick the confirmation beside Approve to approve it."
        elif details.get("reason") == "stale_review":
            message = "Live memory changed while you were reviewing: this is the fresh diff. Review it again."
        else:
            message = page.conflict.message
        target = f"#peek-{page.change.id}" if in_row else "#review-body"
        return render(request, template, _body_context(page, message=message, shown=shown),
                      status=page.conflict.status, headers={"HX-Retarget": target, "HX-Reswap": "outerHTML"})
    qs = tenant_query(page.role.tenant_name, shown)
    if in_row:
        return render(request, "review/_peek_done.html", _body_context(page, result=page.result, total=page.pending,
                                                                        shown=shown))
    if not is_htmx(request):
        return RedirectResponse(f"/review/{page.next_id}?{qs}" if page.next_id else f"/review?{qs}", 303)
    return render(request, template, _body_context(page, result=page.result, next_id=page.next_id,
                                                   total=page.pending, also_live=page.also_live,
                                                   just_decided=True, shown=shown))


routes = [
    ReadingRoute("/review", queue, methods=["GET"]),
    ReadingRoute("/review/rows", new_rows, methods=["GET"]),
    ReadingRoute("/review/bulk", bulk, methods=["POST"]),
    ReadingRoute("/review/{change_id}", detail, methods=["GET"]),
    ReadingRoute("/review/{change_id}/peek", peek, methods=["GET"]),
    ReadingRoute("/review/{change_id}/{kind:str}", decide, methods=["POST"]),
]
