"""Deciding staged changes: approve (optionally with edits, merged into or superseding a live memory),
reject, withdraw — each audited in the decision's own transaction. What an approval does to live
state is `app.services.review.approval`; the diff a decision quotes, `app.services.review.diffs`.

Exactly one of two concurrent decisions wins: the change row is locked and its status checked
under the lock. A decision made on a stale fingerprint of live state is refused (409 stale_review),
and one by the change's author on every path (403 own_change, `app.services.review.duties`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from app.core.timefmt import format_ts, utcnow
from app.db.models import Change, Memory
from app.errors import ConfirmationRequired, Conflict, Forbidden, NotFound, ValidationFailed
from app.observability import metrics
from app.repos.review import changes as changes_repo
from app.repos.tenancy import tenants as tenant_repo
from app.repos.tenancy import users as users_repo
from app.services.audit import recover
from app.services.events import events
from app.services.memory import memories as mem
from app.services.memory import supersession
from app.services.review import canaries, change_reads, confirmation, duties
from app.services.review.approval import Prepared, apply, prepare
from app.services.review.changes import (AgentCheck, change_json, decided_reviewer, load_change, snapshot,
                                         staged_memory)
from app.services.review.diffs import Shown, candidates_for, compute_diff, replaced
from app.services.runtime.context import AppContext
from app.services.tenancy import tenant_config
from app.services.tenancy.users import ROLE_POWERS


@dataclass(frozen=True)
class DecisionRequest:
    decision: str  # "approve" | "reject"
    reason: str | None = None
    edits: dict[str, Any] | None = None
    seen_state: str | None = None
    merge_into: str | None = None
    supersedes: str | None = None
    confirm_risk: bool = False
    """The reviewer confirms an approval that needs it (`app.services.review.confirmation`: medium or high
    risk, a hard delete, a merge that drops facts); every path asks for it."""
    memory_ids: tuple[str, ...] | None = None
    """Forget and expire: the memories (among those it would touch) the approval applies to."""
    keep_both: bool = False
    """Remember: keep live the memories it replaces (`app.services.memory.supersession`) instead of retiring them."""


def confirmation_reasons(change, diff: dict[str, Any] | None = None) -> list[str]:
    """Why approving `change` (a row or its JSON shape) needs explicit confirmation (`app.services.review.confirmation`);
    `diff`, when the caller has it, tells whether a merge drops facts."""
    request = getattr(change, "request", None) if not isinstance(change, dict) else change.get("request")
    operation = change["operation"] if isinstance(change, dict) else change.operation
    level = change["risk_level"] if isinstance(change, dict) else change.risk_level
    drops = False
    if operation == "merge" and diff and diff.get("after"):
        drops = confirmation.merge_drops_facts([m.get("content") or "" for m in diff.get("before") or []],
                                              diff["after"].get("content") or "")
    if request is None and isinstance(diff, dict) and operation in ("forget", "expire"):
        request = {"hard_delete": diff.get("hard_delete"), "action": diff.get("action")}
    return confirmation.reasons(risk_level=level, operation=operation, request=request, merge_drops=drops)


def _require_confirmed(change, request: DecisionRequest, prepared: Prepared | None = None) -> None:
    """Refuse (422 confirmation_required) an unconfirmed approval that needs confirmation; nothing is decided."""
    if request.decision != "approve" or request.confirm_risk:
        return
    drops = False
    if change.operation == "merge" and prepared is not None and prepared.merge_plan is not None:
        drops = confirmation.merge_drops_facts([m.content or "" for m in prepared.merge_rows or []],
                                              prepared.merge_plan.content)
    found = confirmation.reasons(risk_level=change.risk_level, operation=change.operation,
                                 request=change.request, merge_drops=drops)
    if found:
        names = [str(f.get("name")) for f in change.risk_flags or [] if isinstance(f, dict)]
        raise ConfirmationRequired(
            f"approving this change needs confirmation ({confirmation.describe(found, change.risk_level)}): "
            "send confirm_risk to approve it",
            details={"reason": "confirmation_required", "risk_level": change.risk_level, "risk_flags": names,
                     "confirm": found})


@metrics.counts_decisions
def decide(ctx: AppContext, *, tenant_id: str, change_id: str, actor: dict[str, Any], may_see: AgentCheck,
           request: DecisionRequest, shown: Shown | None = None) -> dict[str, Any]:
    """Approve or reject a pending change (see module docstring for the guarantees). `shown`: the
    accounting of the fresh diff a stale review is refused with (see `Shown`)."""
    quoted: list[tuple[str, list[str]]] = []
    try:
        with ctx.db.sessions() as session:
            result = decide_in(ctx, session, tenant_id, change_id, actor, may_see, request, quoted=quoted)
            session.commit()
            return result
    except Conflict:
        # Accounted once the decision's transaction is over: its rollback must not take the read with it.
        if shown is not None and quoted:
            shown(*quoted[0])
        raise


def decide_in(ctx: AppContext, session, tenant_id: str, change_id: str, actor: dict[str, Any], may_see: AgentCheck,
               request: DecisionRequest, *, operation: str | None = None,
               quoted: list[tuple[str, list[str]]] | None = None) -> dict[str, Any]:
    """Decide in `session`'s transaction (the caller commits); returns the change as decided, with
    its `result`. `operation` is the change's when the caller has read it (the change page has).

    Work that must not happen under the change's lock (validation, redaction, embedding) is done
    first, when the request asks for it or the operation needs it (a merge's plan); a plain
    approval learns the operation under the lock, and a merge then lets go, plans and locks again."""
    if request.decision == "reject" and not (request.reason or "").strip():
        raise ValidationFailed.at("/reason", "a reason is required to reject")
    approving = request.decision == "approve"
    if approving:
        supersession.check_choice(keep_both=request.keep_both, supersedes=request.supersedes)
    approver = _approver(session, tenant_id, actor)
    # The one place a canary is told from a real change: it is decided like one (same checks, same
    # answer) but never applied (`_decide_canary`), whatever path the decision came by.
    canary = canaries.lookup(session, tenant_id, change_id)
    prepared = None
    if canary is not None:
        pass  # nothing to validate or embed: nothing of a canary is applied
    elif approving and (request.edits or request.merge_into or request.supersedes or request.memory_ids is not None
                      or request.keep_both or operation == "merge"):
        prepared = prepare(ctx, session, tenant_id, change_id, may_see, request)
    elif approving and request.seen_state is None:
        # A plain approval: most likely a staged remember that needs no more approvals.
        row = _lock_change_row(session, tenant_id, change_id, may_see)
        duties.refuse_own_change(session, tenant_id, row.submitted_by, actor)
        _require_confirmed(row, request)
        if row.operation == "remember" and row.approvals_required <= len(row.approvals) + 1:
            return _approve_staged_memory(ctx, session, row, actor, approver, request)
    change = load_change(session, tenant_id, change_id, may_see, lock=True)
    if approving and prepared is None and change.operation == "merge":
        session.rollback()  # the lock is let go while the plan is embedded
        prepared = prepare(ctx, session, tenant_id, change_id, may_see, request)
        change = load_change(session, tenant_id, change_id, may_see, lock=True)
    _require_pending(change)
    duties.refuse_own_change(session, tenant_id, change.submitted_by, actor)
    _require_confirmed(change, request, prepared)
    prepared = prepared or Prepared()
    fresh = None
    if request.seen_state is not None:  # the diff costs a search; only a quoted fingerprint needs it
        fresh = compute_diff(ctx, session, change)
        if request.seen_state != fresh["fingerprint"]:
            if quoted is not None:  # the refusal quotes the fresh diff: reading it is a read
                quoted.append((change.agent_id, change_reads.shown_in_diff(fresh)))
            raise Conflict("live state changed since this diff was shown; review the fresh diff",
                           details={"reason": "stale_review", "fingerprint": fresh["fingerprint"],
                                    "diff": fresh})
    who = actor_label(approver)
    now = utcnow()
    if request.decision == "reject":
        change.decided_view, change.decided_refs = snapshot(fresh or compute_diff(ctx, session, change), approver)
        change.decided_at, change.decided_by, change.reason = now, who, request.reason
        _reject(ctx, session, change, actor, request.reason)
    else:
        _require_owned_key(session, tenant_id, approver, change.approvals_required)
        _require_new_reviewer(change.approvals, who)
        if change.approvals_required > len(change.approvals) + 1:
            _require_no_outcome_choice(change, request)
            change.approvals = _with_approval(change.approvals, who, approver, now)
            ctx.audit.append(session, tenant_id=tenant_id, event_type="change.approval_recorded", actor=actor,
                             subject={"type": "change", "id": change.id},
                             data={"approvals": len(change.approvals), "required": change.approvals_required,
                                   "approver": who})
            events.change_event(session, change, "approval_recorded")  # other reviewers' pages follow it
            session.flush()
            return {**change_json(change), "result": None}
        # What the reviewer saw is kept before the change is applied (applying changes live state).
        change.decided_view, change.decided_refs = snapshot(fresh or compute_diff(ctx, session, change), approver)
        result = (_decide_canary(session, change, request) if canary is not None
                  else apply(ctx, session, change, actor, request, prepared))
        # Every column of the change is set together, so it is written in one UPDATE.
        change.approvals = _with_approval(change.approvals, who, approver, now)
        change.result, change.status = result, "approved"
        change.decided_at, change.decided_by, change.reason = now, who, request.reason
        _record_approval(ctx, session, change, actor, request)
    if canary is not None:
        canaries.decided(ctx, session, change, canary, reviewer=who, actor=actor, approved=approving)
    session.flush()
    return {**change_json(change), "result": change.result}


def _decide_canary(session, change: Change, request: DecisionRequest) -> dict[str, Any]:
    """An approved canary: its staged memory ends (never live, nothing it would retire is touched)
    and the change's result has the shape an approved remember's has."""
    staged = staged_memory(session, change, lock=True)
    staged.status, staged.ended_at, staged.updated_at = "rejected", utcnow(), utcnow()
    return {"memory_id": staged.id, **supersession.outcome([], keep_both=request.keep_both,
                                                           supersedes=request.supersedes)}


def _require_no_outcome_choice(change, request: DecisionRequest) -> None:
    """An approval that is not the last one only records its reviewer: what the change does (edits,
    merge_into, supersedes, a choice of memories) is chosen with the last approval. Sent earlier, it
    is refused rather than dropped, so no reviewer believes a choice applied that did not."""
    chosen = [name for name, value in (("edits", request.edits), ("merge_into", request.merge_into),
                                       ("supersedes", request.supersedes), ("memory_ids", request.memory_ids),
                                       ("keep_both", request.keep_both))
              if value]
    if chosen:
        raise ValidationFailed.at(f"/{chosen[0]}", f"{', '.join(chosen)} can only be given with the last approval: "
                                  f"this change needs {change.approvals_required} and this one only records yours")


def _require_pending(change) -> None:
    if change.status != "pending":
        raise Conflict(f"change already {change.status}", details={"reason": "already_decided",
                                                                   "status": change.status})


def has_approved(approvals: list[dict[str, Any]], who: str) -> bool:
    return any(a["by"] == who for a in approvals)


def _require_new_reviewer(approvals: list[dict[str, Any]], who: str) -> None:
    if has_approved(approvals, who):
        raise Conflict("the same reviewer cannot give both approvals", details={"reason": "same_reviewer"})


def _with_approval(approvals: list[dict[str, Any]], who: str, approver: dict[str, Any], now) -> list[dict[str, Any]]:
    """`approvals` and this one: who it counts as (`by`, `name`) and, when given with an API key, the
    key (`via_key`) and its owner's id (`owner`: None for a key of no one)."""
    entry = {"by": who, "name": approver.get("name"), "at": format_ts(now)}
    if approver.get("via_key"):
        entry.update(via_key=approver["via_key"], owner=approver.get("owner"))
    return [*approvals, entry]


def _approver(session, tenant_id: str, actor: dict[str, Any]) -> dict[str, Any]:
    """Whom a decision by `actor` counts as: a person signed in is themselves; a decision made with
    an API key that belongs to someone is that person's (`user:<id>`, their username), so they
    cannot give a second approval with a sign-in or another key of theirs; one made with a key of
    no one is the key's (`api_key:<id>`, no name: pages show it as "key <id> (no owner)"). A key
    whose owner no longer holds a role in the tenant, is disabled, or holds a role that does not
    decide (a viewer, an auditor) decides nothing (403): a key never decides more than its owner could."""
    if actor.get("kind") != "api_key":
        return actor
    key_id, owner = actor.get("id"), actor.get("owner_user_id")
    if owner is None:
        return {"kind": "api_key", "id": key_id, "name": None, "via_key": key_id, "owner": None}
    found = users_repo.member(session, tenant_id=tenant_id, user_id=owner)
    if found is None or found[0].disabled_at is not None:
        raise Forbidden("this key's owner no longer holds an active role in this tenant, so its decisions "
                        "cannot be counted as theirs; create a key for someone who does")
    if "decide" not in ROLE_POWERS[found[1].role]:  # a key never decides more than its owner could
        raise Forbidden(f"this key's owner holds the role '{found[1].role}' in this tenant, which does not "
                        "decide changes, so the key may not either")
    return {"kind": "user", "id": owner, "name": found[0].username, "via_key": key_id, "owner": owner}


def _require_owned_key(session, tenant_id: str, approver: dict[str, Any], approvals_required: int) -> None:
    """Refuse (403) an approval with a key of no one of a change needing two or more approvals when
    the tenant asks for owned keys there; such an approval cannot be tied to a person."""
    if approver.get("kind") != "api_key" or approvals_required < 2:
        return
    if tenant_config.two_person_owned_keys(tenant_repo.settings_of(session, tenant_id=tenant_id)):
        raise Forbidden(f"this change needs {approvals_required} approvals from different people and this key "
                        "belongs to no one; approve with a key that has an owner, or sign in")


def _record_approval(ctx: AppContext, session, change, actor: dict[str, Any], request: DecisionRequest) -> None:
    """The final approval's audit entry and `change.approved` event (`change` already holds its decision)."""
    ctx.audit.append(session, tenant_id=change.tenant_id, event_type="change.approved", actor=actor,
                     subject={"type": "change", "id": change.id},
                     data={"operation": change.operation, "memory_ids": list(change.memory_ids),
                           "edited": bool(request.edits), "merge_into": request.merge_into,
                           "supersedes": request.supersedes, "reason_given": bool(request.reason),
                           "retired": [r["id"] for r in (change.result or {}).get("retired") or []],
                           "kept_by_choice": list((change.result or {}).get("kept_by_choice") or []),
                           "approvers": [a["by"] for a in change.approvals]})
    events.change_event(session, change, "approved")


def _lock_change_row(session, tenant_id: str, change_id: str, may_see: AgentCheck):
    """The pending change as a plain row, locked until commit; 404 / 409 as `load_change` and `decide_in`."""
    row = changes_repo.lock_row(session, tenant_id=tenant_id, change_id=change_id)
    if row is None or not may_see(row.agent_id):
        raise NotFound("change not found")
    _require_pending(row)
    return row


def _approve_staged_memory(ctx: AppContext, session, row, actor: dict[str, Any], approver: dict[str, Any],
                           request: DecisionRequest) -> dict[str, Any]:
    """Approve a locked, pending `remember` change that needs no further approval, without edits:
    the same writes, audit entries and events as the general path (`apply` and `_committed` in
    `app.services.review.approval`).
    `approver` is whom the approval counts as (`_approver`); audit entries name `actor`."""
    who, now = actor_label(approver), utcnow()
    _require_owned_key(session, row.tenant_id, approver, row.approvals_required)
    _require_new_reviewer(row.approvals, who)
    memory_id = row.memory_ids[0]
    reviewer = decided_reviewer(approver)
    staged = staged_memory(session, row)
    planned = replaced(ctx, session, row, staged, candidates_for(session, row, staged))
    result = {"memory_id": memory_id, **supersession.outcome(planned, keep_both=request.keep_both,
                                                             supersedes=request.supersedes)}
    retiring = supersession.lock(session, tenant_id=row.tenant_id, agent_id=row.agent_id, result=result)
    decided = SimpleNamespace(**{
        **row._mapping, "status": "approved", "approvals": _with_approval(row.approvals, who, approver, now),
        "result": result, "decided_at": now, "decided_by": who, "reason": request.reason,
        "decided_view": {"reviewer": reviewer}})
    memory = changes_repo.approve_staged_remember(
        session, tenant_id=row.tenant_id, change_id=row.id, memory_id=memory_id, now=now,
        approvals=decided.approvals, result=decided.result, decided_by=who, reason=request.reason,
        reviewer=reviewer)
    ctx.audit.append(session, tenant_id=row.tenant_id, event_type="memory.committed", actor=actor,
                     subject={"type": "memory", "id": memory.id},
                     data=mem.memory_event(ctx, memory, change_id=row.id, edited=False))
    events.memory_written(session, memory)
    supersession.retire(ctx, session, tenant_id=row.tenant_id, change_id=row.id, actor=actor, new_id=memory.id,
                        rows=retiring)
    _record_approval(ctx, session, decided, actor, request)
    return {**change_json(decided), "result": decided.result}


def withdraw(ctx: AppContext, *, tenant_id: str, change_id: str, actor: dict[str, Any], may_see: AgentCheck) -> dict:
    """The submitting agent takes its change back before a decision."""
    with ctx.db.sessions.begin() as session:
        change = load_change(session, tenant_id, change_id, may_see, lock=True)
        if change.status != "pending":
            raise Conflict(f"change already {change.status}", details={"reason": "already_decided",
                                                                       "status": change.status})
        if change.operation in recover.RECOVER_OPERATIONS:
            raise Forbidden("a recover's changes are decided by a reviewer; the agent cannot withdraw them")
        change.status, change.decided_at, change.decided_by = "withdrawn", utcnow(), actor_label(actor)
        if change.operation == "remember":
            memory = staged_memory(session, change, lock=True)
            memory.status, memory.updated_at = "withdrawn", utcnow()
            _staged_memory_ended(ctx, session, memory, "memory.withdrawn", change, actor)
        ctx.audit.append(session, tenant_id=tenant_id, event_type="change.withdrawn", actor=actor,
                         subject={"type": "change", "id": change.id}, data={"operation": change.operation})
        events.change_event(session, change, "withdrawn")
        return change_json(change)


def _staged_memory_ended(ctx: AppContext, session, memory: Memory, event_type: str, change, actor: dict) -> None:
    """Record a staged memory's end (rejected, withdrawn): its state is bound to the log like any other."""
    ctx.audit.append(session, tenant_id=change.tenant_id, event_type=event_type, actor=actor,
                     subject={"type": "memory", "id": memory.id},
                     data=mem.memory_event(ctx, memory, change_id=change.id))


def actor_label(actor: dict[str, Any]) -> str:
    return f"{actor.get('kind')}:{actor.get('id')}"


def _reject(ctx: AppContext, session, change: Change, actor: dict, reason: str | None) -> None:
    change.status = "rejected"
    if change.operation == "remember":
        memory = staged_memory(session, change, lock=True)
        memory.status, memory.updated_at = "rejected", utcnow()
        _staged_memory_ended(ctx, session, memory, "memory.rejected", change, actor)
    elif change.operation in recover.RECOVER_OPERATIONS:
        recover.reject(ctx, session, change, actor, reason)
    ctx.audit.append(session, tenant_id=change.tenant_id, event_type="change.rejected", actor=actor,
                     subject={"type": "change", "id": change.id},
                     data={"operation": change.operation, "memory_ids": list(change.memory_ids),
                           "reason_digest": hashlib.sha256((reason or "").encode()).hexdigest()})
    events.change_event(session, change, "rejected")
