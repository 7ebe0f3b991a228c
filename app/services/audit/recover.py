"""Recover from a compromised principal: an API key, an agent or an upstream source found to have
been poisoned between two times.

- Every live memory the principal wrote in the window goes back to review as a `quarantine` change:
  the row returns behind the pending sentinel (status `pending`), so recall, list and get stop
  serving it at once. Approving the change makes it live again; rejecting it forgets it.
- Every forget, merge or expire the principal made in the window becomes a `revert` change, one per
  ended memory: approving it restores that memory to live; rejecting it leaves it ended. A hard
  delete cannot be reverted (its content is gone) and is reported as such.

Taint follows lineage (`app.services.memory.derivations`): every memory derived, transitively, from a
memory the principal wrote in the window (in any status: a write compacted away lives on in what
it was folded into) or from the canonical memory of a merge it made is its blast radius. Each live
one is quarantined too, its change naming the derivation path; derived ones pending review or no
longer served are listed. `app.services.audit.incident` reports who read any of them.

A dry run reports the same counts and ids and changes nothing. A real run is one transaction: a
`recover` audit event (principal, window, counts), a `memory.quarantined` or `memory.revert_offered`
event per memory and a `change.proposed` event per change; no memory content reaches the audit log
(`memory_event`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.core.ids import new_id
from app.core.policy import Decision
from app.core.timefmt import format_ts, parse_ts, utcnow
from app.db.models import Change, Memory
from app.errors import Conflict, ValidationFailed
from app.repos.memory import memories as memories_repo
from app.repos.audit import recovery
from app.repos.audit.recovery import Window
from app.core.lineage import Reached
from app.services.memory import derivations, staging
from app.services.events import events
from app.services.review import learned_revocation
from app.services.audit.audit import actor_label, chain_for
from app.services.runtime.context import AppContext
from app.services.memory.memories import apply_forget, memory_event, state_record

KINDS = ("key", "agent", "source")
KIND_LABELS = (("key", "API key id"), ("agent", "agent id"), ("source", "source"))
"""The principals a recover names, as the pages' forms offer them."""
RULE = "recover"
"""The `policy_rule` of every change a recover raises: the queue filters on it."""

# What each ending event left behind, and so what reverting it checks and undoes.
ENDED_AS = {"memory.forgotten": "forget", "memory.expired.forget": "expire (forget)",
            "memory.expired.archive": "expire (archive)", "memory.expired.demote": "expire (demote)",
            "memory.merged_into": "merge", "memory.hard_deleted": "hard delete"}


@dataclass(frozen=True)
class Target:
    """A validated recover request: who (`kind`, `value`) and when (`since` ≤ t < `until`)."""

    kind: str
    value: str
    since: datetime
    until: datetime | None

    @property
    def reason(self) -> str:
        """The reason every change of this recover carries."""
        until = format_ts(self.until) if self.until else "now"
        return f"recover: {self.kind} {self.value} wrote or changed this between {format_ts(self.since)} and {until}"

    def principal_json(self) -> dict[str, str]:
        return {"kind": self.kind, "id": self.value}

    def window_json(self) -> dict[str, str | None]:
        return {"since": format_ts(self.since), "until": format_ts(self.until)}


def _time(value: Any, path: str) -> datetime:
    try:
        return parse_ts(value)
    except (TypeError, ValueError) as exc:
        raise ValidationFailed.at(path, f"not an RFC 3339 timestamp or epoch milliseconds: {exc}") from None


def parse_form_target(kind: str, value: str, since: str, until: str) -> Target:
    """A target as a page's form gives it: the principal's kind and value, and the window; 422 otherwise."""
    if kind not in KINDS:
        raise ValidationFailed.at("/kind", "choose an API key id, an agent id or a source")
    return parse_target(**{kind: value}, since=since or None, until=until or None)


