"""SQL for learned policy suggestions: the decision history they are mined from (decided `remember`
changes with their staged memory's type, source and tags) and the `policy_suggestions` rows.
Every query is scoped by tenant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from sqlalchemy import and_, delete, select
from sqlalchemy.orm import Session

from app.db.models import Change, Memory, PolicySuggestion

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


def decided_writes(session: Session, *, tenant_id: str, limit: int) -> list[DecidedWrite]:
    """The tenant's latest `limit` remember changes a person approved or rejected, newest first
    (decisions made by learned rules are not evidence for more rules)."""
    stmt = (
        select(Change.id, Change.status, Change.risk_level, Change.agent_id, Memory.type, Memory.source,
               Memory.tags, Memory.status, Memory.hard_deleted)
        .outerjoin(Memory, and_(Memory.tenant_id == Change.tenant_id, Memory.id == Change.memory_ids[1]))
        .where(Change.tenant_id == tenant_id, Change.operation == "remember",
               Change.status.in_(("approved", "rejected")),
               ~Change.decided_by.startswith(LEARNED_DECIDER_PREFIX, autoescape=True))
        .order_by(Change.decided_at.desc(), Change.id.desc())
        .limit(limit)
    )
    return [DecidedWrite(r[0], r[1], r[2] or "none", r[3], r[4], r[5], tuple(r[6] or ()), r[7], bool(r[8]))
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
