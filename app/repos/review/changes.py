"""SQL for staged changes (table `changes`): the review queue's pages and counts, one change read
or locked for a decision, and the one-statement approval of a staged remember. Every query is
scoped by tenant."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from sqlalchemy import and_, bindparam, case, func, literal, or_, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session, aliased

from app.core.screening.flags import SEVERITIES, level_rank
from app.db.models import Change, Memory, Tenant

RISK_RANK = {level: level_rank(level) for level in SEVERITIES}  # "none" is 0 (the CASE's else)


@dataclass(frozen=True)
class QueueFilter:
    """Which changes a queue page lists, and in which order."""

    status: str = "pending"
    agent_id: str | None = None
    operation: str | None = None
    memory_type: str | None = None
    policy_rule: str | None = None
    older_than_minutes: int | None = None
    min_risk: str | None = None  # "low" | "medium" | "high": at least this risk level
    sort: str = "oldest"  # "oldest" | "newest" | "risk" (highest risk first, then oldest)
    overdue: bool = False
    """Only changes waiting longer than the tenant's review SLA (no SLA: no narrowing)."""
    not_approved_by: str | None = None
    """Leave out changes this approver (an actor label, `user:<id>`) has already approved."""


def risk_rank():
    """SQL: a change's risk level as a number, for sorting and filtering (0 = no flags)."""
    return case(*[(Change.risk_level == name, rank) for name, rank in RISK_RANK.items()], else_=0)


def insert(session: Session, change: Change) -> Change:
    session.add(change)
    session.flush()
    return change


def get(session: Session, *, tenant_id: str, change_id: str, lock: bool = False) -> Change | None:
    """The tenant's change, or None. A locked read always reloads the row: an earlier unlocked read
    in the same session must not hide a decision committed meanwhile."""
    stmt = select(Change).where(Change.id == change_id, Change.tenant_id == tenant_id)
    if lock:
        stmt = stmt.with_for_update().execution_options(populate_existing=True)
    return session.scalars(stmt).first()


def find_in_tenants(session: Session, *, tenant_ids: Sequence[str], change_id: str) -> Change | None:
    """The change with this id in any of `tenant_ids` (a reviewer's tenants), or None."""
    return session.scalars(select(Change).where(Change.tenant_id.in_(list(tenant_ids)),
                                                Change.id == change_id)).first()


def page(session: Session, *, tenant_id: str, flt: QueueFilter, agent_prefixes: Sequence[str] | None,
         limit: int, after: tuple | None = None) -> tuple[list[Change], int]:
    """Up to `limit` changes in `flt.sort` order after the keyset `after`, and the total matching.

    `after` is the last row's (submitted_at, id), or (risk rank, submitted_at, id) for the risk sort.
    `agent_prefixes` narrows by agent id prefix (None: every agent); callers apply exact globs."""
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
    if flt.overdue:
        sla = select(func.coalesce(Tenant.settings["review_sla_seconds"].as_integer(), 0)).where(
            Tenant.id == tenant_id).scalar_subquery()
        conds.append(Change.submitted_at < func.now() - func.make_interval(0, 0, 0, 0, 0, 0, sla))
    if flt.not_approved_by:
        conds.append(~Change.approvals.contains([{"by": flt.not_approved_by}]))
    if flt.memory_type:
        conds.append(Change.memory_ids.overlap(
            select(func.array_agg(Memory.id)).where(Memory.tenant_id == tenant_id, Memory.type == flt.memory_type,
                                                    Memory.status == "pending").scalar_subquery()))
    rank = risk_rank()
    if flt.min_risk in RISK_RANK:
        conds.append(rank >= RISK_RANK[flt.min_risk])
    if agent_prefixes is not None:
        conds.append(or_(*[Change.agent_id.startswith(p) for p in agent_prefixes]))
    where = and_(*conds)
    # On a first page the total comes with it (a window count is taken before LIMIT): one round
    # trip. Later pages count apart, as their keyset predicate narrows the window.
    stmt = select(Change, func.count().over().label("total")).where(where)
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
    found = session.execute(stmt.limit(limit)).all()
    rows = [row[0] for row in found]
    if after is None:
        return rows, found[0].total if found else 0
    return rows, session.scalar(select(func.count()).select_from(Change).where(where)) or 0


def pending_touching(session: Session, *, tenant_id: str, memory_id: str, limit: int = 5) -> list:
    """The tenant's pending changes that name this memory (a forget, merge or expire staged on it),
    oldest first: id, operation, agent_id, submitted_at."""
    return list(session.execute(
        select(Change.id, Change.operation, Change.agent_id, Change.submitted_at)
        .where(Change.tenant_id == tenant_id, Change.status == "pending", Change.memory_ids.contains([memory_id]))
        .order_by(Change.submitted_at, Change.id).limit(limit)))


