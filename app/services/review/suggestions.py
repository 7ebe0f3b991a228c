"""A queue that learns: policy rules suggested from the tenant's decisions, accepted or dismissed
by an admin (`/v1/policy/suggestions`, the admin page's suggestions section).

Suggestions are mined afresh (`app.core.policy_learning`) whenever they are listed, from the
latest human decisions on staged remembers and when and by whom each was made (one person's
decisions less than `suggest_batch_gap_seconds` apart, such as one bulk action, are one occasion),
and kept in `policy_suggestions` so accept and dismiss refer to a stable id. A pattern is
suggested once its approvals span `suggest_min_decisions` occasions on `suggest_min_days` days.
An accepted suggestion becomes a learned rule at the top of the tenant's policy, carrying its
provenance (suggestion id, who accepted it, when, the evidence); the policy evaluation keeps the
screening baseline, hand-written denies and two-person rules in force under it, and never lets it
approve high-impact content. A dismissed suggestion comes back only when its support has grown by
at least `suggest_min_decisions` more occasions since it was dismissed (and still no rejection). A
learned rule revokes itself when a write it approved is undone (`app.services.review.learned_revocation`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from app.core.canonical import canonical_json
from app.core.ids import has_prefix
from app.core.policy import DEFAULT_POLICY, SCREENING_BASELINE, Policy, PolicyError, Rule, WriteRequest
from app.core.policy_learning import (Occasion, Suggested, batches, contrary, describe, measure, mine, rule_id_for,
                                      supporters)
from app.core.screening import LEVELS
from app.core.timefmt import format_ts, utcnow
from app.db.models import PolicySuggestion
from app.errors import Conflict, NotFound, ValidationFailed
from app.repos.review import learned_rules as learned_repo
from app.repos.review import suggestions as repo
from app.repos.tenancy import tenants as tenant_repo
from app.services.review import policy_backtest
from app.services.runtime.context import AppContext
from app.services.memory.staging import tenant_policy

HISTORY_LIMIT = 20_000
"""Most decisions read as evidence (newest first)."""
STATUSES = ("open", "accepted", "dismissed")


def _history(ctx: AppContext, session, tenant_id: str) -> tuple[list, list]:
    history = repo.decided_writes(session, tenant_id=tenant_id, limit=max(HISTORY_LIMIT, ctx.settings.suggest_window))
    return history, history[: ctx.settings.suggest_window]


def _occasions(ctx: AppContext, session, tenant_id: str, history: list) -> list[Occasion]:
    """When, and in which batch, each decision of `history` was made (in its order)."""
    times = learned_repo.decision_times(session, tenant_id=tenant_id, change_ids=[d.change_id for d in history])
    return batches([times.get(d.change_id, (None, None)) for d in history], ctx.settings.suggest_batch_gap_seconds)


def _mined(ctx: AppContext, session, tenant_id: str, history: list) -> list[Suggested]:
    return mine(history, _occasions(ctx, session, tenant_id, history), min_events=ctx.settings.suggest_min_decisions,
                min_days=ctx.settings.suggest_min_days)


def suggestion_json(row: PolicySuggestion) -> dict[str, Any]:
    """A suggestion as the API and the page show it."""
    return {"id": row.id, "status": row.status, "action": row.action, "match": row.match,
            "description": describe(row.match), "evidence": row.evidence, "rule_id": row.rule_id,
            "decided_by": row.decided_by, "decided_at": format_ts(row.decided_at) if row.decided_at else None,
            "created_at": format_ts(row.created_at), "updated_at": format_ts(row.updated_at)}


def _evidence(found: Suggested, window: list, policy: Policy) -> dict[str, int]:
    return {"decisions": found.approved, "occasions": found.events, "days": found.days, "rejected": 0,
            **measure(found.match, window, policy)}


def _support(evidence: dict[str, Any]) -> int:
    """The occasions behind a suggestion (rows stored before occasions were counted: its decisions)."""
    return int(evidence.get("occasions", evidence.get("decisions", 0)))


def refresh(ctx: AppContext, tenant_id: str, status: str = "open") -> list[dict[str, Any]]:
    """Mine the tenant's decisions, bring the stored suggestions up to date, and list those with
    `status` (`open`, `accepted`, `dismissed` or `all`), best supported first."""
    min_decisions = ctx.settings.suggest_min_decisions
    with ctx.db.sessions.begin() as session:
        # The tenant row lock serialises refreshes (and accepts) of one tenant: no duplicate inserts.
        if tenant_repo.get(session, tenant_id=tenant_id, lock=True) is None:
            raise NotFound("tenant not found")
        history, window = _history(ctx, session, tenant_id)
        found = {s.id: s for s in _mined(ctx, session, tenant_id, history)}
        policy = tenant_policy(session, tenant_id)  # the measured effect is under the tenant's own rules
        rows = {r.id: r for r in repo.all_of(session, tenant_id=tenant_id)}
        now = utcnow()
        for sid, suggestion in found.items():
            row = rows.get(sid)
            evidence = _evidence(suggestion, window, policy)
            if row is None:
                row = PolicySuggestion(tenant_id=tenant_id, id=sid, match=suggestion.match, action=suggestion.action,
                                       evidence=evidence, status="open", created_at=now, updated_at=now)
                repo.add(session, row)
                rows[sid] = row
            elif row.status == "open" or (
                    row.status == "dismissed" and suggestion.events >= (row.dismissed_support or 0) + min_decisions):
                row.status, row.evidence, row.updated_at = "open", evidence, now
        repo.drop_open(session, tenant_id=tenant_id, ids=[sid for sid, r in rows.items()
                                                          if r.status == "open" and sid not in found])
        listed = [r for sid, r in rows.items() if (status == "all" or r.status == status)
                  and not (r.status == "open" and sid not in found)]
        listed.sort(key=lambda r: (-_support(r.evidence), -int(r.evidence.get("decisions", 0)), r.id))
        return [suggestion_json(r) for r in listed]


def _pending_suggestion(session, tenant_id: str, suggestion_id: str, lock: bool = True) -> PolicySuggestion:
    if not has_prefix(suggestion_id, "sug"):
        raise NotFound("suggestion not found")
    row = repo.get(session, tenant_id=tenant_id, suggestion_id=suggestion_id, lock=lock)
    if row is None:
        raise NotFound("suggestion not found")
    if row.status != "open":
        raise Conflict(f"the suggestion was already {row.status}", details={"status": row.status})
    return row


def _with_learned_rule(current: dict[str, Any] | None, row: PolicySuggestion, actor: dict[str, Any], now,
                       evidence: dict[str, Any], reviewers: list[str] | None = None) -> tuple[Rule, Policy]:
    """The learned rule `row` becomes, and the tenant's policy (`current`) with it first; `reviewers`:
    whose approvals it was learned from (`app.services.review.canaries` suspends it if they miss canaries)."""
    rule = Rule.from_doc({
        "id": rule_id_for(row.id), "description": describe(row.match, limit=500), "match": row.match,
        "action": "allow", "provenance": {"kind": "learned", "suggestion_id": row.id, "accepted_by": _label(actor),
                                          **({"accepted_by_name": str(actor["name"])[:200]}
                                             if actor.get("name") else {}),
                                          "accepted_at": format_ts(now), "evidence": evidence,
                                          **({"reviewers": reviewers[:100]} if reviewers else {})}})
    current = current or DEFAULT_POLICY
    others = [r for r in current["rules"] if r.get("id") != rule.id]
    doc = {**current, "rules": [rule.to_doc(), *others]}  # the tenant's category tuning stays
    try:
        return rule, Policy.parse(doc)
    except PolicyError as exc:  # e.g. the policy is at its rule limit
        raise ValidationFailed("the learned rule does not fit the policy", details=exc.problems) from None


def candidate(ctx: AppContext, *, tenant_id: str, suggestion_id: str, actor: dict[str, Any]) -> Policy:
    """The tenant's policy as it would be with an open suggestion accepted (for its backtest)."""
    with ctx.db.sessions() as session:
        tenant = tenant_repo.get(session, tenant_id=tenant_id)
        if tenant is None:
            raise NotFound("tenant not found")
        row = _pending_suggestion(session, tenant_id, suggestion_id, lock=False)
        return _with_learned_rule((tenant.settings or {}).get("policy"), row, actor, utcnow(),
                                  {k: int(v) for k, v in row.evidence.items()})[1]


