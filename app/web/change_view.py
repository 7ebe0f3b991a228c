"""The reviewer's change page as it is rendered (`app.web.review`): the change with its live diff (or,
once decided, the diff as decided), the next pending change in the queue's filter and sort, and,
after a decision made on the page, what it did; a refused decision comes back with the page's
fresh state. The live memory the page quotes is recorded as read by the reviewer."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from app.db.models import Change
from app.errors import AppError, ConfirmationRequired, Conflict, NotFound, OwnChange
from app.repos.memory import memories as repo
from app.repos.review import changes as changes_repo
from app.repos.review.changes import QueueFilter
from app.services.review import change_reads, duties
from app.services.review.changes import list_in, load_change
from app.services.review.diffs import view_of
from app.services.review.review import DecisionRequest, actor_label, decide_in, has_approved
from app.services.runtime.context import AppContext
from app.services.tenancy.users import Reviewer, TenantRole


@dataclass
class ChangePage:
    """What the reviewer's change page shows, read in the session that decided it (if it did)."""

    role: TenantRole
    change: Change
    """As read (the page shows its risk flags); `view["change"]` is its current state."""
    view: dict[str, Any]
    next_id: str | None = None
    pending: int | None = None
    result: dict[str, Any] | None = None
    also_live: str | None = None
    conflict: AppError | None = None
    """A refused decision: 409 (decided meanwhile, stale review) or 422 confirmation_required."""
    approved_by_you: bool = False
    """The signed-in reviewer has given one of the approvals of this still-pending change."""
    own_change: bool = False
    """The signed-in reviewer is this change's author (`app.services.review.duties`): they cannot decide it."""


def approved_by(view: dict[str, Any], user: Reviewer) -> bool:
    """Whether `user` already approved the pending change in `view` (a second approval must be someone else's)."""
    change, who = view["change"], actor_label(user.actor)
    return change["status"] == "pending" and has_approved(change["approvals"], who)


def _own(session, change: Change, user: Reviewer) -> bool:
    """Whether the signed-in `user` is the author of the pending `change` (the page offers no decision)."""
    return change.status == "pending" and duties.is_own_change(session, change.tenant_id, change.submitted_by,
                                                               user.actor)


def _locate(session, user: Reviewer, change_id: str, power: str) -> tuple[TenantRole, Change]:
    """The change in the URL and the role under which this user may use `power` on it; 404 if none."""
    change = changes_repo.find_in_tenants(session, tenant_ids=[r.tenant_id for r in user.roles],
                                          change_id=change_id)
    if change is None or not user.may("read", change.tenant_id, change.agent_id):
        raise NotFound("change not found")
    role = user.role_in(change.tenant_id)
    if power != "read" and not role.can(power):
        raise NotFound("change not found")
    return role, change


NEXT_LOOKAHEAD = 25
"""How many changes at the head of the queue "Next" looks through for one this reviewer has not approved."""


def _next_pending(session, role: TenantRole, decided_id: str, flt: QueueFilter | None = None,
                  user: Reviewer | None = None) -> tuple[str | None, int]:
    """The next pending change to review in the queue's filter and sort (`flt`; oldest first when
    None), not this one nor one `user` already approved (its other approval must be someone else's),
    and how many changes the filter lists."""
    flt = flt or QueueFilter()
    rows, total = list_in(session, role.tenant_id, role.agents, flt, NEXT_LOOKAHEAD)
    who = actor_label(user.actor) if user is not None else None
    found = next((c.id for c in rows if c.id != decided_id and not has_approved(c.approvals, who)), None)
    if found is None and who is not None and total > len(rows):
        # The head of the queue is all approved by this reviewer: ask past it, leaving those out in SQL.
        rest, _ = list_in(session, role.tenant_id, role.agents, replace(flt, not_approved_by=who), 2)
        found = next((c.id for c in rest if c.id != decided_id), None)
    return found, total


