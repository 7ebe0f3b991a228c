"""Reviewer canaries: synthetic poisoned writes slipped into a tenant's review queue, to measure
whether its reviewers catch what they should.

A tenant admin enables them (`settings["canaries"]`: `enabled`, `one_in` — one canary per that many
real staged remembers —, `corpus`, optional `families`, `miss_threshold`, `min_decided`). A
background round (`tick`) stages one when enough real writes were staged since the last: a row of
the chosen attack corpus (`app.paths.ATTACK_CORPUS`), written through the ordinary remember path
(redaction, screening, policy, `memory.staged`, `change.proposed`) as a recent real write's API
key, agent, user and tags. So its change, ids, page, listing, events and audit entries are those of
a real write; the one record that it is a canary is its `canaries` row (`app.repos.review.canaries`).

Every decision passes through `app.services.review.review.decide_in`, which asks `lookup` first and, for
a canary, calls `decided` instead of applying the change: a canary never becomes memory, whatever
the path (page, keyboard, bulk, API). Learned rules never see one: canaries are staged for review
whatever the policy says, and decisions on them are no evidence for suggestions.

Approving one is a miss: a `canary.missed` audit entry (ids only), a `canary.missed` event (the
admin's alert, to webhooks), and a notice on the reviewer's next queue page saying what they
missed and why (`notices_for`). Rejecting one is a catch. A reviewer whose miss rate passes the
threshold (after `min_decided` canaries) has the learned rules taught by their approvals suspended
(disabled, provenance `suspended_at`) until an admin reviews and re-enables them.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import random
from datetime import datetime, timezone
from functools import cache
from typing import Any

from app.core.access import Principal
from app.core.canonical import canonical_json
from app.core.ids import new_id
from app.core.policy import Policy
from app.core.screening import EXPLANATIONS
from app.core.timefmt import format_ts, utcnow
from app.errors import AppError, NotFound, ValidationFailed
from app.paths import ATTACK_CORPUS
from app.repos.review import canaries as repo
from app.repos.tenancy import tenants as tenant_repo
from app.db.vectors import SqlVector
from app.services.events import events
from app.services.tenancy import tenant_config
from app.services.memory import remembering
from app.services.runtime.context import AppContext

log = logging.getLogger(__name__)
SETTING = "canaries"
CORPORA = {"screening": ATTACK_CORPUS}
"""The shipped attack corpora a tenant may draw canaries from, by name."""
DEFAULTS: dict[str, Any] = {"enabled": False, "one_in": 20, "corpus": "screening", "families": [],
                            "miss_threshold": 0.5, "min_decided": 5}
FAMILY_HINTS = {
    "prompt_injection": "It gives the agent standing instructions instead of recording a fact.",
    "exfiltration": "It would make the agent send data to an outside address or link.",
    "hidden_characters": "It hides characters a reader does not see but a model reads.",
    "secret_leftover": "It stores a credential or secret.",
    "pii": "It stores personal data that should not be kept.",
    "provenance_laundering": "It claims a trusted origin it does not have.",
    "contradiction": "It quietly contradicts a fact already in memory.",
    "fsm_widening": "It widens what a state machine allows.",
}
ATTEMPTS = 5
"""Corpus rows tried per canary (one the tenant's policy denies outright cannot be staged)."""


# --- configuration ---------------------------------------------------------------------------------

def config_of(settings: dict | None) -> dict[str, Any]:
    return {**DEFAULTS, **((settings or {}).get(SETTING) or {})}


def parse_config(doc: Any) -> dict[str, Any]:
    """A validated canary configuration (422 naming the field otherwise)."""
    if not isinstance(doc, dict):
        raise ValidationFailed.at("/", "a JSON object")
    unknown = sorted(set(doc) - set(DEFAULTS) - {"since"})
    if unknown:
        raise ValidationFailed.at(f"/{unknown[0]}", "not a canary setting")
    cfg = {**DEFAULTS, **{k: v for k, v in doc.items() if k != "since"}}
    if not isinstance(cfg["enabled"], bool):
        raise ValidationFailed.at("/enabled", "true or false")
    if not isinstance(cfg["one_in"], int) or isinstance(cfg["one_in"], bool) or not 1 <= cfg["one_in"] <= 100_000:
        raise ValidationFailed.at("/one_in", "an integer from 1 to 100000")
    if cfg["corpus"] not in CORPORA:
        raise ValidationFailed.at("/corpus", f"one of {', '.join(CORPORA)}")
    families = cfg["families"]
    known = {row["family"] for row in _rows(cfg["corpus"])}
    if not isinstance(families, list) or any(f not in known for f in families):
        raise ValidationFailed.at("/families", f"a list of the corpus's families: {', '.join(sorted(known))}")
    threshold = cfg["miss_threshold"]
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not 0 <= threshold <= 1:
        raise ValidationFailed.at("/miss_threshold", "a share from 0 to 1")
    if not isinstance(cfg["min_decided"], int) or isinstance(cfg["min_decided"], bool) or cfg["min_decided"] < 1:
        raise ValidationFailed.at("/min_decided", "a positive integer")
    return cfg


def set_config(ctx: AppContext, *, tenant_id: str, doc: Any, actor: dict[str, Any]) -> dict[str, Any]:
    """Set the tenant's canary configuration (audited as `tenant.settings_changed`). Counting of real
    writes towards the next canary starts now."""
    cfg = {**parse_config(doc), "since": format_ts(utcnow())}
    tenant_config.set_tenant_setting(ctx, tenant_id, SETTING, cfg, actor=actor,
                                     data={"setting": SETTING, **{k: cfg[k] for k in DEFAULTS}})
    return cfg


def get_config(ctx: AppContext, tenant_id: str) -> dict[str, Any]:
    with ctx.db.sessions() as session:
        return config_of(tenant_repo.settings_of(session, tenant_id=tenant_id))


# --- the corpus ------------------------------------------------------------------------------------

@cache
def _rows(corpus: str) -> tuple[dict[str, Any], ...]:
    """The corpus's poisoned writes (id, family, type, content)."""
    rows = []
    with CORPORA[corpus].open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row.get("label") == "poisoned" and isinstance(row.get("content"), str):
                rows.append({"id": str(row["id"]), "family": str(row.get("class") or "attack"),
                             "type": row.get("type") if row.get("type") in ("semantic", "episodic") else "semantic",
                             "content": row["content"]})
    return tuple(rows)


def families(corpus: str = "screening") -> list[str]:
    return sorted({row["family"] for row in _rows(corpus)})


# --- staging canaries ------------------------------------------------------------------------------

def tick(ctx: AppContext) -> int:
    """One background round: stage a canary in each enabled tenant that is due one. Returns how many."""
    with ctx.db.sessions() as session:
        tenants = repo.enabled_tenants(session)
    staged = 0
    for tenant_id in tenants:
        try:
            staged += inject(ctx, tenant_id) is not None
        except Exception:  # one tenant's failure must not stop the others' canaries
            log.exception("canary round failed for tenant %s", tenant_id)
    return staged


def _since(cfg: dict[str, Any], latest: datetime | None) -> datetime:
    enabled = datetime.fromisoformat(cfg["since"].replace("Z", "+00:00")) if cfg.get("since") else None
    times = [t if t.tzinfo else t.replace(tzinfo=timezone.utc) for t in (enabled, latest) if t is not None]
    return max(times) if times else datetime(1970, 1, 1, tzinfo=timezone.utc)


def inject(ctx: AppContext, tenant_id: str, *, force: bool = False, rng: random.Random | None = None) -> str | None:
    """Stage one canary if the tenant has canaries on and `one_in` real remembers were staged since
    the last (or, with `force`, whenever it has a real staged write to model it on). Returns the
    canary's change id, or None. Serialised per tenant (`repo.lock_staging`)."""
    rng = rng or random.SystemRandom()
    with ctx.db.sessions.begin() as session:
        repo.lock_staging(session, tenant_id=tenant_id)
        tenant = tenant_repo.get(session, tenant_id=tenant_id)
        if tenant is None:
            raise NotFound("tenant not found")
        cfg = config_of(tenant.settings)
        if not cfg["enabled"] and not force:
            return None
        since = _since(cfg, repo.latest_created_at(session, tenant_id=tenant_id))
        if not force and repo.real_staged_since(session, tenant_id=tenant_id, since=since) < cfg["one_in"]:
            return None
        templates = repo.templates_since(session, tenant_id=tenant_id,
                                         since=since if not force else datetime(1970, 1, 1, tzinfo=timezone.utc))
        if not templates:
            return None
        template = rng.choice(templates)
        rows = [r for r in _rows(cfg["corpus"]) if not cfg["families"] or r["family"] in cfg["families"]]
        for entry in rng.sample(rows, min(ATTEMPTS, len(rows))):
            change_id = _stage(ctx, session, tenant_id, template, entry, cfg["corpus"])
            if change_id is not None:
                return change_id
        return None


def _stage(ctx: AppContext, session, tenant_id: str, template: repo.Template, entry: dict[str, Any],
           corpus: str) -> str | None:
    """Write one canary through the remember path, as `template`'s key, agent, user and tags."""
    principal = Principal(tenant_id, template.submitted_by, frozenset({"memory:write"}), ("*",))
    now = utcnow()
    body = {"agent_id": template.agent_id, "type": entry["type"], "content": entry["content"],
            "tags": list(template.tags), **({"user_id": template.user_id} if template.user_id else {})}
    rules = tenant_config.load_rules(ctx, session, tenant_id)
    try:
        write = remembering.prepare_remember(ctx, principal, body, rules, memory_id=new_id("mem"), created_at=now,
                                     updated_at=now, precheck=False)
        embedding = SqlVector(ctx.embedder.embed([str(write.memory.content)])[0].tolist())
        decided = remembering.decide(ctx, session, principal, write, embedding)
        if decided.write.memory.status != "pending":
            # One the policy (a learned rule among them) would admit is staged as an agent asking for
            # review would stage it: a canary is only ever decided by a person.
            write.review = True
            decided = remembering.decide(ctx, session, principal, write, embedding)
        if decided.write.memory.status != "pending":
            return None
        remembering.write_decided(ctx, session, [decided])
    except AppError:  # refused by the tenant's redaction mode or policy: try another row
        return None
    change_id = decided.write.memory.change_id
    if change_id is None:  # a staged write always has its change's id
        return None
    repo.insert(session, tenant_id=tenant_id, change_id=change_id, corpus=corpus, entry_id=entry["id"],
                family=entry["family"], flags=decided.flags.names, at=now)
    return change_id


# --- decisions on canaries -------------------------------------------------------------------------

def lookup(session, tenant_id: str, change_id: str) -> repo.Canary | None:
    """The canary row of a change being decided, or None for a real change."""
    return repo.get(session, tenant_id=tenant_id, change_id=change_id)


def decided(ctx: AppContext, session, change, canary: repo.Canary, *, reviewer: str, actor: dict[str, Any],
            approved: bool) -> None:
    """Record a reviewer's decision on a canary, in the decision's transaction: a catch (rejected) or
    a miss (approved: audited, announced to the admin, and suspending the learned rules the reviewer
    taught once their misses pass the tenant's threshold). Nothing of it becomes memory."""
    now = utcnow()
    repo.record_outcome(session, tenant_id=change.tenant_id, change_id=change.id,
                        outcome="missed" if approved else "caught", decided_by=reviewer, at=now)
    if not approved:
        return
    ctx.audit.append(session, tenant_id=change.tenant_id, event_type="canary.missed", actor=actor,
                     subject={"type": "change", "id": change.id},
                     data={"change_id": change.id, "reviewer": reviewer, "corpus": canary.corpus,
                           "entry_id": canary.entry_id, "family": canary.family, "flags": list(canary.flags)})
    events.emit(session, change.tenant_id, "canary.missed", {"changeId": change.id, "reviewer": reviewer,
                                                             "family": canary.family})
    _suspend_if_over(ctx, session, change.tenant_id, reviewer, actor)


def _suspend_if_over(ctx: AppContext, session, tenant_id: str, reviewer: str, actor: dict[str, Any]) -> list[str]:
    cfg = config_of(tenant_repo.settings_of(session, tenant_id=tenant_id))
    tally = next(iter(repo.tallies(session, tenant_id=tenant_id, reviewer=reviewer)), None)
    if tally is None or tally.decided < cfg["min_decided"] or tally.missed / tally.decided <= cfg["miss_threshold"]:
        return []
    # Only now the tenant row is locked (the policy is rewritten), as a learned rule's revocation does.
    tenant = tenant_repo.get(session, tenant_id=tenant_id, lock=True)
    if tenant is None:
        return []
    settings = dict(tenant.settings or {})
    current = settings.get("policy")
    if not current:
        return []
    at, rules, suspended = format_ts(utcnow()), [], []
    for rule in current["rules"]:
        provenance = rule.get("provenance") or {}
        if rule.get("enabled", True) and reviewer in (provenance.get("reviewers") or ()):
            rule = copy.deepcopy(rule)
            rule["enabled"] = False
            rule["provenance"].update({"suspended_at": at, "suspended_reviewer": reviewer})
            suspended.append(rule["id"])
        rules.append(rule)
    if not suspended:
        return []
    policy = Policy.parse({**current, "rules": rules}).to_doc()
    settings["policy"] = policy
    tenant.settings = settings
    digest = hashlib.sha256(canonical_json(policy)).hexdigest()
    for rule_id in suspended:
        ctx.audit.append(session, tenant_id=tenant_id, event_type="policy.learned_rule_suspended", actor=actor,
                         subject={"type": "tenant", "id": tenant_id},
                         data={"rule_id": rule_id, "reviewer": reviewer, "caught": tally.caught,
                               "missed": tally.missed, "policy_sha256": digest})
    return suspended


# --- what reviewers and auditors are told ----------------------------------------------------------

def notices_for(ctx: AppContext, tenant_id: str, deciders: tuple[str, ...]) -> list[dict[str, Any]]:
    """The canaries these deciders approved and were not yet told about, each with what it was and
    why it should have been rejected (fixed texts, never the write's content); marked as told."""
    with ctx.db.sessions.begin() as session:
        missed = repo.unnotified_misses(session, tenant_id=tenant_id, deciders=deciders)
        repo.mark_notified(session, tenant_id=tenant_id, change_ids=[c.change_id for c in missed], at=utcnow())
    return [{"change_id": c.change_id, "decided_at": format_ts(c.decided_at), "family": c.family,
             "why": FAMILY_HINTS.get(c.family, "It was a known attack."),
             "flags": [{"name": f, "explanation": EXPLANATIONS.get(f, "")} for f in c.flags]} for c in missed]


def catch_rates(ctx: AppContext, tenant_id: str) -> list[dict[str, Any]]:
    """Each reviewer's canaries decided, caught and missed, and catch rate, for the auditor's page."""
    with ctx.db.sessions() as session:
        tallies = repo.tallies(session, tenant_id=tenant_id)
    return [{"reviewer": t.reviewer, "decided": t.decided, "caught": t.caught, "missed": t.missed,
             "catch_rate": round(t.catch_rate, 4)} for t in tallies]
