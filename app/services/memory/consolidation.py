"""Consolidation: short-term episodic memories become long-term semantic ones, and cold ones leave,
through the same operations an agent uses (`remember`, `expire`), screened and decided by the
tenant's policy like any agent's write.

A pass looks at each (agent, user) window of the agents the tenant opted in (`Config.agents`),
scores its recent episodic items (`app.core.consolidation`: mentions on distinct days, recency,
confidence, whether they state something about the user) and

* **promotes** each repeated fact: a `remember` of type `semantic`, source `inferred`, tagged
  `consolidated`, its metadata naming the source memories (`consolidated_from`). Screening and the
  policy decide it: live, staged for review (a rule such as `{"match": {"sources": ["inferred"]},
  "action": "require_approval"}`) or denied;
* **evicts** cold items: an `expire` (action `archive` by default) of episodic items older than
  `evict_after_days` that nobody recalled in the last `protect_recalled_days` (checked again, by the
  expire's own predicate, when a staged eviction is approved) and that either scored below
  `evict_below` or were evidence of a promotion that is now live.

Each window is one transaction: the claims (`consolidation_claims`, primary key = digest of the
window and the source ids), the writes, their audit entries and one `agent.memory.consolidated`
event (ids and counts). A pass killed mid-window leaves that window untouched; a rerun finds the
committed windows' claims and promotes nothing twice. A dry run scores and reports, writing nothing
but its run record.

Compaction (`app.services.memory.compaction`) is different: it merges near-duplicates of one type into
one of them, and digests stale items; consolidation writes a new semantic fact beside the episodic
evidence and never merges.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core import consolidation as core
from app.core.access import Principal
from app.core.ids import new_id
from app.core.policy import WriteRequest
from app.core.timefmt import utcnow
from app.db.models import ConsolidationRun, Memory
from app.errors import AppError, Conflict, NotFound, ValidationFailed
from app.repos.memory import compaction as compaction_repo
from app.repos.memory import consolidation as repo
from app.repos.tenancy import tenants as tenant_repo
from app.repos.memory.memories import Scope
from app.services.memory import derivations, recall_tracking, refs, staging
from app.services.events import events
from app.services.memory import memories as mem
from app.services.memory import remembering
from app.services.runtime import exclusive_pass
from app.services.runtime.context import AppContext
from app.services.tenancy.tenant_config import rules_for

log = logging.getLogger(__name__)

SYSTEM_ACTOR = {"kind": "system", "id": "consolidation"}
TAG = "consolidated"
EVICT_ACTIONS = ("archive", "forget", "demote")
TRIGGERS = ("cli", "schedule", "api")


@dataclass(frozen=True)
class Config:
    """A tenant's consolidation settings (`tenants.settings["consolidation"]`)."""

    agents: tuple[str, ...] = ()
    """Agent globs opted in (`*`: all); none, the tenant has not opted in."""
    enabled: bool = False
    """The schedule runs for this tenant."""
    interval_minutes: float = 1440.0
    short_term_days: float = 30.0
    similarity: float = 0.72
    min_mentions: int = 3
    promote_at: float = 0.55
    evict: bool = True
    evict_after_days: float = 14.0
    protect_recalled_days: float = 7.0
    evict_below: float = 0.35
    evict_action: str = "archive"
    max_items: int = 1000

    def to_doc(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    def covers(self, agent_id: str) -> bool:
        return any(fnmatch.fnmatchcase(agent_id, glob) for glob in self.agents)

    @property
    def thresholds(self) -> core.Thresholds:
        return core.Thresholds(min_mentions=self.min_mentions, promote_at=self.promote_at,
                               evict_below=self.evict_below)


def tenant_config(session: Session, tenant_id: str) -> Config:
    tenant = tenant_repo.get(session, tenant_id=tenant_id)
    doc = ((tenant.settings or {}) if tenant else {}).get("consolidation") or {}
    return _config(doc)


def _config(doc: dict[str, Any]) -> Config:
    values = {k: v for k, v in doc.items() if k in Config.__dataclass_fields__}
    if "agents" in values:
        values["agents"] = tuple(values["agents"] or ())
    return Config(**values)


def _validate(config: Config) -> None:
    def bad(field_name: str, message: str) -> None:
        raise ValidationFailed.at(f"/consolidation/{field_name}", message)

    if not all(isinstance(a, str) and 0 < len(a) <= 128 for a in config.agents):
        bad("agents", "agent globs are 1-128 characters")
    if not 0.5 <= config.similarity <= 1:
        bad("similarity", "similarity must be between 0.5 and 1")
    if not 2 <= config.min_mentions <= 100:
        bad("min_mentions", "min_mentions must be between 2 and 100")
    for name in ("promote_at", "evict_below"):
        if not 0 <= getattr(config, name) <= 1:
            bad(name, f"{name} must be between 0 and 1")
    for name in ("short_term_days", "evict_after_days", "protect_recalled_days"):
        if not 0 <= getattr(config, name) <= 3650:
            bad(name, f"{name} must be between 0 and 3650")
    if not 1 <= config.interval_minutes <= 525_600:
        bad("interval_minutes", "interval_minutes must be between 1 and 525600")
    if config.evict_action not in EVICT_ACTIONS:
        bad("evict_action", "evict_action is one of " + ", ".join(EVICT_ACTIONS))
    if not 10 <= config.max_items <= 10_000:
        bad("max_items", "max_items must be between 10 and 10000")


def set_config(ctx: AppContext, *, tenant_id: str, actor: dict, **changes: Any) -> Config:
    """Change a tenant's consolidation settings (validated, audited); `None` values leave a field as is."""
    with ctx.db.sessions.begin() as session:
        tenant = tenant_repo.get(session, tenant_id=tenant_id, lock=True)
        if tenant is None:
            raise NotFound("tenant not found")
        changes = {k: (tuple(v) if k == "agents" else v) for k, v in changes.items() if v is not None}
        config = replace(tenant_config(session, tenant_id), **changes)
        _validate(config)
        tenant.settings = {**(tenant.settings or {}), "consolidation": config.to_doc()}
        ctx.audit.append(session, tenant_id=tenant_id, event_type="tenant.settings_changed", actor=actor,
                         subject={"type": "tenant", "id": tenant_id}, data={"consolidation": config.to_doc()})
    return config


# --- a pass --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Consolidator(Principal):
    """Stands in for an API key: the promotions are its writes (screened with no privileged source)."""

    run_actor: dict = field(default_factory=lambda: SYSTEM_ACTOR)

    @property
    def actor(self) -> dict[str, str]:
        return self.run_actor


@dataclass
class Plan:
    """What a pass proposes for one window."""

    agent_id: str
    user_id: str | None
    promotions: list[core.Cluster]
    evictions: list[tuple[Memory, str, float]]
    """(memory, why: `cold` or `consolidated`, its score)."""
    cold: dict[str, Memory] = field(default_factory=dict)
    """The eviction candidates (old enough, not recalled lately): a promotion that goes live in this
    pass evicts those among its sources too, so a rerun finds nothing left to do."""


def consolidate_tenant(ctx: AppContext, tenant_id: str, *, agent_id: str | None = None, trigger: str = "cli",
                       actor: dict | None = None, dry_run: bool = False, scorer: core.Scorer | None = None,
                       writer: core.Writer | None = None,
                       after_window: Callable[[int], None] | None = None) -> dict[str, Any]:
    """One pass over a tenant (or one agent of it); returns the run's id, stats and (ids and scores
    only) what it promoted or evicted. 409 while another pass over the tenant runs, or when the
    tenant (or that agent) has not opted in — except for a dry run, which changes nothing.
    `after_window` is called with the count of windows done (the crash drill's hook)."""
    actor = actor or SYSTEM_ACTOR
    if trigger not in TRIGGERS:
        raise ValueError(f"unknown trigger {trigger!r}")
    run = ConsolidationRun(id=new_id("cns"), tenant_id=tenant_id, agent_id=agent_id, trigger=trigger,
                           dry_run=dry_run, status="running", started_at=utcnow(), stats={})
    with _one_pass_at_a_time(ctx, tenant_id):
        with ctx.db.sessions.begin() as session:
            if tenant_repo.get(session, tenant_id=tenant_id) is None:
                raise NotFound("tenant not found")
            config = tenant_config(session, tenant_id)
            if not dry_run:
                _require_opted_in(config, agent_id)
            repo.abandon_stale_runs(session, tenant_id=tenant_id)
            repo.insert_run(session, run)
        stats = {"windows": 0, "items": 0, "clusters": 0, "promoted": 0, "staged": 0, "denied": 0,
                 "already_claimed": 0, "evicted": 0, "evictions_staged": 0}
        report: dict[str, list] = {"promotions": [], "evictions": []}
        try:
            _pass(ctx, run, config, actor, stats, report, scorer, writer, after_window)
        except Exception:
            _finish(ctx, run, actor, "failed", stats)
            raise
        _finish(ctx, run, actor, "done", stats)
    return {"run_id": run.id, "dry_run": dry_run, **stats, **report}


def _require_opted_in(config: Config, agent_id: str | None) -> None:
    if not config.agents:
        raise Conflict("this tenant has not opted in to consolidation",
                       details={"reason": "not_opted_in"})
    if agent_id is not None and not config.covers(agent_id):
        raise Conflict("this agent is not opted in to consolidation", details={"reason": "not_opted_in"})


def _one_pass_at_a_time(ctx: AppContext, tenant_id: str):
    return exclusive_pass.one_pass_at_a_time(ctx, tenant_id, try_lock=repo.try_lock_pass, unlock=repo.unlock_pass,
                                             what="consolidation")


def _pass(ctx: AppContext, run: ConsolidationRun, config: Config, actor: dict, stats: dict[str, int],
          report: dict[str, list], scorer: core.Scorer | None, writer: core.Writer | None,
          after_window: Callable[[int], None] | None) -> None:
    scorer = scorer or core.DefaultScorer(similarity=config.similarity)
    writer = writer or core.DefaultWriter()
    recall_tracking.flush(ctx.db.engine)  # this process's batched recall times, before reading them
    with ctx.db.sessions() as session:
        all_windows = repo.windows(session, tenant_id=run.tenant_id, agent_id=run.agent_id)
    windows = [w for w in all_windows if run.dry_run and not config.agents or config.covers(w[0])]
    principal = _Consolidator(tenant_id=run.tenant_id, key_id=f"consolidation:{run.id}",
                              scopes=frozenset({"memory:write"}), agents=("*",), run_actor=actor)
    for agent_id, user_id in windows:
        plan = _plan(ctx, run.tenant_id, agent_id, user_id, config, scorer, stats)
        stats["windows"] += 1
        if run.dry_run:
            if config.evict:  # what promoting would evict too (its cold sources), as the real pass does
                plan.evictions += [(plan.cold[m.id], "consolidated", 0.0) for c in plan.promotions
                                   for m in c.members if m.id in plan.cold]
            _report(report, plan, writer, None)
        elif plan.promotions or plan.evictions:
            _apply_window(ctx, principal, run, config, plan, writer, stats, report)
        if after_window is not None:
            after_window(stats["windows"])


def _plan(ctx: AppContext, tenant_id: str, agent_id: str, user_id: str | None, config: Config,
          scorer: core.Scorer, stats: dict[str, int]) -> Plan:
    now = utcnow()
    with ctx.db.sessions() as session:
        busy = compaction_repo.held_by_pending_changes(session, tenant_id=tenant_id)
        claimed = repo.claimed_sources(session, tenant_id=tenant_id, agent_id=agent_id)
        recent = repo.short_term(session, tenant_id=tenant_id, agent_id=agent_id, user_id=user_id,
                                 since=now - timedelta(days=config.short_term_days), limit=config.max_items)
        cold = repo.cold(session, tenant_id=tenant_id, agent_id=agent_id, user_id=user_id,
                         older_than=now - timedelta(days=config.evict_after_days),
                         not_recalled_since=now - timedelta(days=config.protect_recalled_days),
                         limit=config.max_items) if config.evict else []
        live_sources = repo.promoted_live(session, tenant_id=tenant_id, agent_id=agent_id) if cold else set()
    recent_ids = {m.id for m in recent}
    pool = {m.id: m for m in [*recent, *cold] if m.id not in busy and m.id not in claimed}
    items = [core.Item(m.id, m.content or "", float(m.confidence), m.created_at, m.last_recalled_at,
                       np.asarray(m.embedding, dtype=np.float32)) for m in pool.values()]
    clusters = scorer.clusters(items, now)
    stats["items"] += len(items)
    stats["clusters"] += sum(1 for c in clusters if len(c.members) > 1)
    promotions, cluster_of = [], {}
    for cluster in clusters:
        promote = core.promotable(cluster, config.thresholds) and any(m.id in recent_ids for m in cluster.members)
        if promote:
            promotions.append(cluster)
        for m in cluster.members:
            cluster_of[m.id] = (cluster, promote)
    evictions = []
    for m in cold:
        if m.id in busy:
            continue
        if m.id in live_sources:
            evictions.append((m, "consolidated", 0.0))
            continue
        if m.id not in cluster_of:
            continue  # evidence of a promotion still pending review: kept until it is decided
        cluster, promote = cluster_of[m.id]
        if not promote and cluster.score < config.evict_below:
            evictions.append((m, "cold", cluster.score))
    return Plan(agent_id, user_id, promotions, evictions, {m.id: m for m in cold if m.id not in busy})


def _report(report: dict[str, list], plan: Plan, writer: core.Writer, outcomes: list[dict] | None) -> None:
    for i, cluster in enumerate(plan.promotions):
        _, made, _ = writer.statement(cluster)
        entry = {"agent_id": plan.agent_id, "user_id": plan.user_id, **cluster.evidence(), "statement_from": made}
        if outcomes is not None:
            entry.update(outcomes[i])
        report["promotions"].append(entry)
    if plan.evictions:
        report["evictions"].append({"agent_id": plan.agent_id, "user_id": plan.user_id,
                                    "memory_ids": [m.id for m, _, _ in plan.evictions],
                                    "reasons": {m.id: why for m, why, _ in plan.evictions}})


def _apply_window(ctx: AppContext, principal: _Consolidator, run: ConsolidationRun, config: Config, plan: Plan,
                  writer: core.Writer, stats: dict[str, int], report: dict[str, list]) -> None:
    """Promote and evict in one transaction, with the window's claims, audit entries and event."""
    tenant_id = run.tenant_id
    written = []
    for cluster in plan.promotions:  # embedded before the transaction, as `remember` does
        text, made, attribute = writer.statement(cluster)
        cluster.statement, cluster.statement_from, cluster.attribute = text, made, attribute
        written.append(ctx.embedder.embed([text])[0].tolist() if text else None)
    rules = rules_for(ctx, principal)
    outcomes: list[dict] = []
    summary = {"promoted": [], "staged": [], "evicted": [], "eviction_changes": [], "sources": 0}
    with ctx.db.sessions.begin() as session:
        for cluster, embedding in zip(plan.promotions, written, strict=True):
            outcome = _promote(ctx, session, principal, run, rules, plan, cluster, embedding, stats)
            outcomes.append(outcome)
            if outcome["outcome"] == "promoted":
                summary["promoted"].append(outcome["memory_id"])
                if config.evict:
                    plan.evictions += [(plan.cold[m.id], "consolidated", 0.0) for m in cluster.members
                                       if m.id in plan.cold]
            elif outcome["outcome"] == "staged":
                summary["staged"].append(outcome["change_id"])
            if outcome["outcome"] in ("promoted", "staged"):
                summary["sources"] += len(cluster.members)
        if plan.evictions:
            _evict(ctx, session, principal, run, config, plan, stats, summary)
        if summary["promoted"] or summary["staged"] or summary["evicted"] or summary["eviction_changes"]:
            _emit(session, tenant_id, run, plan, summary)
    _report(report, plan, writer, outcomes)


def _promote(ctx: AppContext, session: Session, principal: _Consolidator, run: ConsolidationRun, rules,
             plan: Plan, cluster: core.Cluster, embedding: list[float] | None, stats: dict[str, int]) -> dict:
    """One promotion in a savepoint: its claim, then the remember (screened, decided by policy)."""
    tenant_id = run.tenant_id
    key = core.window_key(tenant_id, plan.agent_id, plan.user_id, "promote", cluster.ids)
    evidence = {**cluster.evidence(), "statement_from": cluster.statement_from, "attribute": cluster.attribute}
    body = {"agent_id": plan.agent_id, "type": "semantic", "content": cluster.statement,
            "confidence": round(max(0.05, min(1.0, cluster.score)), 4), "source": "inferred", "tags": [TAG],
            "metadata": {"consolidated_from": cluster.ids, "consolidation_run": run.id}}
    if plan.user_id is not None:
        body["user_id"] = plan.user_id
    try:
        with session.begin_nested():
            if not repo.claim(session, tenant_id=tenant_id, key=key, kind="promote", run_id=run.id,
                              agent_id=plan.agent_id, user_id=plan.user_id, source_ids=cluster.ids,
                              evidence=evidence):
                stats["already_claimed"] += 1
                return {"outcome": "already_claimed"}
            now = utcnow()
            write = remembering.prepare_remember(ctx, principal, body, rules, memory_id=new_id("mem"), created_at=now,
                                         updated_at=now, precheck=False, future_expiry=True)
            result = remembering.write_prepared(ctx, session, principal, [write], [embedding])[0]
            change_id = result.body.get("change_id")
            repo.record_outcome(session, tenant_id=tenant_id, key=key, memory_id=write.memory.id,
                                change_id=change_id)
            derivations.record(session, tenant_id=tenant_id, derived_id=write.memory.id, source_ids=cluster.ids,
                               kind="consolidation", via=run.id, at=now)
            ctx.audit.append(session, tenant_id=tenant_id, event_type="consolidation.promoted", actor=principal.actor,
                             subject={"type": "memory", "id": write.memory.id},
                             data={"run_id": run.id, "agent_id": plan.agent_id, "user_id": plan.user_id,
                                   "change_id": change_id, "source_ids": cluster.ids,
                                   **{k: evidence[k] for k in ("mentions", "salience", "recency", "confidence",
                                                               "stance", "score", "statement_from")}})
    except AppError as exc:  # denied by policy, a secret in reject mode, too large
        log.info("consolidation %s skipped a promotion: %s", run.id, exc.message)
        stats["denied"] += 1
        return {"outcome": "denied", "code": exc.code}
    staged = result.status == 202
    stats["staged" if staged else "promoted"] += 1
    return {"outcome": "staged" if staged else "promoted", "memory_id": write.memory.id, "change_id": change_id}


def _evict(ctx: AppContext, session: Session, principal: _Consolidator, run: ConsolidationRun, config: Config,
           plan: Plan, stats: dict[str, int], summary: dict[str, Any]) -> None:
    """The window's eviction: an `expire` of the chosen ids whose own predicates re-check, under lock,
    that each is still episodic, old enough and not recalled in `protect_recalled_days`."""
    tenant_id = run.tenant_id
    ids = sorted(m.id for m, _, _ in plan.evictions)
    policy = {"type": "episodic", "older_than_days": config.evict_after_days,
              "no_recall_in_days": config.protect_recalled_days}
    key = core.window_key(tenant_id, plan.agent_id, plan.user_id, "evict", ids)
    why = {m.id: {"reason": reason, "score": round(score, 4)} for m, reason, score in plan.evictions}
    with session.begin_nested():
        if not repo.claim(session, tenant_id=tenant_id, key=key, kind="evict", run_id=run.id, agent_id=plan.agent_id,
                          user_id=plan.user_id, source_ids=ids, evidence={"items": why}):
            stats["already_claimed"] += 1
            return
        scope = Scope(tenant_id, plan.agent_id, plan.user_id)
        rows = mem._expire_rows(session, scope, policy, lock=True, ids=ids)
        if not rows:
            return
        decision = staging.review_requirement(session, tenant_id, WriteRequest(
            operation="expire", agent_id=plan.agent_id, rows_affected=len(rows)))
        found = [m.id for m in rows]
        change_id = None
        if decision.action == "require_approval":
            change = staging.stage_change(
                ctx, session, principal=principal, operation="expire", agent_id=plan.agent_id, user_id=plan.user_id,
                request={"agent_id": plan.agent_id, "user_id": plan.user_id, "policy": policy,
                         "action": config.evict_action, "ids": found, "consolidation_run": run.id,
                         "evidence": {i: why[i] for i in found}},
                memory_ids=found, decision=decision, redactions=[])
            change_id = change.id
            stats["evictions_staged"] += len(found)
            summary["eviction_changes"].append(change.id)
        else:
            mem.apply_expire(ctx, session, tenant_id, principal.actor, rows, config.evict_action)
            stats["evicted"] += len(found)
            summary["evicted"] += found
        repo.record_outcome(session, tenant_id=tenant_id, key=key, memory_id=None, change_id=change_id)
        ctx.audit.append(session, tenant_id=tenant_id, event_type="consolidation.evicted", actor=principal.actor,
                         subject={"type": "consolidation_run", "id": run.id},
                         data={"agent_id": plan.agent_id, "user_id": plan.user_id, "memory_ids": found,
                               "action": config.evict_action, "change_id": change_id,
                               "reasons": {i: why[i]["reason"] for i in found}})


def _emit(session: Session, tenant_id: str, run: ConsolidationRun, plan: Plan, summary: dict[str, Any]) -> None:
    """`agent.memory.consolidated`: identifiers and counts, never content."""
    events.lock_tenant(session, tenant_id)  # before minting the ref: one lock order everywhere
    events.emit(session, tenant_id, "agent.memory.consolidated", {
        "memoryRef": refs.ref_for(session, tenant_id, plan.agent_id, plan.user_id), "agentId": plan.agent_id,
        "consolidationRunId": run.id, "trigger": "host-managed",
        "promotedIds": summary["promoted"], "stagedChangeIds": summary["staged"],
        "evictedIds": summary["evicted"], "evictionChangeIds": summary["eviction_changes"],
        "promotedCount": len(summary["promoted"]), "stagedCount": len(summary["staged"]),
        "evictedCount": len(summary["evicted"]), "sourceCount": summary["sources"]})


def _finish(ctx: AppContext, run: ConsolidationRun, actor: dict, status: str, stats: dict[str, Any]) -> None:
    with ctx.db.sessions.begin() as session:
        repo.finish_run(session, tenant_id=run.tenant_id, run_id=run.id, status=status, at=utcnow(), stats=stats)
        ctx.audit.append(session, tenant_id=run.tenant_id, event_type="consolidation.finished", actor=actor,
                         subject={"type": "consolidation_run", "id": run.id},
                         data={"status": status, "agent_id": run.agent_id, "trigger": run.trigger,
                               "dry_run": bool(run.dry_run), **stats})


def evidence_for(session: Session, tenant_id: str, memory_id: str) -> dict[str, Any] | None:
    """The stored evidence of the promotion that wrote `memory_id` (the change page's), or None."""
    claim = repo.claim_for_memory(session, tenant_id=tenant_id, memory_id=memory_id)
    return None if claim is None else {"run_id": claim.run_id, **(claim.evidence or {})}


def run_scheduled(ctx: AppContext) -> list[dict[str, Any]]:
    """The background job: a pass over every opted-in tenant whose interval has passed."""
    with ctx.db.sessions() as session:
        due = []
        for tenant_id, doc in repo.tenants_enabled(session):
            config = _config(doc or {})
            last = repo.last_scheduled(session, tenant_id=tenant_id)
            if config.agents and (last is None or utcnow() - last >= timedelta(minutes=config.interval_minutes)):
                due.append(tenant_id)
    results = []
    for tenant_id in due:
        try:
            results.append(consolidate_tenant(ctx, tenant_id, trigger="schedule"))
        except Conflict:
            log.info("consolidation of tenant %s is already running elsewhere", tenant_id)
        except Exception:
            log.exception("consolidation of tenant %s failed", tenant_id)
    return results