def accept(ctx: AppContext, *, tenant_id: str, suggestion_id: str, actor: dict[str, Any],
           override_reason: str | None = None) -> dict[str, Any]:
    """Turn an open suggestion into a learned rule (first in the policy) with its provenance.
    404 unknown; 409 already decided, or its evidence no longer holds (a contrary decision since)."""
    with ctx.db.sessions.begin() as session:
        tenant = tenant_repo.get(session, tenant_id=tenant_id, lock=True)
        if tenant is None:
            raise NotFound("tenant not found")
        row = _pending_suggestion(session, tenant_id, suggestion_id)
        history, window = _history(ctx, session, tenant_id)
        against = contrary(row.match, history)
        if against:
            raise Conflict("the evidence changed: a matching write has been rejected since this was suggested",
                           details={"reason": "evidence_changed", "rejected": against})
        # Mined again, so nothing is accepted that the rules would not suggest now (a row stored by
        # an older miner, or whose approvals have since been undone or fallen out of the history).
        if row.id not in {s.id for s in _mined(ctx, session, tenant_id, history)}:
            raise Conflict("the evidence changed: this suggestion no longer holds; list the suggestions again",
                           details={"reason": "evidence_changed"})
        now, by = utcnow(), _label(actor)
        evidence = {**{k: int(v) for k, v in row.evidence.items()},
                    **measure(row.match, window, tenant_policy(session, tenant_id))}
        settings = dict(tenant.settings or {})
        rule, policy = _with_learned_rule(settings.get("policy"), row, actor, now, evidence,
                                          supporters(row.match, history))
        report = policy_backtest.backtest(ctx, tenant_id, policy, current=tenant_policy(session, tenant_id))
        recorded = policy_backtest.gate(report, policy_backtest.override_reason(override_reason))
        settings["policy"] = policy.to_doc()
        tenant.settings = settings
        row.status, row.rule_id, row.decided_by, row.decided_at, row.updated_at = "accepted", rule.id, by, now, now
        row.evidence = evidence
        ctx.audit.append(session, tenant_id=tenant_id, event_type="policy.changed", actor=actor,
                         subject={"type": "tenant", "id": tenant_id},
                         data={"rules": [r["id"] for r in settings["policy"]["rules"]],
                               "policy_sha256": hashlib.sha256(canonical_json(settings["policy"])).hexdigest(),
                               "learned_rule": rule.id, "suggestion_id": row.id, "evidence": evidence,
                               "backtest": recorded})
        return {**suggestion_json(row), "backtest": report}