def pending_writes_about(session: Session, *, tenant_id: str, memory_id: str, min_cosine: float,
                         limit: int = 5) -> list:
    """The tenant's pending remembers about the same thing as this memory (cosine ≥ `min_cosine`
    between the staged row's vector and this memory's), closest first: id, operation, agent_id,
    submitted_at, similarity. Scoped as the review diff scopes a staged write: same agent, and the
    staged write's user when it names one. Approving one of them may supersede this memory."""
    staged = aliased(Memory)
    distance = staged.embedding.cosine_distance(Memory.embedding)
    return list(session.execute(
        select(Change.id, Change.operation, Change.agent_id, Change.submitted_at, (1 - distance).label("similarity"))
        .select_from(Memory)
        .join(staged, and_(staged.tenant_id == Memory.tenant_id, staged.agent_id == Memory.agent_id,
                           staged.status == "pending", staged.id != Memory.id,
                           or_(staged.user_id.is_(None), staged.user_id == Memory.user_id)))
        .join(Change, and_(Change.tenant_id == staged.tenant_id, Change.id == staged.change_id,
                           Change.status == "pending", Change.operation == "remember"))
        .where(Memory.tenant_id == tenant_id, Memory.id == memory_id, Memory.embedding.is_not(None),
               staged.embedding.is_not(None), distance <= 1 - min_cosine)
        .order_by(distance, Change.id).limit(limit)))


def still_pending(session: Session, *, tenant_id: str, change_ids: Sequence[str]) -> set[str]:
    """Which of the tenant's `change_ids` are still pending."""
    return set(session.scalars(select(Change.id).where(
        Change.tenant_id == tenant_id, Change.id.in_(list(change_ids)), Change.status == "pending")))


# The bulk decision - approving a staged remember as it stands - runs on statements built once and
# on plain rows, in two round trips: the change row locked, then one statement that puts the staged
# memory live (returning what its audit entry and event need) and records the decision. Through
# ORM loads and flushes it took three, and most of an approval's Python time.
_CHANGES = Change.__table__
_LOCK_CHANGE = (select(_CHANGES)
                .where(_CHANGES.c.id == bindparam("change_id"), _CHANGES.c.tenant_id == bindparam("tenant"))
                .with_for_update())
_APPROVE_STAGED = text("""
    WITH went_live AS (
        UPDATE memories SET status = 'live', live_from = :now, updated_at = :now
        WHERE id = :memory_id AND tenant_id = :tenant
        RETURNING id, tenant_id, agent_id, user_id, type, content, tags, metadata AS metadata_, node_id, digest_key,
                  status, source, confidence, score_multiplier, expires_at, created_at, live_from, ended_at,
                  updated_at, hard_deleted, merged_into, superseded_by
    ), decided AS (
        UPDATE changes SET status = 'approved', approvals = :approvals, result = :result, decided_at = :now,
                           decided_by = :decided_by, reason = :reason, decided_refs = ARRAY[:memory_id],
                           decided_view = jsonb_build_object('reviewer', :reviewer, 'diff', (
                               SELECT jsonb_build_object('operation', 'remember', 'seen', false, 'proposed',
                                   jsonb_build_object('id', id, 'content', content, 'type', type, 'tags', tags,
                                                      'metadata', metadata_, 'user_id', user_id))
                               FROM went_live))
        WHERE id = :change_id AND tenant_id = :tenant
    )
    SELECT * FROM went_live""").bindparams(bindparam("approvals", type_=JSONB), bindparam("result", type_=JSONB),
                                           bindparam("reviewer", type_=JSONB))


def lock_row(session: Session, *, tenant_id: str, change_id: str):
    """The change as a plain row (the table's columns), locked until commit; None when unknown."""
    return session.connection().execute(_LOCK_CHANGE, {"change_id": change_id, "tenant": tenant_id}).first()


def approve_staged_remember(session: Session, *, tenant_id: str, change_id: str, memory_id: str, now: datetime,
                            approvals: list[dict[str, Any]], result: dict[str, Any], decided_by: str,
                            reason: str | None, reviewer: dict[str, Any]):
    """Put the staged memory live and record the change approved, in one statement; returns the
    memory's row (the columns an audit entry and a `memory.written` event need). The change keeps
    the memory as proposed and `reviewer`, with `seen: false`: this approval quoted no diff."""
    return session.connection().execute(_APPROVE_STAGED, {
        "tenant": tenant_id, "change_id": change_id, "memory_id": memory_id, "now": now,
        "approvals": approvals, "result": result, "decided_by": decided_by, "reason": reason,
        "reviewer": reviewer}).one()


ERASED_VIEW = {"erased": True}
"""What a decided change keeps of its reviewer's view once a memory it quoted was hard-deleted."""


def erase_decided_views(session: Session, *, tenant_id: str, memory_ids: Sequence[str]) -> None:
    """Forget the copies of content that decided changes keep of these memories (a hard delete
    leaves no copy of what it deleted)."""
    if memory_ids:
        session.execute(update(Change).where(
            Change.tenant_id == tenant_id, Change.decided_refs.overlap(list(memory_ids))).values(
            decided_view=ERASED_VIEW, decided_refs=[]))


