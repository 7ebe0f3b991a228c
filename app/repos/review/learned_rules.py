"""SQL learned policy rules need beside `app.repos.review.suggestions`: when and by whom each human
decision was made (a bulk action's decisions are one piece of evidence), and which memories a
learned rule approved (a rule revokes itself when one of them is undone). Every query is scoped
by tenant."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.db.models import Change, Memory
from app.repos.review.suggestions import LEARNED_DECIDER_PREFIX

_CHUNK = 5000  # ids per statement: well under PostgreSQL's bind-parameter limit


def decision_times(session: Session, *, tenant_id: str,
                   change_ids: Sequence[str]) -> dict[str, tuple[str | None, datetime | None]]:
    """`(decided_by, decided_at)` of each of the tenant's changes in `change_ids`."""
    out: dict[str, tuple[str | None, datetime | None]] = {}
    ids = list(dict.fromkeys(change_ids))
    for start in range(0, len(ids), _CHUNK):
        stmt = select(Change.id, Change.decided_by, Change.decided_at).where(
            Change.tenant_id == tenant_id, Change.id.in_(ids[start:start + _CHUNK]))
        out.update((r[0], (r[1], r[2])) for r in session.execute(stmt))
    return out


@dataclass(frozen=True)
class LearnedApproval:
    """A memory a learned rule approved, and the change that records it."""

    memory_id: str
    change_id: str
    rule_id: str


def learned_approvals(session: Session, *, tenant_id: str, memory_ids: Sequence[str]) -> list[LearnedApproval]:
    """Which of the tenant's memories `memory_ids` a learned rule approved (each memory row names
    the change it was written through; that change's decider is `learned_rule:<rule id>`)."""
    out: list[LearnedApproval] = []
    ids = list(dict.fromkeys(memory_ids))
    for start in range(0, len(ids), _CHUNK):
        stmt = (select(Memory.id, Change.id, Change.policy_rule)
                .join(Change, and_(Change.tenant_id == Memory.tenant_id, Change.id == Memory.change_id))
                .where(Memory.tenant_id == tenant_id, Memory.id.in_(ids[start:start + _CHUNK]),
                       Change.operation == "remember", Change.status == "approved",
                       Change.decided_by.startswith(LEARNED_DECIDER_PREFIX, autoescape=True))
                .order_by(Memory.id))
        out += [LearnedApproval(r[0], r[1], r[2]) for r in session.execute(stmt) if r[2]]
    return out