def parse_target(*, key: str | None = None, agent: str | None = None, source: str | None = None,
                 since: Any = None, until: Any = None) -> Target:
    """Exactly one principal and a window whose end (if given) is after its start; 422 otherwise."""
    given = [(kind, value) for kind, value in (("key", key), ("agent", agent), ("source", source))
             if value is not None and str(value).strip()]
    if len(given) != 1:
        raise ValidationFailed("name exactly one principal to recover from: a key, an agent or a source",
                               details=[{"path": f"/{k}", "message": "exactly one of key, agent, source is required"}
                                        for k in KINDS])
    if since is None or (isinstance(since, str) and not since.strip()):
        raise ValidationFailed.at("/since", "since is required: the start of the poisoned window")
    start = _time(since, "/since")
    end = _time(until, "/until") if until is not None and str(until).strip() else None
    if end is not None and end <= start:
        raise ValidationFailed.at("/until", "until must be after since")
    kind, value = given[0]
    return Target(kind, str(value).strip(), start, end)


@dataclass(frozen=True)
class Derived:
    """A memory of the blast radius that the principal did not write itself: its nearest path
    from a recovered memory, and what this recover does with it (`quarantine` a live one; a
    pending one is `awaiting_review`; an ended one is `not_served`)."""

    memory: Memory
    reached: Reached
    action: str

    def reason(self, target: Target) -> str:
        kinds = " then ".join(self.reached.kinds)
        return f"recover: derived ({kinds}) from {self.reached.path[0]}, which {target.kind} {target.value} " \
               f"wrote or changed between {format_ts(target.since)} and " \
               f"{format_ts(target.until) if target.until else 'now'}"

    def json(self) -> dict[str, Any]:
        return {"memory_id": self.memory.id, "status": self.memory.status, "action": self.action,
                "root": self.reached.path[0], "path": list(self.reached.path), "kinds": list(self.reached.kinds),
                "depth": self.reached.depth}


@dataclass
class Plan:
    """What a recover finds: the memories to quarantine, the endings to offer for revert, and the
    endings that cannot be reverted (with why)."""

    quarantine: list[Memory]
    revert: list[tuple[recovery.Ending, Memory]]
    not_revertable: list[dict[str, str]]
    already_pending: list[str]
    """Memories found whose revert a pending change already offers (an earlier recover)."""
    awaiting_review: list[str]
    """Writes of the principal still staged for their first review (or quarantined by an earlier
    recover): not served, but a reviewer should reject rather than approve them."""
    roots: list[str]
    """The recovered memories the blast radius is walked from."""
    derived: list[Derived]
    truncated: bool
    """The walk stopped at `derivations.MAX_DEPTH` with memories left beyond it."""

    @property
    def derived_quarantine(self) -> list[Derived]:
        return [d for d in self.derived if d.action == "quarantine"]


def _revertable(event_type: str, memory: Memory | None) -> str | None:
    """Why the memory `event_type` ended cannot be restored now, or None when it can."""
    if memory is None:
        return "memory not found"
    if event_type not in ENDED_AS:
        return "not a forget, merge or expire"
    if event_type == "memory.hard_deleted" or memory.hard_deleted:
        return "hard deleted: its content is gone"
    expected = {"memory.forgotten": "forgotten", "memory.expired.forget": "forgotten",
                "memory.expired.archive": "archived", "memory.merged_into": "merged",
                "memory.expired.demote": "live"}[event_type]
    if memory.status != expected:
        return f"now {memory.status}, not {expected}"
    if event_type == "memory.expired.demote" and memory.score_multiplier >= 1:
        return "no longer demoted"
    return None


def _window(tenant_id: str, target: Target) -> Window:
    return Window(tenant_id, chain_for(tenant_id), target.kind, target.value, target.since, target.until)


def roots_of(session, tenant_id: str, target: Target) -> list[str]:
    """The recovered memories: every memory the principal wrote in the window, in any status,
    oldest first, then the canonical memory of each merge it made there (it wrote that content too)."""
    window = _window(tenant_id, target)
    written = [m.id for m in recovery.written(session, window, status=None)]
    merged_into = [e.memory_id for e in recovery.endings(session, window, ("memory.merged",))]
    return list(dict.fromkeys(written + merged_into))