def dismiss(ctx: AppContext, *, tenant_id: str, suggestion_id: str, actor: dict[str, Any]) -> dict[str, Any]:
    """Dismiss an open suggestion: it stays hidden until its support grows by `suggest_min_decisions`
    occasions."""
    with ctx.db.sessions.begin() as session:
        row = _pending_suggestion(session, tenant_id, suggestion_id)
        now = utcnow()
        row.status, row.decided_by, row.decided_at, row.updated_at = "dismissed", _label(actor), now, now
        row.dismissed_support = _support(row.evidence)
        ctx.audit.append(session, tenant_id=tenant_id, event_type="policy.suggestion_dismissed", actor=actor,
                         subject={"type": "policy_suggestion", "id": row.id},
                         data={"suggestion_id": row.id, "evidence": row.evidence})
        return suggestion_json(row)


def _label(actor: dict[str, Any]) -> str:
    return f"{actor.get('kind', 'unknown')}:{actor.get('id', '')}"[:200]


SAMPLE_FIELDS = ("operation", "agent_id", "type", "source", "tags", "confidence", "risk_level",
                 "approval_required", "hard_delete", "rows_affected")


_SAMPLE_TYPES = (("operation", (str,), "a string"), ("agent_id", (str,), "a string"), ("type", (str,), "a string"),
                 ("source", (str,), "a string"), ("content", (str,), "a string"),
                 ("confidence", (int, float), "a number"), ("rows_affected", (int,), "an integer"),
                 ("hard_delete", (bool,), "true or false"), ("approval_required", (bool,), "true or false"))
