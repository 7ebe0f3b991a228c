"""Review SLAs: the longest a change may wait for review (`memwarden tenant set --review-sla 4h`,
stored as `settings["review_sla_seconds"]`).

A change waiting longer is *overdue*: the queue marks it, `/metrics` counts it
(`memwarden_review_sla_overdue_changes`), and a background round announces it once as a
`review.sla_breached` event (so to every webhook that wants it; `changes.sla_announced_at` makes
"once" hold across rounds and processes). `digest` tells each person who may decide what waits
for them. Nothing here carries memory content: ids, agents, operations, risk levels and ages only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from app.core.access import agent_allowed
from app.core.timefmt import format_ts
from app.errors import AuditChainBroken
from app.repos.review import changes as changes_repo
from app.services.events import events
from app.services.tenancy import users
from app.services.runtime.context import AppContext
from app.services.tenancy.tenant_config import tenant_review_sla

ANNOUNCE_BATCH = 200
DECIDING_ROLES = ("reviewer", "admin")


def announce(ctx: AppContext) -> int:
    """Write the `review.sla_breached` event of every pending change past its tenant's SLA that
    has none yet, one transaction per change; returns how many were announced."""
    with ctx.db.sessions() as session:
        breaches = changes_repo.sla_breaches(session, limit=ANNOUNCE_BATCH)
    done = 0
    now = datetime.now(timezone.utc)
    for row in breaches:
        try:
            with ctx.db.sessions.begin() as session:
                # The change row first, then (at commit) the tenant's chain lock: a decision takes
                # them in the same order, so the two never wait on each other.
                if not changes_repo.mark_sla_announced(session, tenant_id=row.tenant_id, change_id=row.id):
                    continue  # decided or announced meanwhile
                events.emit(session, row.tenant_id, "review.sla_breached", breach_payload(row, now))
        except AuditChainBroken:  # the tenant's chain is closed to writes; announced once it reopens
            continue
        done += 1
    return done


def breach_payload(row: Any, now: datetime) -> dict[str, Any]:
    """`review.sla_breached`: `{changeId, agentId, operation, riskLevel, submittedAt, waitedSeconds, slaSeconds}`."""
    return {"changeId": row.id, "agentId": row.agent_id, "operation": row.operation,
            "riskLevel": row.risk_level or "none", "submittedAt": format_ts(row.submitted_at),
            "waitedSeconds": max(0, int((now - row.submitted_at).total_seconds())),
            "slaSeconds": int(row.sla_seconds)}


# --- the digest -----------------------------------------------------------------------------------

@dataclass
class Waiting:
    """What waits for one person who may decide in a tenant."""

    username: str
    role: str
    agents: tuple[str, ...]
    waiting: int = 0
    overdue: int = 0
    by_risk: dict[str, int] = field(default_factory=dict)
    oldest: datetime | None = None

    def as_json(self, now: datetime) -> dict[str, Any]:
        return {"username": self.username, "role": self.role, "agents": list(self.agents),
                "waiting": self.waiting, "overdue": self.overdue, "byRisk": dict(sorted(self.by_risk.items())),
                "oldestSubmittedAt": format_ts(self.oldest),
                "oldestAgeSeconds": int((now - self.oldest).total_seconds()) if self.oldest else 0}


def digest(ctx: AppContext, tenant_id: str) -> dict[str, Any]:
    """Per user with a deciding role (reviewer, admin) in the tenant: the pending changes their
    agent allow-list lets them see — how many, how many overdue, by risk level, the oldest's age."""
    sla = tenant_review_sla(ctx, tenant_id)
    with ctx.db.sessions() as session:
        groups = changes_repo.pending_by_agent(session, tenant_id=tenant_id, overdue_seconds=sla or None)
    people = [Waiting(user.username, role.role, tuple(role.agents))
              for user, role in users.list_users(ctx, tenant_id) if role.role in DECIDING_ROLES]
    for person in people:
        for g in groups:
            if not agent_allowed(g.agent_id, person.agents):
                continue
            person.waiting += g.waiting
            person.overdue += g.overdue
            person.by_risk[g.risk_level or "none"] = person.by_risk.get(g.risk_level or "none", 0) + g.waiting
            person.oldest = g.oldest if person.oldest is None else min(person.oldest, g.oldest)
    now = datetime.now(timezone.utc)
    return {"slaSeconds": sla, "waiting": sum(g.waiting for g in groups), "overdue": sum(g.overdue for g in groups),
            "reviewers": [p.as_json(now) for p in people]}