def _nearest(radius, exclude: set[str]) -> dict[str, Reached]:
    """Each memory of the radius outside `exclude` → its nearest path from any root (the shortest,
    then the earliest, then the smallest root id)."""
    nearest: dict[str, Reached] = {}
    for root in sorted(radius.by_root):
        for memory_id, reached in radius.by_root[root].items():
            if memory_id in exclude:
                continue
            known = nearest.get(memory_id)
            if known is None or (reached.depth, reached.tainted_at) < (known.depth, known.tainted_at):
                nearest[memory_id] = reached
    return nearest


def _derived(session, tenant_id: str, roots: list[str], direct: set[str], *, lock: bool) -> tuple[list[Derived], bool]:
    radius = derivations.blast_radius(session, tenant_id=tenant_id, roots=roots)
    nearest = _nearest(radius, direct | set(roots))
    rows = recovery.memories_by_id(session, tenant_id=tenant_id, ids=sorted(nearest), lock=lock)
    derived = []
    for memory_id, reached in sorted(nearest.items(), key=lambda item: (item[1].depth, item[1].tainted_at, item[0])):
        memory = rows.get(memory_id)
        if memory is None:
            continue
        action = {"live": "quarantine", "pending": "awaiting_review"}.get(memory.status, "not_served")
        derived.append(Derived(memory, reached, action))
    return derived, bool(radius.truncated)


def _plan(session, tenant_id: str, target: Target, *, lock: bool) -> Plan:
    window = _window(tenant_id, target)
    quarantine = recovery.written(session, window, lock=lock)
    # A merge rewrites its canonical memory: the principal wrote that content too.
    merged_into = {e.memory_id for e in recovery.endings(session, window, ("memory.merged",))}
    merged_into -= {m.id for m in quarantine}
    quarantine += [m for m in recovery.memories_by_id(session, tenant_id=tenant_id, ids=sorted(merged_into),
                                                      lock=lock).values() if m.status == "live"]
    awaiting = [m.id for m in recovery.written(session, window, status="pending")]
    roots = roots_of(session, tenant_id, target)
    derived, truncated = _derived(session, tenant_id, roots, {m.id for m in quarantine}, lock=lock)
    latest: dict[str, recovery.Ending] = {}
    for ending in recovery.endings(session, window):
        latest[ending.memory_id] = ending  # oldest first: the last ending of a memory is its current one
    rows = recovery.memories_by_id(session, tenant_id=tenant_id, ids=sorted(latest), lock=lock)
    covered = recovery.pending_of(session, tenant_id=tenant_id, operation="revert", memory_ids=sorted(latest))
    revert, refused = [], []
    quarantined = {m.id for m in quarantine} | {d.memory.id for d in derived if d.action == "quarantine"}
    for memory_id, ending in sorted(latest.items(), key=lambda item: item[1].seq):
        if memory_id in covered:
            continue
        why = "quarantined by this recover: decide that first" if memory_id in quarantined \
            else _revertable(ending.event_type, rows.get(memory_id))
        if why is None:
            revert.append((ending, rows[memory_id]))
        else:
            refused.append({"memory_id": memory_id, "operation": ENDED_AS[ending.event_type], "reason": why})
    return Plan(quarantine, revert, refused, sorted(covered), awaiting, roots, derived, truncated)


