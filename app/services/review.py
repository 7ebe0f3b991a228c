"""Reviewing staged changes: diffs against live state (computed at review time, fingerprinted),
and decisions — approve (optionally with edits, merged into or superseding a live memory),
reject, withdraw — each audited in the decision's own transaction.

Exactly one of two concurrent decisions wins: the change row is locked and its status checked
under the lock. A decision made on a stale fingerprint of live state is refused (409 stale_review).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

from sqlalchemy import and_, bindparam, case, func, or_, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import JSONB

from app.core import diff as textdiff
from app.core.access import agent_allowed
from app.core.screening.flags import SEVERITIES, level_rank
from app.core.timefmt import format_ts, utcnow
from app.db.models import Change, Memory
from app.errors import Conflict, Forbidden, NotFound, ValidationFailed
from app.observability import metrics
from app.repos import memories as repo
from app.repos import search
from app.repos.memories import Scope
from app.services import compaction, events, workspace
from app.services import memories as mem
from app.services.context import AppContext

NEIGHBOURS = 5

AgentCheck = Callable[[str], bool]


def change_json(change: Change) -> dict[str, Any]:
    """The contract's change shape (§4)."""
    return {
        "id": change.id, "operation": change.operation, "status": change.status, "agent_id": change.agent_id,
        "user_id": change.user_id, "memory_ids": list(change.memory_ids),
        "submitted_at": format_ts(change.submitted_at), "decided_at": format_ts(change.decided_at),
        "decided_by": change.decided_by, "reason": change.reason, "approvals": list(change.approvals),
        "approvals_required": change.approvals_required, "policy_rule": change.policy_rule,
        "redactions": list(change.redactions), "risk_flags": list(change.risk_flags),
        "risk_level": change.risk_level,
    }


def load_change(session, tenant_id: str, change_id: str, may_see: AgentCheck, *, lock: bool = False) -> Change:
    """A change of this tenant whose agent the caller may see; 404 otherwise (never reveals others)."""
    stmt = select(Change).where(Change.id == change_id, Change.tenant_id == tenant_id)
    if lock:
        stmt = stmt.with_for_update()
    change = session.scalars(stmt).first()
    if change is None or not may_see(change.agent_id):
        raise NotFound("change not found")
    return change


def get_change(ctx: AppContext, tenant_id: str, change_id: str, may_see: AgentCheck) -> dict[str, Any]:
    with ctx.db.sessions() as session:
        return change_json(load_change(session, tenant_id, change_id, may_see))


@dataclass(frozen=True)
class QueueFilter:
    status: str = "pending"
    agent_id: str | None = None
    operation: str | None = None
    memory_type: str | None = None
    policy_rule: str | None = None
    older_than_minutes: int | None = None
    min_risk: str | None = None  # "low" | "medium" | "high": at least this risk level
    sort: str = "oldest"  # "oldest" | "newest" | "risk" (highest risk first, then oldest)


RISK_RANK = {level: level_rank(level) for level in SEVERITIES}  # "none" is 0 (the CASE's else)


def risk_rank():
    """SQL: a change's risk level as a number, for sorting and filtering (0 = no flags)."""
    return case(*[(Change.risk_level == name, rank) for name, rank in RISK_RANK.items()], else_=0)


