"""SQL for learned policy suggestions: the decision history they are mined from (decided `remember`
changes with their staged memory's type, source and tags) and the `policy_suggestions` rows.
Every query is scoped by tenant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from sqlalchemy import and_, delete, exists, func, literal, or_, select, text
from sqlalchemy.dialects.postgresql import JSONB, array
from sqlalchemy.orm import Session
from sqlalchemy.sql import column

from app.db.models import ApiKey, Change, Memory, PolicySuggestion
from app.repos.review.canaries import NOT_A_CANARY_SQL

LEARNED_DECIDER_PREFIX = "learned_rule:"
"""`decided_by` of a change a learned rule approved (`learned_rule:<rule id>`)."""


@dataclass(frozen=True)
class DecidedWrite:
    """One human decision on a staged remember, with what a rule can match on and what became of it."""

    change_id: str
    status: str  # approved / rejected
    risk_level: str
    agent_id: str
    type: str | None
    source: str | None
    tags: tuple[str, ...]
    memory_status: str | None
    hard_deleted: bool
    decided_by: str | None = None


def _decided_by_author():
    """SQL: whether the change's author took part in its decision — decided it, or gave one of its
    approvals — as the submitting key itself (`api_key:<id>`), as the person who owns that key
    (`user:<id>`), or as the person who submitted it signed in. Such decisions were possible before
    separation of duties was enforced (`app.services.review.duties`); they are no one else's judgement."""
    authors = array([literal("api_key:") + func.regexp_replace(Change.submitted_by, "^api_key:", ""),
                     literal("user:") + ApiKey.owner_user_id, Change.submitted_by])
    approval = func.jsonb_array_elements(Change.approvals).table_valued(column("value", JSONB)).alias("approval")
    approved = exists(select(literal(1)).select_from(approval).where(
        approval.c.value["by"].astext == func.any(authors)).correlate(Change, ApiKey))
    # An element of `authors` is NULL for a key of no one: `= ANY` is then NULL, not false, when none matches.
    return or_(func.coalesce(Change.decided_by == func.any(authors), False), approved)


def decided_writes(session: Session, *, tenant_id: str, limit: int) -> list[DecidedWrite]:
    """The tenant's latest `limit` remember changes a person approved or rejected, newest first.
    Decisions made by learned rules are not evidence for more rules, nor are decisions the change's
    author took part in (`_decided_by_author`): only someone else's review is. Decisions on reviewer
    canaries are no evidence either (a reviewer's miss must not teach a rule)."""
    stmt = (
        select(Change.id, Change.status, Change.risk_level, Change.agent_id, Memory.type, Memory.source,
               Memory.tags, Memory.status, Memory.hard_deleted, Change.decided_by)
        .outerjoin(Memory, and_(Memory.tenant_id == Change.tenant_id, Memory.id == Change.memory_ids[1]))
        .outerjoin(ApiKey, and_(ApiKey.tenant_id == Change.tenant_id, ApiKey.id == Change.submitted_by))
        .where(Change.tenant_id == tenant_id, Change.operation == "remember",
               Change.status.in_(("approved", "rejected")),
               ~Change.decided_by.startswith(LEARNED_DECIDER_PREFIX, autoescape=True),
               ~_decided_by_author(), text(NOT_A_CANARY_SQL))
        .order_by(Change.decided_at.desc(), Change.id.desc())
        .limit(limit)
    )
    return [DecidedWrite(r[0], r[1], r[2] or "none", r[3], r[4], r[5], tuple(r[6] or ()), r[7], bool(r[8]), r[9])
            for r in session.execute(stmt)]


def get(session: Session, *, tenant_id: str, suggestion_id: str, lock: bool = False) -> PolicySuggestion | None:
    """The tenant's suggestion, or None."""
    stmt = select(PolicySuggestion).where(PolicySuggestion.tenant_id == tenant_id,
                                          PolicySuggestion.id == suggestion_id)
    if lock:
        stmt = stmt.with_for_update().execution_options(populate_existing=True)
    return session.scalars(stmt).first()


def all_of(session: Session, *, tenant_id: str, lock: bool = False) -> list[PolicySuggestion]:
    """Every suggestion row of the tenant (any status), oldest first."""
    stmt = (select(PolicySuggestion).where(PolicySuggestion.tenant_id == tenant_id)
            .order_by(PolicySuggestion.created_at, PolicySuggestion.id))
    if lock:
        stmt = stmt.with_for_update()
    return list(session.scalars(stmt))


def add(session: Session, suggestion: PolicySuggestion) -> None:
    session.add(suggestion)
    session.flush()


def drop_open(session: Session, *, tenant_id: str, ids: Sequence[str]) -> None:
    """Remove open suggestions whose evidence no longer holds (decided ones are kept as history)."""
    if ids:
        session.execute(delete(PolicySuggestion).where(PolicySuggestion.tenant_id == tenant_id,
                                                       PolicySuggestion.id.in_(list(ids)),
                                                       PolicySuggestion.status == "open"))


@dataclass(frozen=True)
class ReplayWrite:
    """A decided staged remember as a backtest replays it: the write's facts, its flags and its fate."""

    change_id: str
    status: str  # approved / rejected
    risk_level: str
    risk_flags: tuple[str, ...]
    agent_id: str
    type: str | None
    source: str | None
    tags: tuple[str, ...]
    content: str | None
    confidence: float | None
    memory_status: str | None
    hard_deleted: bool


def replay_writes(session: Session, *, tenant_id: str, limit: int) -> list[ReplayWrite]:
    """The tenant's latest `limit` remember changes a person approved or rejected, newest first, with
    the staged memory's content (a backtest evaluates content conditions; it never returns it)."""
    stmt = (
        select(Change.id, Change.status, Change.risk_level, Change.risk_flags, Change.agent_id, Memory.type,
               Memory.source, Memory.tags, Memory.content, Memory.confidence, Memory.status, Memory.hard_deleted)
        .outerjoin(Memory, and_(Memory.tenant_id == Change.tenant_id, Memory.id == Change.memory_ids[1]))
        .where(Change.tenant_id == tenant_id, Change.operation == "remember",
               Change.status.in_(("approved", "rejected")),
               ~Change.decided_by.startswith(LEARNED_DECIDER_PREFIX, autoescape=True), text(NOT_A_CANARY_SQL))
        .order_by(Change.decided_at.desc(), Change.id.desc())
        .limit(limit)
    )
    rows = []
    for r in session.execute(stmt):
        flags = tuple(sorted({f.get("name") for f in (r[3] or ()) if isinstance(f, dict) and f.get("name")}))
        rows.append(ReplayWrite(r[0], r[1], r[2] or "none", flags, r[4], r[5], r[6], tuple(r[7] or ()), r[8], r[9],
                                r[10], bool(r[11])))
    return rows


def busiest_agents(session: Session, *, tenant_id: str, limit: int) -> list[str]:
    """The tenant's agents with the most staged remembers, most first."""
    stmt = (select(Change.agent_id).where(Change.tenant_id == tenant_id, Change.operation == "remember")
            .group_by(Change.agent_id).order_by(func.count().desc(), Change.agent_id).limit(limit))
    return list(session.scalars(stmt))