"""Each sample fact's JSON type (null is the same as leaving the fact out)."""


def try_sample(policy: Policy, sample: dict[str, Any]) -> dict[str, Any]:
    """Which rule of `policy` decides a sample write, and the outcome (the editor's test box).
    `sample` holds the write's facts (operation, agent_id, type, source, tags, content, risk_level…);
    422 for facts that do not make a write."""
    if not isinstance(sample, dict):
        raise ValidationFailed.at("/", "a sample write is a JSON object")
    unknown = sorted(set(sample) - set(SAMPLE_FIELDS) - {"content"})
    if unknown:
        raise ValidationFailed.at(f"/{unknown[0]}", f"unknown field; use {', '.join(SAMPLE_FIELDS)}, content")
    tags = sample.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValidationFailed.at("/tags", "tags must be a list of strings")
    risk = sample.get("risk_level", "none")
    if risk not in LEVELS:
        raise ValidationFailed.at("/risk_level", f"one of {', '.join(LEVELS)}")
    # A fact of the wrong type is refused rather than dropped: the answer would be about another write.
    for name, kinds, label in _SAMPLE_TYPES:
        value = sample.get(name)
        if value is not None and (not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool))):
            raise ValidationFailed.at(f"/{name}", f"{name} must be {label}")
    try:
        request = WriteRequest(
            operation=sample.get("operation", "remember"), agent_id=sample.get("agent_id", "agent"),
            type=sample.get("type"), source=sample.get("source"), tags=tuple(tags), content=sample.get("content"),
            confidence=sample.get("confidence"), hard_delete=bool(sample.get("hard_delete")),
            approval_required=bool(sample.get("approval_required")), rows_affected=sample.get("rows_affected"),
            risk_level=risk, risk_flags=("sample",) if risk != "none" else ())
    except ValueError as exc:
        raise ValidationFailed.at("/operation", str(exc)) from None
    decision, trace = policy.explain(request)
    return {"action": decision.action, "rule_id": decision.rule_id, "learned": decision.learned,
            "approvals_required": decision.approvals_required, "reason": decision.reason, "trace": trace}


def policy_of(ctx: AppContext, tenant_id: str) -> Policy:
    """The tenant's policy as it is evaluated now (its own, else the defaults)."""
    with ctx.db.sessions() as session:
        return tenant_policy(session, tenant_id)


def rule_list(policy: Policy) -> list[dict[str, Any]]:
    """The policy as the editor lists it: each rule in order (conditions, action, provenance), then
    the built-in screening baseline, which no learned rule can waive."""
    rows = []
    for rule in (*policy.rules, SCREENING_BASELINE):
        doc = rule.to_doc()
        rows.append({"id": rule.id, "action": rule.action, "enabled": rule.enabled,
                     "description": rule.description, "approvals_required": doc.get("approvals_required"),
                     "conditions": [(key, ", ".join(map(str, value)) if isinstance(value, list) else str(value))
                                    for key, value in doc["match"].items()],
                     "provenance": dict(rule.provenance) if rule.provenance else None,
                     "built_in": rule is SCREENING_BASELINE})
    return rows


def try_sample_text(ctx: AppContext, tenant_id: str, text: str) -> dict[str, Any]:
    """The editor's test box: `text` is a sample write as JSON; which rule decides it, and how."""
    if len(text) > 20_000:
        raise ValidationFailed.at("/", "the sample write is over 20,000 characters")
    try:
        sample = json.loads(text)
    except ValueError as exc:
        raise ValidationFailed.at("/", f"not valid JSON: {getattr(exc, 'msg', exc)}") from None
    return try_sample(policy_of(ctx, tenant_id), sample)