def list_changes(ctx: AppContext, tenant_id: str, may_see_patterns: tuple[str, ...], flt: QueueFilter,
                 limit: int = 50, after: tuple | None = None) -> tuple[list[Change], int]:
    """Keyset-paginated changes in `flt.sort` order; also the total matching count.

    `after` is the last row's (submitted_at, id) — or (risk rank, submitted_at, id) for the risk sort."""
    conds = [Change.tenant_id == tenant_id]
    if flt.status != "any":
        conds.append(Change.status == flt.status)
    if flt.agent_id:
        conds.append(Change.agent_id == flt.agent_id)
    if flt.operation:
        conds.append(Change.operation == flt.operation)
    if flt.policy_rule:
        conds.append(Change.policy_rule == flt.policy_rule)
    if flt.older_than_minutes:
        conds.append(Change.submitted_at < func.now() - func.make_interval(0, 0, 0, 0, 0, flt.older_than_minutes))
    if flt.memory_type:
        conds.append(Change.memory_ids.overlap(
            select(func.array_agg(Memory.id)).where(Memory.tenant_id == tenant_id, Memory.type == flt.memory_type,
                                                    Memory.status == "pending").scalar_subquery()))
    rank = risk_rank()
    if flt.min_risk in RISK_RANK:
        conds.append(rank >= RISK_RANK[flt.min_risk])
    if "*" not in may_see_patterns:
        # Globs are checked in Python; SQL narrows by the literal prefix before the first wildcard.
        prefixes = [p.split("*")[0].split("?")[0] for p in may_see_patterns]
        conds.append(or_(*[Change.agent_id.startswith(p) for p in prefixes]))
    where = and_(*conds)
    with ctx.db.sessions() as session:
        total = session.scalar(select(func.count()).select_from(Change).where(where)) or 0
        stmt = select(Change).where(where)
        if flt.sort == "newest":
            if after is not None:
                stmt = stmt.where(tuple_(Change.submitted_at, Change.id) < tuple_(*after))
            stmt = stmt.order_by(Change.submitted_at.desc(), Change.id.desc())
        elif flt.sort == "risk":
            if after is not None:
                after_rank, ts, cid = after
                stmt = stmt.where(or_(rank < after_rank, and_(
                    rank == after_rank, tuple_(Change.submitted_at, Change.id) > tuple_(ts, cid))))
            stmt = stmt.order_by(rank.desc(), Change.submitted_at, Change.id)
        else:
            if after is not None:
                ts, cid = after
                stmt = stmt.where(or_(Change.submitted_at > ts, and_(Change.submitted_at == ts, Change.id > cid)))
            stmt = stmt.order_by(Change.submitted_at, Change.id)
        rows = list(session.scalars(stmt.limit(limit * 2)))
    visible = [c for c in rows if agent_allowed(c.agent_id, may_see_patterns)][:limit]
    return visible, total


# --- diffs ---------------------------------------------------------------------------------------