def _report(target: Target, plan: Plan, *, dry_run: bool, recover_id: str | None,
            quarantine_changes: list[str] = (), revert_changes: list[str] = (),
            derived_changes: list[str] = ()) -> dict[str, Any]:
    return {
        "recover_id": recover_id, "dry_run": dry_run, "principal": target.principal_json(),
        **target.window_json(),
        "counts": {"quarantined": len(plan.quarantine), "revertable": len(plan.revert),
                   "not_revertable": len(plan.not_revertable), "already_pending": len(plan.already_pending),
                   "awaiting_review": len(plan.awaiting_review), "recovered": len(plan.roots),
                   "derived": len(plan.derived), "derived_quarantined": len(plan.derived_quarantine)},
        "quarantined": [m.id for m in plan.quarantine],
        "revertable": [{"memory_id": m.id, "operation": ENDED_AS[e.event_type], "audit_seq": e.seq,
                        "at": format_ts(e.ts)} for e, m in plan.revert],
        "not_revertable": plan.not_revertable,
        "already_pending": plan.already_pending, "awaiting_review": plan.awaiting_review,
        "quarantine_changes": list(quarantine_changes), "revert_changes": list(revert_changes),
        "derived": [d.json() for d in plan.derived], "derived_changes": list(derived_changes),
        "blast_radius_truncated": plan.truncated,
    }


def recover(ctx: AppContext, *, tenant_id: str, target: Target, actor: dict[str, Any],
            dry_run: bool = False) -> dict[str, Any]:
    """Quarantine what `target` wrote and offer to revert what it ended (see the module docstring);
    returns the report (counts and ids). A dry run reads only."""
    with ctx.db.sessions.begin() as session:
        if target.kind == "key" and not recovery.key_known(session, tenant_id=tenant_id, key_id=target.value):
            raise ValidationFailed.at("/key", f"no API key {target.value!r} in this tenant")
        plan = _plan(session, tenant_id, target, lock=not dry_run)
        if dry_run:
            return _report(target, plan, dry_run=True, recover_id=None)
        recover_id = new_id("rcv")
        report_counts = _report(target, plan, dry_run=False, recover_id=recover_id)["counts"]
        ctx.audit.append(session, tenant_id=tenant_id, event_type="recover", actor=actor,
                         subject={"type": "recover", "id": recover_id},
                         data={"principal": target.principal_json(), **target.window_json(), **report_counts})
        decision = Decision("require_approval", 1, RULE, target.reason)
        submitter = actor_label(actor)
        request = {"recover_id": recover_id, "reason": target.reason, "principal": target.principal_json(),
                   **target.window_json()}
        # A learned rule that approved any of these writes stops approving before they are pulled back.
        learned_revocation.revoke_for(ctx, session, tenant_id=tenant_id,
                                      memory_ids=[m.id for m in plan.quarantine]
                                      + [d.memory.id for d in plan.derived_quarantine],
                                      cause="quarantined", actor=actor)
        quarantined = []
        for memory in plan.quarantine:
            change = staging.stage_change_by(
                ctx, session, tenant_id=tenant_id, submitted_by=submitter, actor=actor, operation="quarantine",
                agent_id=memory.agent_id, user_id=memory.user_id, request=request, memory_ids=[memory.id],
                decision=decision, redactions=[])
            memory.status, memory.updated_at = "pending", utcnow()
            ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.quarantined", actor=actor,
                             subject={"type": "memory", "id": memory.id},
                             data=memory_event(ctx, memory, change_id=change.id, recover_id=recover_id))
            quarantined.append(change.id)
        derived = [_quarantine_derived(ctx, session, tenant_id, target, item, actor, submitter, request, recover_id)
                   for item in plan.derived_quarantine]
        reverts = []
        for ending, memory in plan.revert:
            change = staging.stage_change_by(
                ctx, session, tenant_id=tenant_id, submitted_by=submitter, actor=actor, operation="revert",
                agent_id=memory.agent_id, user_id=memory.user_id,
                request={**request, "reverts": ending.event_type, "audit_seq": ending.seq},
                memory_ids=[memory.id], decision=decision, redactions=[])
            ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.revert_offered", actor=actor,
                             subject={"type": "memory", "id": memory.id},
                             data={"change_id": change.id, "recover_id": recover_id, "reverts": ending.event_type,
                                   "reverts_seq": ending.seq, "state": state_record(ctx, memory)})
            reverts.append(change.id)
        session.flush()
        return _report(target, plan, dry_run=False, recover_id=recover_id, quarantine_changes=quarantined,
                       revert_changes=reverts, derived_changes=derived)


