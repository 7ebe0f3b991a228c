"""A learned rule revokes itself when a write it approved is undone.

A learned rule approves writes no person looked at. When one of them is later forgotten,
hard-deleted, quarantined by a recover or rejected on review (a quarantine rejected), that is a
person (or the writing agent) saying the rule let through something that should not have been
stored, so the rule stops at once: it is disabled in the tenant's policy, its provenance records
when, why and which write, and a `policy.learned_rule_revoked` audit entry names them. The writes
it approved stay recorded as approved by it (their changes keep `learned_rule:<id>` as decider).
Turning it back on is a person's edit of the policy, or accepting a fresh suggestion.

Called in the transaction that undoes the write, after its memory rows are locked."""

from __future__ import annotations

import copy
import hashlib
from typing import Any, Sequence

from app.core.canonical import canonical_json
from app.core.policy import Policy
from app.core.timefmt import format_ts, utcnow
from app.repos.review import learned_rules as repo
from app.repos.tenancy import tenants as tenant_repo
from app.services.runtime.context import AppContext

CAUSES = ("forgotten", "hard_deleted", "quarantined", "rejected")


def revoke_for(ctx: AppContext, session, *, tenant_id: str, memory_ids: Sequence[str], cause: str,
               actor: dict[str, Any]) -> list[str]:
    """Disable every enabled learned rule that approved one of `memory_ids` (now being undone for
    `cause`); returns the ids of the rules revoked. Nothing is read beyond one query when no learned
    rule approved any of them."""
    if cause not in CAUSES:
        raise ValueError(f"unknown cause {cause!r}")
    approvals = repo.learned_approvals(session, tenant_id=tenant_id, memory_ids=memory_ids) if memory_ids else []
    if not approvals:
        return []
    first = {}
    for approval in approvals:
        first.setdefault(approval.rule_id, approval)
    tenant = tenant_repo.get(session, tenant_id=tenant_id, lock=True)
    settings = dict((tenant.settings or {}) if tenant else {})
    current = settings.get("policy")
    if not current:
        return []
    now, rules, revoked = format_ts(utcnow()), [], []
    for rule in current["rules"]:
        approval = first.get(rule.get("id"))
        if approval is not None and "provenance" in rule and rule.get("enabled", True):
            rule = copy.deepcopy(rule)
            rule["enabled"] = False
            rule["provenance"].update({"revoked_at": now, "revoked_cause": cause,
                                       "revoked_memory_id": approval.memory_id,
                                       "revoked_change_id": approval.change_id})
            revoked.append((rule, approval))
        rules.append(rule)
    if not revoked:
        return []
    policy = Policy.parse({"rules": rules}).to_doc()
    settings["policy"] = policy
    tenant.settings = settings
    digest = hashlib.sha256(canonical_json(policy)).hexdigest()
    for rule, approval in revoked:
        ctx.audit.append(session, tenant_id=tenant_id, event_type="policy.learned_rule_revoked", actor=actor,
                         subject={"type": "tenant", "id": tenant_id},
                         data={"rule_id": rule["id"], "suggestion_id": rule["provenance"].get("suggestion_id"),
                               "cause": cause, "memory_id": approval.memory_id, "change_id": approval.change_id,
                               "policy_sha256": digest})
    return [rule["id"] for rule, _ in revoked]