def _still_live(session, role: TenantRole, memory_id: str, result: dict[str, Any]) -> str | None:
    """After a plain approve of a remember, the similar memory the reviewer was shown if it is still
    live — both now are, and the page says so; None when there was none or the decision ended it."""
    outcome = result.get("result") or {}
    if (result.get("operation") != "remember" or result.get("status") != "approved" or not memory_id
            or outcome.get("superseded") or outcome.get("merged_into")):
        return None
    found = repo.live_owner(session, tenant_ids=[role.tenant_id], memory_id=memory_id)
    return memory_id if found and role.sees_agent(found.agent_id) else None


def change_page(ctx: AppContext, user: Reviewer, change_id: str, flt: QueueFilter | None = None) -> ChangePage:
    """The change page: the change with its live diff, the next pending change (in the queue's filter
    and sort `flt`) and the queue's count."""
    with ctx.db.sessions.begin() as session:
        role, change = _locate(session, user, change_id, "read")
        next_id, pending = _next_pending(session, role, change.id, flt, user)
        view = view_of(ctx, session, change)
        _note_page(ctx, session, user, role, change, view)
        return ChangePage(role, change, view, next_id=next_id, pending=pending,
                          approved_by_you=approved_by(view, user), own_change=_own(session, change, user))


def shown_on_page(view: dict[str, Any]) -> list[str]:
    """Ids of the live memories a change page's view quotes (the live diff, or the decided copy)."""
    if view.get("diff") is not None:
        return change_reads.shown_in_diff(view["diff"])
    return change_reads.shown_in_diff(view.get("decided_diff"),
                                      proposed_is_memory=view["change"]["status"] == "approved")


def _note_page(ctx: AppContext, session, user: Reviewer, role: TenantRole, change: Change,
               view: dict[str, Any]) -> None:
    """A change page quotes live memory (what the change would touch, its neighbours, the decided
    copy): the reviewer has read it. Recorded in the page's own session, never budgeted (people
    are not keys)."""
    change_reads.for_person(ctx, tenant_id=role.tenant_id, actor=user.actor, operation="review.change",
                            agent_id=change.agent_id, memory_ids=shown_on_page(view),
                            query={"change_id": change.id}, session=session)


def decide_on_page(ctx: AppContext, user: Reviewer, change_id: str, request: DecisionRequest,
                   also_live: str | None = None, flt: QueueFilter | None = None) -> ChangePage:
    """A reviewer's decision from the change page, in one session: find the change, decide it, and
    read what the page shows next (its new state, what the decision did, the next pending change,
    whether `also_live` - the similar memory shown - is still live). A refused decision (409, 422
    when a high-risk approval lacks `confirm_risk`, 403 `own_change` from its author) comes back as
    `conflict` with the page's fresh state; other errors raise."""
    with ctx.db.sessions() as session:
        role, change = _locate(session, user, change_id, "decide")
        try:
            result = decide_in(ctx, session, role.tenant_id, change.id, user.actor, role.sees_agent, request,
                                operation=change.operation)
        except (Conflict, ConfirmationRequired, OwnChange) as error:
            session.rollback()
            change = load_change(session, role.tenant_id, change_id, role.sees_agent)
            view = view_of(ctx, session, change)
            _note_page(ctx, session, user, role, change, view)
            page = ChangePage(role, change, view, conflict=error, approved_by_you=approved_by(view, user),
                              own_change=isinstance(error, OwnChange))
            session.commit()
            return page
        # Read back as decided (a plain approval wrote it in SQL, past the session's copy): the page
        # shows the diff as decided, or the live diff while more approvals are needed.
        session.expire_all()
        view = view_of(ctx, session, load_change(session, role.tenant_id, change_id, role.sees_agent))
        next_id, pending = _next_pending(session, role, change.id, flt, user)
        page = ChangePage(role, change, view, next_id=next_id, pending=pending, result=result,
                          also_live=_still_live(session, role, also_live or "", result),
                          approved_by_you=approved_by(view, user))
        _note_page(ctx, session, user, role, change, view)
        session.commit()
        return page