def _quarantine_derived(ctx: AppContext, session, tenant_id: str, target: Target, item: Derived,
                        actor: dict[str, Any], submitter: str, request: dict[str, Any], recover_id: str) -> str:
    """Quarantine a live memory derived from a recovered one, as a recovered one is: its change
    and audit entry name the path (ids and kinds, no content). Returns the change id."""
    memory, reason = item.memory, item.reason(target)
    change = staging.stage_change_by(
        ctx, session, tenant_id=tenant_id, submitted_by=submitter, actor=actor, operation="quarantine",
        agent_id=memory.agent_id, user_id=memory.user_id,
        request={**request, "reason": reason, "derived_from": list(item.reached.path),
                 "derivation": list(item.reached.kinds)},
        memory_ids=[memory.id], decision=Decision("require_approval", 1, RULE, reason), redactions=[])
    memory.status, memory.updated_at = "pending", utcnow()
    ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.quarantined", actor=actor,
                     subject={"type": "memory", "id": memory.id},
                     data=memory_event(ctx, memory, change_id=change.id, recover_id=recover_id,
                                       derived_from=list(item.reached.path), derivation=list(item.reached.kinds)))
    return change.id


# --- deciding the changes a recover raised (called by app.services.review: diffs, approval, review) -------

RECOVER_OPERATIONS = ("quarantine", "revert")


def diff(session, change: Change) -> dict[str, Any]:
    """The review diff of a quarantine or revert change: the memory, its status now and the reason."""
    memory = memories_repo.get_by_key(session, tenant_id=change.tenant_id, memory_id=change.memory_ids[0])
    request = change.request or {}
    return {"memory": memory, "status": memory.status if memory else None, "reason": request.get("reason"),
            "reverts": ENDED_AS.get(request.get("reverts", ""), None), "recover_id": request.get("recover_id"),
            "_state": [(memory.id, memory.updated_at, memory.status)] if memory else []}


def _locked(session, change: Change) -> Memory:
    memory = memories_repo.get_by_key(session, tenant_id=change.tenant_id, memory_id=change.memory_ids[0], lock=True)
    if memory is None:
        raise Conflict("the memory is gone; reject this change", details={"reason": "stale_review"})
    return memory


def approve(ctx: AppContext, session, change: Change, actor: dict[str, Any]) -> dict[str, Any]:
    """Approving a quarantine puts the memory live again; approving a revert restores the memory
    the forget, merge or expire ended (the merge's canonical memory keeps its merged content)."""
    memory, now = _locked(session, change), utcnow()
    if change.operation == "quarantine":
        if memory.status != "pending":
            raise Conflict(f"the memory is {memory.status}, no longer quarantined; reject this change",
                           details={"reason": "stale_review"})
        memory.status, memory.updated_at = "live", now
        event = "memory.released"
    else:
        why = _revertable(str(change.request.get("reverts")), memory)
        if why is not None:
            raise Conflict(f"cannot revert: {why}; reject this change", details={"reason": "stale_review"})
        memory.status, memory.ended_at, memory.merged_into = "live", None, None
        memory.score_multiplier, memory.updated_at = 1.0, now
        event = "memory.reinstated"
    session.flush()
    ctx.audit.append(session, tenant_id=change.tenant_id, event_type=event, actor=actor,
                     subject={"type": "memory", "id": memory.id},
                     data=memory_event(ctx, memory, change_id=change.id, recover_id=change.request.get("recover_id")))
    events.memory_written(session, memory)
    return {"memory_id": memory.id, "status": "live"}


def reject(ctx: AppContext, session, change: Change, actor: dict[str, Any], reason: str | None) -> None:
    """Rejecting a quarantine forgets the memory; rejecting a revert leaves the memory as it is."""
    if change.operation != "quarantine":
        return
    memory = _locked(session, change)
    if memory.status == "pending":
        apply_forget(ctx, session, change.tenant_id, actor, [memory], hard=False, reason=reason, change_id=change.id,
                     cause="rejected")