# --- review SLAs (tenant setting `review_sla_seconds`, migration 0021) ---------------------------

SLA_SECONDS_SQL = "NULLIF((t.settings->>'review_sla_seconds')::bigint, 0)"
"""The SLA of tenant row `t` in seconds, NULL when none is set (`tenants t` must be in the query)."""
_SLA_BREACHES = text(f"""
    SELECT c.tenant_id, c.id, c.agent_id, c.operation, c.risk_level, c.submitted_at,
           {SLA_SECONDS_SQL} AS sla_seconds
    FROM tenants t
    JOIN changes c ON c.tenant_id = t.id AND c.status = 'pending' AND c.sla_announced_at IS NULL
                  AND c.submitted_at < now() - make_interval(secs => {SLA_SECONDS_SQL})
    WHERE {SLA_SECONDS_SQL} > 0
    ORDER BY c.submitted_at, c.id
    LIMIT :limit""")


def sla_breaches(session: Session, *, limit: int) -> list:
    """Pending changes, across tenants, waiting longer than their tenant's review SLA and not yet
    announced (oldest first): tenant_id, id, agent_id, operation, risk_level, submitted_at, sla_seconds."""
    return list(session.execute(_SLA_BREACHES, {"limit": limit}))


def mark_sla_announced(session: Session, *, tenant_id: str, change_id: str) -> bool:
    """Claim the change's SLA announcement (row-locked until commit); False when it was announced
    or decided meanwhile."""
    return session.execute(text(
        "UPDATE changes SET sla_announced_at = now() WHERE tenant_id = :tenant AND id = :id"
        " AND status = 'pending' AND sla_announced_at IS NULL RETURNING id"),
        {"tenant": tenant_id, "id": change_id}).first() is not None


def pending_by_agent(session: Session, *, tenant_id: str, overdue_seconds: int | None) -> Sequence[Any]:
    """The tenant's pending changes grouped by (agent_id, risk_level): count, oldest submission and
    how many wait longer than `overdue_seconds` (0 for each group when None)."""
    overdue = (func.count().filter(Change.submitted_at < func.now() - func.make_interval(
        0, 0, 0, 0, 0, 0, overdue_seconds)) if overdue_seconds else literal(0))
    return session.execute(
        select(Change.agent_id, Change.risk_level, func.count().label("waiting"),
               func.min(Change.submitted_at).label("oldest"), overdue.label("overdue"))
        .where(Change.tenant_id == tenant_id, Change.status == "pending")
        .group_by(Change.agent_id, Change.risk_level)).all()


@dataclass(frozen=True)
class DecisionFilter:
    """Which decided changes the auditors' decisions log lists (every field optional)."""

    reviewer: tuple[str, ...] = ()  # actor labels (`user:<id>`, `api_key:<id>`) that decided or approved
    status: str | None = None  # "approved" | "rejected"; None: both
    agent_id: str | None = None
    operation: str | None = None
    decided_from: datetime | None = None  # inclusive
    decided_to: datetime | None = None  # exclusive


DECIDED = ("approved", "rejected")


def _decided_with_key(label: str) -> list:
    """For a key's label (`api_key:<id>`): an approval given with it, or a decision made with it."""
    if not label.startswith("api_key:"):
        return []
    key_id = label.split(":", 1)[1]
    return [Change.approvals.contains([{"via_key": key_id}]),
            Change.decided_view.contains({"reviewer": {"via_key": key_id}})]


def decisions_page(session: Session, *, tenant_id: str, flt: DecisionFilter, limit: int,
                   after: tuple[datetime, str] | None = None) -> list[Change]:
    """Up to `limit` of the tenant's approved or rejected changes, newest decision first, after the
    keyset `after` (the last row's (decided_at, id))."""
    conds = [Change.tenant_id == tenant_id, Change.decided_at.is_not(None),
             Change.status.in_([flt.status] if flt.status else DECIDED)]
    if flt.reviewer:
        # The decider, or any approver of a two-person change (each approval records `by`); a key
        # also matches what its owner decided with it (recorded as theirs, with `via_key`).
        conds.append(or_(*[or_(Change.decided_by == label, Change.approvals.contains([{"by": label}]),
                               *_decided_with_key(label)) for label in flt.reviewer]))
    if flt.agent_id:
        conds.append(Change.agent_id == flt.agent_id)
    if flt.operation:
        conds.append(Change.operation == flt.operation)
    if flt.decided_from:
        conds.append(Change.decided_at >= flt.decided_from)
    if flt.decided_to:
        conds.append(Change.decided_at < flt.decided_to)
    if after is not None:
        conds.append(tuple_(Change.decided_at, Change.id) < tuple_(*after))
    stmt = select(Change).where(*conds).order_by(Change.decided_at.desc(), Change.id.desc()).limit(limit)
    return list(session.scalars(stmt))
