"""Deciding whether a write needs review, and staging it as a change (contract §4)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from sqlalchemy.orm import Session

from app.core.access import Principal
from app.core.ids import new_id
from app.core.policy import Decision, Policy, WriteRequest, default_policy
from app.core.screening import Screening
from app.core.timefmt import format_ts, utcnow
from app.db.models import Change
from app.errors import PolicyDenied
from app.repos.review import changes as changes_repo
from app.repos.tenancy import tenants as tenant_repo
from app.repos.review.suggestions import LEARNED_DECIDER_PREFIX
from app.services.events import events
from app.services.runtime.context import AppContext


def tenant_policy(session: Session, tenant_id: str) -> Policy:
    """The tenant's policy document, or the defaults when it has none."""
    tenant = tenant_repo.get(session, tenant_id=tenant_id)
    doc = (tenant.settings or {}).get("policy") if tenant else None
    return _parsed(json.dumps(doc, sort_keys=True)) if doc else default_policy()


@lru_cache(maxsize=256)
def _parsed(doc_json: str) -> Policy:
    """Parsing validates the schema and compiles patterns; a tenant's policy rarely changes."""
    return Policy.parse(json.loads(doc_json))


def review_requirement(session: Session, tenant_id: str, request: WriteRequest,
                       policy: Policy | None = None) -> Decision:
    """allow / require_approval (with 1 or 2 approvers) / deny (raised as 403 `policy_denied`).
    `policy` is the tenant's, when the caller has it already (`tenant_config.rules_for`)."""
    decision = (policy if policy is not None else tenant_policy(session, tenant_id)).evaluate(request)
    if decision.action == "deny":
        raise PolicyDenied(f"denied by policy rule {decision.rule_id!r}",
                           details=[{"path": "/", "message": decision.reason, "rule": decision.rule_id,
                                     "risk_flags": sorted(request.risk_flags)}])
    return decision


def stage_change(ctx: AppContext, session: Session, *, principal: Principal, operation: str, agent_id: str,
                 user_id: str | None, request: dict[str, Any], memory_ids: list[str], decision: Decision,
                 redactions: list[dict[str, str]], screening: Screening | None = None,
                 change_id: str | None = None) -> Change:
    """Record a pending change an API key submitted (see `stage_change_by`)."""
    return stage_change_by(ctx, session, tenant_id=principal.tenant_id, submitted_by=principal.key_id,
                           actor=principal.actor, operation=operation, agent_id=agent_id, user_id=user_id,
                           request=request, memory_ids=memory_ids, decision=decision, redactions=redactions,
                           screening=screening, change_id=change_id)


def stage_change_by(ctx: AppContext, session: Session, *, tenant_id: str, submitted_by: str, actor: dict[str, Any],
                    operation: str, agent_id: str, user_id: str | None, request: dict[str, Any],
                    memory_ids: list[str], decision: Decision, redactions: list[dict[str, str]],
                    screening: Screening | None = None, change_id: str | None = None) -> Change:
    """Record a pending change and its `change.proposed` audit event in `session`'s transaction.

    `submitted_by` is the submitter as the change stores it (an API key id, or an actor label such as
    `user:<id>` for a change an operator or admin raised, e.g. by `recover`); `actor` names it in the
    audit entry. The screening flags are stored on the change for reviewers; the audit event gets their
    names only. `change_id` is the change's id when the caller named it beforehand (a staged memory's
    row is inserted holding it, so it is not updated afterwards).
    """
    screening = screening or Screening()
    change = Change(
        id=change_id or new_id("chg"), tenant_id=tenant_id, agent_id=agent_id, user_id=user_id,
        operation=operation, status="pending", request=request, memory_ids=memory_ids,
        submitted_by=submitted_by, approvals=[], approvals_required=decision.approvals_required,
        policy_rule=decision.rule_id, redactions=redactions, risk_flags=screening.to_json(),
        risk_level=screening.risk,
    )
    changes_repo.insert(session, change)
    ctx.audit.append(session, tenant_id=tenant_id, event_type="change.proposed", actor=actor,
                     subject={"type": "change", "id": change.id},
                     data={"operation": operation, "agent_id": agent_id, "memory_ids": memory_ids,
                           "approvals_required": decision.approvals_required, "policy_rule": decision.rule_id,
                           "reason": decision.reason, "redaction_labels": sorted({r["label"] for r in redactions}),
                           "risk_flags": screening.names, "risk_level": screening.risk})
    events.change_event(session, change, "proposed")
    return change


def record_learned_approval(ctx: AppContext, session: Session, *, tenant_id: str, submitted_by: str,
                            actor: dict[str, Any], operation: str, agent_id: str, user_id: str | None,
                            memory_ids: list[str], decision: Decision, screening: Screening | None = None,
                            change_id: str | None = None) -> Change:
    """Journal a write a learned rule allowed: an approved change decided by `learned_rule:<rule id>`
    (so the auditors' decisions log lists it as such) and its `change.approved` audit event naming
    the rule, both in the write's transaction. The change keeps no request body (nothing to review)."""
    screening = screening or Screening()
    now = utcnow()
    decider = f"{LEARNED_DECIDER_PREFIX}{decision.rule_id}"
    change = Change(
        id=change_id or new_id("chg"), tenant_id=tenant_id, agent_id=agent_id, user_id=user_id,
        operation=operation, status="approved", request={"learned_rule": decision.rule_id}, memory_ids=memory_ids,
        submitted_by=submitted_by, submitted_at=now, decided_at=now, decided_by=decider, reason=decision.reason,
        approvals=[{"by": decider, "name": None, "at": format_ts(now)}], approvals_required=1,
        policy_rule=decision.rule_id, redactions=[],
        risk_flags=screening.to_json(), risk_level=screening.risk, result={"learned_rule": decision.rule_id},
    )
    changes_repo.insert(session, change)
    ctx.audit.append(session, tenant_id=tenant_id, event_type="change.approved", actor=actor,
                     subject={"type": "change", "id": change.id},
                     data={"operation": operation, "agent_id": agent_id, "memory_ids": memory_ids,
                           "decided_by": decider, "learned_rule": decision.rule_id, "policy_rule": decision.rule_id,
                           "risk_flags": screening.names, "risk_level": screening.risk})
    return change


def review_url(settings, change_id: str) -> str:
    """The change's review page, in the one form every surface answers (`/v1`, MCP, memorywire,
    workspace): absolute under MEMWARDEN_PUBLIC_URL when the operator set it, else the path
    `/review/<id>` (a request's Host header is the caller's word, never the server's address)."""
    path = f"/review/{change_id}"
    return settings.public_url.rstrip("/") + path if settings.public_url else path