def _fingerprint(parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _brief(memory: Memory, similarity: float | None = None) -> dict[str, Any]:
    item = {"id": memory.id, "content": memory.content, "type": memory.type, "tags": list(memory.tags),
            "metadata": memory.metadata_, "confidence": float(memory.confidence), "user_id": memory.user_id,
            "created_at": format_ts(memory.created_at), "updated_at": format_ts(memory.updated_at)}
    if similarity is not None:
        item["similarity"] = round(similarity, 4)
    return item


def compute_diff(ctx: AppContext, session, change: Change) -> dict[str, Any]:
    """The change against live state now, with the fingerprint a decision must quote."""
    kind = change.operation
    if kind == "remember":
        body = _remember_diff(session, change)
    elif kind in ("forget", "expire"):
        rows = _resolve_targets(session, change)
        body = {"affected": [_brief(m) for m in rows], "count": len(rows),
                "hard_delete": bool(change.request.get("hard_delete")),
                "action": change.request.get("action", "forget") if kind == "expire" else
                ("hard_delete" if change.request.get("hard_delete") else "forget")}
        body["_state"] = [(m.id, m.updated_at) for m in rows]
    elif kind == "merge":
        body = _merge_diff(session, change)
    elif kind in ("workspace_write", "workspace_delete"):
        body = workspace.review_diff(session, change)
    else:
        body = {"_state": []}
    state = body.pop("_state")
    body.update({"operation": kind, "policy_rule": change.policy_rule, "redactions": list(change.redactions),
                 "risk_flags": list(change.risk_flags), "risk_level": change.risk_level,
                 "approvals": list(change.approvals), "approvals_required": change.approvals_required,
                 "fingerprint": _fingerprint([change.id, change.status, len(change.approvals), state])})
    return body


def _staged_memory(session, change: Change, **options) -> Memory:
    """The memory a `remember` change staged (keys are (id, tenant))."""
    return session.get(Memory, {"id": change.memory_ids[0], "tenant_id": change.tenant_id}, **options)


def _remember_diff(session, change: Change) -> dict[str, Any]:
    memory = _staged_memory(session, change)
    embedding = [float(x) for x in session.scalar(select(Memory.embedding).where(
        Memory.id == memory.id, Memory.tenant_id == change.tenant_id))]
    scope = Scope(change.tenant_id, change.agent_id, memory.user_id)
    ids = [i for i, _ in search.vector_candidates(session, scope, {}, embedding, NEIGHBOURS)]
    ids += [i for i, _ in search.keyword_candidates(session, scope, {}, memory.content or "", NEIGHBOURS)]
    neighbours = sorted(search.fetch_with_similarity(session, change.tenant_id, list(dict.fromkeys(ids)), embedding),
                        key=lambda pair: (-pair[1], pair[0].id))[:NEIGHBOURS]
    closest = neighbours[0] if neighbours else None
    body: dict[str, Any] = {"proposed": _brief(memory), "similar": [_brief(m, s) for m, s in neighbours],
                            "closest": None, "segments": [], "flags": {"duplicate": False, "contradiction": None}}
    if closest is not None:
        near, cosine = closest
        body["closest"] = _brief(near, cosine)
        body["segments"] = [{"op": s.op, "text": s.text} for s in textdiff.word_diff(near.content, memory.content)]
        body["flags"]["duplicate"] = textdiff.is_likely_duplicate(
            textdiff.similarity(near.content, memory.content), cosine)
    for near, _ in neighbours:
        found = textdiff.detect_contradiction(memory.content, near.content)
        if found:
            body["flags"]["contradiction"] = {"memory_id": near.id, "frame": found.frame, "old_value": found.old_value,
                                              "new_value": found.new_value, "kind": found.kind}
            break
    body["_state"] = [(memory.id, memory.updated_at, memory.status)] + [(m.id, m.updated_at) for m, _ in neighbours]
    return body


def _resolve_targets(session, change: Change, lock: bool = False) -> list[Memory]:
    """What a staged forget/expire would touch if applied now."""
    request = change.request
    scope = Scope(change.tenant_id, change.agent_id, request.get("user_id"))
    if change.operation == "forget":
        return repo.matching(session, scope=scope, ids=request.get("ids") or None,
                             metadata=request.get("filter") or None, lock=lock)
    return mem._expire_rows(session, scope, request.get("policy") or {}, lock=lock)


def _merge_diff(session, change: Change) -> dict[str, Any]:
    request = change.request
    canonical, duplicates = request["canonical"], request["duplicates"]
    rows = repo.matching(session, scope=Scope(change.tenant_id, change.agent_id), ids=[canonical, *duplicates])
    by_id = {m.id: m for m in rows}
    missing = [i for i in [canonical, *duplicates] if i not in by_id]
    strategy = request.get("strategy", "keep_canonical")
    body: dict[str, Any] = {"before": [_brief(m) for m in rows], "missing": missing, "strategy": strategy,
                            "after": None}
    if not missing:
        plan = mem.plan_merge(rows, canonical, strategy)
        body["after"] = {"id": canonical, "content": plan.content, "tags": plan.tags, "metadata": plan.metadata,
                         "confidence": plan.confidence}
        body["segments"] = [{"op": s.op, "text": s.text}
                            for s in textdiff.word_diff(by_id[canonical].content, plan.content)]
    body["_state"] = [(m.id, m.updated_at) for m in rows]
    return body


def review_view(ctx: AppContext, tenant_id: str, change_id: str, may_see: AgentCheck) -> dict[str, Any]:
    """A change with its live diff (what the UI and `GET /v1/changes/{id}/diff` show)."""
    with ctx.db.sessions.begin() as session:
        change = load_change(session, tenant_id, change_id, may_see)
        view = {"change": change_json(change)}
        if change.status == "pending":
            view["diff"] = compute_diff(ctx, session, change)
        return view


# --- decisions -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class DecisionRequest:
    decision: str  # "approve" | "reject"
    reason: str | None = None
    edits: dict[str, Any] | None = None
    seen_state: str | None = None
    merge_into: str | None = None
    supersedes: str | None = None


@metrics.counts_decisions
def decide(ctx: AppContext, *, tenant_id: str, change_id: str, actor: dict[str, Any], may_see: AgentCheck,
           request: DecisionRequest) -> dict[str, Any]:
    """Approve or reject a pending change (see module docstring for the guarantees)."""
    if request.decision == "reject" and not (request.reason or "").strip():
        raise ValidationFailed.at("/reason", "a reason is required to reject")
    # Work that must happen outside the transaction (validation, redaction, embedding) is done
    # first when the request asks for it, or after a first look shows the change needs it.
    approving = request.decision == "approve"
    prepared = (_prepare(ctx, tenant_id, change_id, may_see, request)
                if approving and (request.edits or request.merge_into or request.supersedes) else None)
    try:
        return _decide(ctx, tenant_id, change_id, actor, may_see, request, prepared)
    except _NeedsPreparation:
        return _decide(ctx, tenant_id, change_id, actor, may_see, request,
                       _prepare(ctx, tenant_id, change_id, may_see, request))


class _NeedsPreparation(Exception):
    pass


def _decide(ctx: AppContext, tenant_id: str, change_id: str, actor: dict[str, Any], may_see: AgentCheck,
            request: DecisionRequest, prepared: _Prepared | None) -> dict[str, Any]:
    with ctx.db.sessions.begin() as session:
        if request.decision == "approve" and prepared is None and request.seen_state is None:
            # A plain approval: most likely a staged remember that needs no more approvals.
            row = _lock_change_row(session, tenant_id, change_id, may_see)
            if row.operation == "remember" and row.approvals_required <= len(row.approvals) + 1:
                return _approve_staged_memory(ctx, session, row, actor, request)
        change = load_change(session, tenant_id, change_id, may_see, lock=True)
        _require_pending(change)
        if request.decision == "approve" and prepared is None:
            if change.operation == "merge":
                raise _NeedsPreparation()
            prepared = _Prepared()
        if request.seen_state is not None:  # the diff costs a search; only a quoted fingerprint needs it
            fresh = compute_diff(ctx, session, change)
            if request.seen_state != fresh["fingerprint"]:
                raise Conflict("live state changed since this diff was shown; review the fresh diff",
                               details={"reason": "stale_review", "fingerprint": fresh["fingerprint"],
                                        "diff": fresh})
        who = _actor_label(actor)
        now = utcnow()
        if request.decision == "reject":
            change.decided_at, change.decided_by, change.reason = now, who, request.reason
            _reject(ctx, session, change, actor, request.reason)
        else:
            _require_new_reviewer(change.approvals, who)
            if change.approvals_required > len(change.approvals) + 1:
                change.approvals = _with_approval(change.approvals, who, actor, now)
                ctx.audit.append(session, tenant_id=tenant_id, event_type="change.approval_recorded", actor=actor,
                                 subject={"type": "change", "id": change.id},
                                 data={"approvals": len(change.approvals), "required": change.approvals_required})
                return {**change_json(change), "result": None}
            result = _apply(ctx, session, change, actor, request, prepared)
            # Every column of the change is set together, so it is written in one UPDATE.
            change.approvals = _with_approval(change.approvals, who, actor, now)
            change.result, change.status = result, "approved"
            change.decided_at, change.decided_by, change.reason = now, who, request.reason
            _record_approval(ctx, session, change, actor, request)
        session.flush()
        return {**change_json(change), "result": change.result}


def _require_pending(change) -> None:
    if change.status != "pending":
        raise Conflict(f"change already {change.status}", details={"reason": "already_decided",
                                                                   "status": change.status})


def _require_new_reviewer(approvals: list[dict[str, Any]], who: str) -> None:
    if any(a["by"] == who for a in approvals):
        raise Conflict("the same reviewer cannot give both approvals", details={"reason": "same_reviewer"})


def _with_approval(approvals: list[dict[str, Any]], who: str, actor: dict[str, Any], now) -> list[dict[str, Any]]:
    return [*approvals, {"by": who, "name": actor.get("name"), "at": format_ts(now)}]


def _record_approval(ctx: AppContext, session, change, actor: dict[str, Any], request: DecisionRequest) -> None:
    """The final approval's audit entry and `change.approved` event (`change` already holds its decision)."""
    ctx.audit.append(session, tenant_id=change.tenant_id, event_type="change.approved", actor=actor,
                     subject={"type": "change", "id": change.id},
                     data={"operation": change.operation, "memory_ids": list(change.memory_ids),
                           "edited": bool(request.edits), "merge_into": request.merge_into,
                           "supersedes": request.supersedes, "reason_given": bool(request.reason),
                           "approvers": [a["by"] for a in change.approvals]})
    events.change_event(session, change, "approved")


# The review queue's bulk decision - approving a staged remember as it stands - runs on statements
# built once and on plain rows, in two round trips: the change row locked, then one statement that
# puts the staged memory live (returning what its audit entry and event need) and records the
# decision. Through ORM loads and flushes it took three, and most of an approval's Python time.
_CHANGES = Change.__table__
_LOCK_CHANGE = (select(_CHANGES)
                .where(_CHANGES.c.id == bindparam("change_id"), _CHANGES.c.tenant_id == bindparam("tenant"))
                .with_for_update())
_APPROVE_STAGED = text("""
    WITH went_live AS (
        UPDATE memories SET status = 'live', live_from = :now, updated_at = :now
        WHERE id = :memory_id AND tenant_id = :tenant
        RETURNING id, tenant_id, agent_id, user_id, type, content, tags, metadata AS metadata_, node_id, digest_key
    ), decided AS (
        UPDATE changes SET status = 'approved', approvals = :approvals, result = :result, decided_at = :now,
                           decided_by = :decided_by, reason = :reason
        WHERE id = :change_id AND tenant_id = :tenant
    )
    SELECT * FROM went_live""").bindparams(bindparam("approvals", type_=JSONB), bindparam("result", type_=JSONB))


def _lock_change_row(session, tenant_id: str, change_id: str, may_see: AgentCheck):
    """The pending change as a plain row, locked until commit; 404 / 409 as `load_change` and `_decide`."""
    row = session.connection().execute(_LOCK_CHANGE, {"change_id": change_id, "tenant": tenant_id}).first()
    if row is None or not may_see(row.agent_id):
        raise NotFound("change not found")
    _require_pending(row)
    return row


def _approve_staged_memory(ctx: AppContext, session, row, actor: dict[str, Any],
                           request: DecisionRequest) -> dict[str, Any]:
    """Approve a locked, pending `remember` change that needs no further approval, without edits:
    the same writes, audit entries and events as the general path (`_apply`, `_committed`)."""
    who, now = _actor_label(actor), utcnow()
    _require_new_reviewer(row.approvals, who)
    memory_id = row.memory_ids[0]
    decided = SimpleNamespace(**{
        **row._mapping, "status": "approved", "approvals": _with_approval(row.approvals, who, actor, now),
        "result": {"memory_id": memory_id}, "decided_at": now, "decided_by": who, "reason": request.reason})
    memory = session.connection().execute(_APPROVE_STAGED, {
        "tenant": row.tenant_id, "change_id": row.id, "memory_id": memory_id, "now": now,
        "approvals": decided.approvals, "result": decided.result, "decided_by": who,
        "reason": request.reason}).one()
    ctx.audit.append(session, tenant_id=row.tenant_id, event_type="memory.committed", actor=actor,
                     subject={"type": "memory", "id": memory.id},
                     data=mem.memory_event(memory, change_id=row.id, edited=False))
    events.memory_written(session, memory)
    _record_approval(ctx, session, decided, actor, request)
    return {**change_json(decided), "result": decided.result}


def withdraw(ctx: AppContext, *, tenant_id: str, change_id: str, actor: dict[str, Any], may_see: AgentCheck) -> dict:
    """The submitting agent takes its change back before a decision."""
    with ctx.db.sessions.begin() as session:
        change = load_change(session, tenant_id, change_id, may_see, lock=True)
        if change.status != "pending":
            raise Conflict(f"change already {change.status}", details={"reason": "already_decided",
                                                                       "status": change.status})
        change.status, change.decided_at, change.decided_by = "withdrawn", utcnow(), _actor_label(actor)
        if change.operation == "remember":
            session.execute(Memory.__table__.update().where(Memory.id.in_(change.memory_ids))
                            .values(status="withdrawn", updated_at=utcnow()))
        ctx.audit.append(session, tenant_id=tenant_id, event_type="change.withdrawn", actor=actor,
                         subject={"type": "change", "id": change.id}, data={"operation": change.operation})
        return change_json(change)


def _actor_label(actor: dict[str, Any]) -> str:
    return f"{actor.get('kind')}:{actor.get('id')}"


def _reject(ctx: AppContext, session, change: Change, actor: dict, reason: str | None) -> None:
    change.status = "rejected"
    if change.operation == "remember":
        memory = _staged_memory(session, change, with_for_update=True)
        memory.status, memory.updated_at = "rejected", utcnow()
    ctx.audit.append(session, tenant_id=change.tenant_id, event_type="change.rejected", actor=actor,
                     subject={"type": "change", "id": change.id},
                     data={"operation": change.operation, "memory_ids": list(change.memory_ids),
                           "reason_digest": hashlib.sha256((reason or "").encode()).hexdigest()})
    events.change_event(session, change, "rejected")


@dataclass
class _Prepared:
    """Work done before the decision's transaction: validation, redaction and embedding of edits."""

    clean: mem.CleanWrite | None = None
    memory_type: str | None = None
    embedding: list[float] | None = None
    merge_plan: mem.MergePlan | None = None
    merge_rows: list[Memory] | None = None


def _prepare(ctx: AppContext, tenant_id: str, change_id: str, may_see: AgentCheck, request: DecisionRequest) -> _Prepared:
    prepared = _Prepared()
    with ctx.db.sessions() as session:
        change = load_change(session, tenant_id, change_id, may_see)
        if change.operation == "remember" and not (request.edits or request.merge_into):
            return prepared  # a plain approval: nothing to validate or embed
        if change.operation == "remember":
            memory = _staged_memory(session, change)
            edits = request.edits or {}
            if edits:
                memory_type = edits.get("type", memory.type)
                prepared.clean = mem.clean_payload(
                    ctx, session, tenant_id, content=edits.get("content", memory.content),
                    tags=edits.get("tags", list(memory.tags)), metadata=edits.get("metadata", memory.metadata_),
                    memory_type=memory_type)
                prepared.memory_type = memory_type
            content = prepared.clean.content if prepared.clean else memory.content
            if request.merge_into:
                target = repo.get_visible(session, scope=Scope(tenant_id, change.agent_id), memory_id=request.merge_into)
                if target is None:
                    raise NotFound("memory to merge into not found")
                staged = Memory(id=memory.id, content=content, tags=(prepared.clean.tags if prepared.clean else memory.tags),
                                metadata_=(prepared.clean.metadata if prepared.clean else memory.metadata_),
                                confidence=memory.confidence, created_at=memory.created_at)
                prepared.merge_rows = [target]
                prepared.merge_plan = mem.plan_merge([target, staged], target.id, "merge_content")
                prepared.embedding = ctx.embedder.embed([prepared.merge_plan.content])[0].tolist()
            elif prepared.clean and prepared.clean.content != memory.content:
                prepared.embedding = ctx.embedder.embed([content])[0].tolist()
            if request.supersedes and request.supersedes == request.merge_into:
                raise ValidationFailed.at("/supersedes", "cannot both merge into and supersede the same memory")
        elif request.edits or request.merge_into or request.supersedes:
            raise ValidationFailed.at("/edits", "edits, merge_into and supersedes apply to remember changes only")
        elif change.operation == "merge":
            rows = repo.matching(session, scope=Scope(tenant_id, change.agent_id),
                                 ids=[change.request["canonical"], *change.request["duplicates"]])
            plan = mem.plan_merge(rows, change.request["canonical"], change.request.get("strategy", "keep_canonical")) \
                if len(rows) == 1 + len(change.request["duplicates"]) else None
            prepared.merge_rows, prepared.merge_plan = rows, plan
            if plan is not None and plan.reembed:
                prepared.embedding = ctx.embedder.embed([plan.content])[0].tolist()
    return prepared


def _apply(ctx: AppContext, session, change: Change, actor: dict, request: DecisionRequest,
           prepared: _Prepared) -> dict[str, Any]:
    """Carry out an approved change against live state, in the decision's transaction."""
    tenant_id, now = change.tenant_id, utcnow()
    if change.operation == "remember" and not request.merge_into:
        # The common case in one round trip: the staged row goes live (with any edits) and comes back.
        values: dict[str, Any] = {"status": "live", "live_from": now, "updated_at": now}
        if prepared.clean is not None:
            values.update(content=prepared.clean.content, tags=prepared.clean.tags,
                          metadata_=prepared.clean.metadata, type=prepared.memory_type)
        if prepared.embedding is not None:
            values["embedding"] = prepared.embedding
        memory = session.scalars(update(Memory).where(Memory.id == change.memory_ids[0])
                                 .values(**values).returning(Memory)
                                 .execution_options(synchronize_session=False)).one()
        return _committed(ctx, session, change, actor, request, memory, edited=prepared.clean is not None)
    if change.operation == "remember":  # merged into a live memory instead of going live itself
        memory = _staged_memory(session, change, with_for_update=True)
        if prepared.clean is not None:
            memory.content, memory.tags, memory.metadata_ = (prepared.clean.content, prepared.clean.tags,
                                                             prepared.clean.metadata)
            memory.type = prepared.memory_type
        target = repo.lock_live(session, scope=Scope(tenant_id, change.agent_id), ids=[request.merge_into])
        if not target or target[0].updated_at != prepared.merge_rows[0].updated_at:
            raise Conflict("the memory to merge into changed; review again", details={"reason": "stale_review"})
        target = target[0]
        plan = prepared.merge_plan
        target.content, target.tags, target.metadata_ = plan.content, plan.tags, plan.metadata
        target.confidence, target.embedding, target.updated_at = plan.confidence, prepared.embedding, now
        memory.status, memory.merged_into, memory.ended_at, memory.updated_at = "merged", target.id, now, now
        session.flush()
        ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.merged", actor=actor,
                         subject={"type": "memory", "id": target.id},
                         data=mem.memory_event(target, strategy="merge_content", duplicates=[memory.id],
                                               change_id=change.id))
        events.memory_written(session, target)
        return {"memory_id": target.id, "merged_into": target.id}

    if change.operation in ("forget", "expire"):
        rows = _resolve_targets(session, change, lock=True)
        if change.operation == "forget":
            mem.apply_forget(ctx, session, tenant_id, actor, rows, hard=bool(change.request.get("hard_delete")),
                             reason=change.request.get("reason"), change_id=change.id)
        else:
            mem.apply_expire(ctx, session, tenant_id, actor, rows, change.request.get("action", "forget"),
                             change_id=change.id)
        return {"affected": [m.id for m in rows]}
    if change.operation in ("workspace_write", "workspace_delete"):
        return workspace.apply_change(ctx, session, change, actor)
    if change.operation == "merge" and change.request.get("compaction_run"):  # a staged compaction group
        return compaction.apply_staged(ctx, session, change, actor, prepared.merge_rows)
    if change.operation == "merge":
        if prepared.merge_plan is None:
            raise Conflict("memories to merge are gone; reject this change", details={"reason": "stale_review"})
        request_body = change.request
        canonical = mem.apply_merge(ctx, session, tenant_id, actor, Scope(tenant_id, change.agent_id),
                                    request_body["canonical"], request_body["duplicates"],
                                    request_body.get("strategy", "keep_canonical"), prepared.merge_plan,
                                    prepared.embedding, expected=prepared.merge_rows, change_id=change.id)
        return {"memory_id": canonical.id, "merged": request_body["duplicates"]}
    raise Forbidden(f"cannot apply {change.operation!r} changes here")


def _committed(ctx: AppContext, session, change: Change, actor: dict, request: DecisionRequest, memory: Memory,
               *, edited: bool) -> dict[str, Any]:
    """Audit and announce an approved remember that is now live; supersede the memory it replaces."""
    tenant_id = change.tenant_id
    ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.committed", actor=actor,
                     subject={"type": "memory", "id": memory.id},
                     data=mem.memory_event(memory, change_id=change.id, edited=edited))
    events.memory_written(session, memory)
    result: dict[str, Any] = {"memory_id": memory.id}
    if request.supersedes:
        old = repo.lock_live(session, scope=Scope(tenant_id, change.agent_id), ids=[request.supersedes])
        if not old:
            raise NotFound("memory to supersede not found")
        repo.end(session, ids=[old[0].id], status="superseded", at=utcnow(), superseded_by=memory.id)
        ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.superseded", actor=actor,
                         subject={"type": "memory", "id": old[0].id},
                         data={"superseded_by": memory.id, "change_id": change.id})
        result["superseded"] = old[0].id
    return result
