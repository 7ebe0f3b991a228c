"""Memory compaction (OpenWOP RFC 0012): distil groups of live memories of one scope into one.

A run looks at each scope (tenant, agent, user, memory type) and finds groups, without an LLM:

* **duplicates** — memories whose embeddings are within `similarity` (cosine, default 0.92, the
  reviewer diff's duplicate threshold) of the group's leader, the most confident memory (ties: the
  newest), and that do not contradict it (`detect_contradiction`: "prefers dark mode" and "prefers
  light mode" embed at 0.89). The leader survives with its own text and the union of the tags.
* **stale** (only when the tenant sets `stale_after_days`) — episodic memories older than that and
  not recalled since; they become one digest (the lines of each, newest first), the newest survives.

Either way the survivor is the output (`outputId`), tagged `compacted-from:<run id>`; the others are
soft-deleted and linked (status `merged`, `merged_into` the output) through the ordinary merge
path, so history, `as_of` reads and the audit log work as for any merge. The distilled text, tags
and metadata go through redaction again (SR-1 carry-forward): a secret registered after the
sources were written is caught here; a tenant in `reject` mode gets the group skipped.

A tenant policy rule on the `merge` operation that requires approval turns each group into a
staged merge change; approving it runs the same distillation (`apply_staged`). Every compaction
emits `memory.compacted`.

Tenants opt in to the background job with `tenants.settings["compaction"] = {"enabled": true, …}`
(`memwarden compact --tenant T --schedule on`); `memwarden compact --tenant T` runs one pass now.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core import diff as textdiff
from app.core.ids import new_id
from app.core.policy import WriteRequest
from app.core.timefmt import utcnow
from app.db.models import Change, CompactionRun, Memory
from app.errors import AppError, Conflict, NotFound, ValidationFailed
from app.repos.memory import compaction as repo
from app.repos.tenancy import tenants as tenant_repo
from app.repos.memory.memories import Scope
from app.services.events import events
from app.services.memory import staging
from app.services.memory import memories as mem
from app.services.runtime import exclusive_pass
from app.services.runtime.context import AppContext
from app.services.tenancy.tenant_config import redaction_mode, redactor_for

log = logging.getLogger(__name__)

TRIGGER = "host-managed"  # the RFC 0012 trigger: the host decides when (schedule or operator CLI)
STRATEGY = {"duplicates": "keep_canonical", "stale": "merge_content"}
MAX_TAGS = 64
SYSTEM_ACTOR = {"kind": "system", "id": "compaction"}


@dataclass(frozen=True)
class Config:
    """A tenant's compaction settings (`tenants.settings["compaction"]`)."""

    enabled: bool = False
    similarity: float = textdiff.DUPLICATE_COSINE
    stale_after_days: float | None = None
    max_input_entries: int = 1000

    def to_doc(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "similarity": self.similarity, "stale_after_days": self.stale_after_days,
                "max_input_entries": self.max_input_entries}


def tenant_config(session: Session, tenant_id: str) -> Config:
    tenant = tenant_repo.get(session, tenant_id=tenant_id)
    doc = ((tenant.settings or {}) if tenant else {}).get("compaction") or {}
    return Config(**{k: v for k, v in doc.items() if k in Config.__dataclass_fields__})


def set_config(ctx: AppContext, *, tenant_id: str, actor: dict, **changes: Any) -> Config:
    """Change a tenant's compaction settings (validated, audited); `None` values leave a field as is."""
    with ctx.db.sessions.begin() as session:
        tenant = tenant_repo.get(session, tenant_id=tenant_id, lock=True)
        if tenant is None:
            raise NotFound("tenant not found")
        config = replace(tenant_config(session, tenant_id), **{k: v for k, v in changes.items() if v is not None})
        if not 0.5 <= config.similarity <= 1:
            raise ValidationFailed.at("/compaction/similarity", "similarity must be between 0.5 and 1")
        if config.stale_after_days is not None and config.stale_after_days <= 0:
            raise ValidationFailed.at("/compaction/stale_after_days", "stale_after_days must be positive")
        tenant.settings = {**(tenant.settings or {}), "compaction": config.to_doc()}
        ctx.audit.append(session, tenant_id=tenant_id, event_type="tenant.settings_changed", actor=actor,
                         subject={"type": "tenant", "id": tenant_id}, data={"compaction": config.to_doc()})
    return config


# --- finding groups ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Group:
    """Memories of one scope to distil into `canonical` (one of `rows`)."""

    kind: str  # "duplicates" | "stale"
    canonical: Memory
    rows: list[Memory]

    @property
    def sources(self) -> list[str]:
        return [m.id for m in self.rows if m.id != self.canonical.id]


def find_groups(rows: list[Memory], embeddings: np.ndarray, similarity: float,
                stale_before: Any = None) -> list[Group]:
    """Leader clustering: leaders in (confidence, newest) order take every unclaimed memory within
    `similarity`; leftovers that are stale episodic memories form one more group."""
    if len(rows) < 2:
        return []
    vectors = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)
    order = sorted(range(len(rows)), key=lambda i: (rows[i].confidence, rows[i].created_at, rows[i].id), reverse=True)
    free = np.ones(len(rows), dtype=bool)
    groups = []
    for i in order:
        if not free[i]:
            continue
        members = [j for j in np.flatnonzero(free & (vectors @ vectors[i] >= similarity - 1e-6))
                   if j == i or textdiff.detect_contradiction(rows[j].content, rows[i].content) is None]
        if len(members) > 1:
            groups.append(Group("duplicates", rows[i], [rows[j] for j in members]))
            free[members] = False
    if stale_before is not None:
        stale = [rows[j] for j in np.flatnonzero(free) if rows[j].type == "episodic"
                 and rows[j].created_at < stale_before
                 and (rows[j].last_recalled_at or rows[j].created_at) < stale_before]
        if len(stale) > 1:
            groups.append(Group("stale", max(stale, key=lambda m: (m.created_at, m.id)), stale))
    return groups


def distil(ctx: AppContext, session: Session, group: Group, run_id: str) -> tuple[mem.MergePlan, list[str]]:
    """The output of a group: the merge plan of its strategy, tags unioned and tagged with the run,
    redacted again (SR-1 carry-forward). Returns the plan and the redaction labels it applied."""
    base = mem.plan_merge(group.rows, group.canonical.id, STRATEGY[group.kind])
    tags = list(dict.fromkeys([*group.canonical.tags, *(t for m in group.rows for t in m.tags)]))[:MAX_TAGS - 1]
    tags.append(f"compacted-from:{run_id}")
    result = redactor_for(ctx, session, group.canonical.tenant_id).redact_payload(base.content, tags, base.metadata)
    same = result.content == base.content
    plan = mem.MergePlan(result.content, result.metadata, list(dict.fromkeys(result.tags)),
                         max(m.confidence for m in group.rows), base.embedding_from if same else None)
    return plan, [f.label for f in result.findings]


def _fit(ctx: AppContext, group: Group) -> Group | None:
    """A stale digest within the entry size limit: drop the oldest sources until it fits."""
    rows = sorted(group.rows, key=lambda m: (m.created_at, m.id))  # the canonical, newest, is last
    while len(rows) > 1:
        content = mem.plan_merge(rows, group.canonical.id, STRATEGY[group.kind]).content
        if len(content.encode()) <= ctx.settings.max_entry_size_bytes:
            return Group(group.kind, group.canonical, rows)
        rows = rows[1:]
    return None


# --- running -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Compactor:
    """Stands in for an API key when a run stages a change (staging records tenant, submitter, actor)."""

    tenant_id: str
    key_id: str
    actor: dict


def _scopes(session: Session, tenant_id: str, agent_id: str | None) -> list[tuple[str, str | None, str]]:
    return repo.scopes(session, tenant_id=tenant_id, agent_id=agent_id)


def _candidates(session: Session, tenant_id: str, scope: tuple[str, str | None, str], limit: int,
                busy: set[str]) -> list[Memory]:
    agent_id, user_id, memory_type = scope
    rows = repo.candidates(session, tenant_id=tenant_id, agent_id=agent_id, user_id=user_id,
                           memory_type=memory_type, limit=limit)
    return [m for m in rows if m.id not in busy and m.embedding is not None]


def compact_tenant(ctx: AppContext, tenant_id: str, *, agent_id: str | None = None, trigger: str = "cli",
                   actor: dict | None = None, similarity: float | None = None) -> dict[str, Any]:
    """One compaction pass over a tenant (or one agent of it); returns the run's id and stats.
    409 while another pass over the tenant runs (in any process)."""
    actor = actor or SYSTEM_ACTOR
    if similarity is not None and not 0.5 <= similarity <= 1:
        raise ValidationFailed.at("/similarity", "similarity must be between 0.5 and 1")
    run = CompactionRun(id=new_id("cmp"), tenant_id=tenant_id, agent_id=agent_id, trigger=trigger,
                        status="running", started_at=utcnow())
    with _one_pass_at_a_time(ctx, tenant_id):
        with ctx.db.sessions.begin() as session:
            if tenant_repo.get(session, tenant_id=tenant_id) is None:
                raise NotFound("tenant not found")
            repo.insert_run(session, run)
        stats = {"scopes": 0, "groups": 0, "compacted": 0, "staged": 0, "sources": 0, "skipped": 0}
        try:
            _pass(ctx, run, actor, similarity, stats)
        except Exception:
            _finish(ctx, run, actor, "failed", stats)
            raise
        _finish(ctx, run, actor, "done", stats)
    return {"run_id": run.id, **stats}


def _one_pass_at_a_time(ctx: AppContext, tenant_id: str):
    return exclusive_pass.one_pass_at_a_time(ctx, tenant_id, try_lock=repo.try_lock_pass, unlock=repo.unlock_pass,
                                             what="compaction")


def _pass(ctx: AppContext, run: CompactionRun, actor: dict, similarity: float | None, stats: dict[str, int]) -> None:
    with ctx.db.sessions() as session:
        config = tenant_config(session, run.tenant_id)
        busy = repo.held_by_pending_changes(session, tenant_id=run.tenant_id)
        stale_before = (utcnow() - timedelta(days=config.stale_after_days)) if config.stale_after_days else None
        work = []
        for scope in _scopes(session, run.tenant_id, run.agent_id):
            rows = _candidates(session, run.tenant_id, scope, config.max_input_entries, busy)
            embeddings = np.array([np.asarray(m.embedding, dtype=np.float32) for m in rows]) if rows else None
            work += find_groups(rows, embeddings, similarity or config.similarity, stale_before)
            stats["scopes"] += 1
    compactor = _Compactor(run.tenant_id, f"compaction:{run.id}", actor)
    for group in work:
        group = _fit(ctx, group) if group.kind == "stale" else group
        if group is None:
            stats["skipped"] += 1
            continue
        stats["groups"] += 1
        try:
            outcome = _compact_group(ctx, compactor, run.id, group)
        except AppError as exc:  # moved under us, denied by policy, or a secret in reject mode
            log.info("compaction %s skipped a group: %s", run.id, exc.message)
            stats["skipped"] += 1
            continue
        stats[outcome] += 1
        stats["sources"] += len(group.sources) if outcome == "compacted" else 0


def _compact_group(ctx: AppContext, compactor: _Compactor, run_id: str, group: Group) -> str:
    """Apply or stage one group; returns "compacted" or "staged"."""
    tenant_id, agent_id = compactor.tenant_id, group.canonical.agent_id
    with ctx.db.sessions() as session:
        plan, labels = distil(ctx, session, group, run_id)
        if labels and redaction_mode(session, tenant_id) == "reject":
            raise Conflict("the distilled memory contains secret-shaped values; this tenant rejects them")
    embedding = None if plan.embedding_from else ctx.embedder.embed([plan.content])[0].tolist()
    with ctx.db.sessions.begin() as session:
        decision = staging.review_requirement(session, tenant_id, WriteRequest(
            operation="merge", agent_id=agent_id, rows_affected=len(group.rows)))
        if decision.action == "require_approval":
            staging.stage_change(
                ctx, session, principal=compactor, operation="merge", agent_id=agent_id,
                user_id=group.canonical.user_id, memory_ids=[group.canonical.id, *group.sources], decision=decision,
                request={"agent_id": agent_id, "canonical": group.canonical.id, "duplicates": group.sources,
                         "strategy": STRATEGY[group.kind], "compaction_run": run_id, "compaction_kind": group.kind},
                redactions=[{"field": "content", "label": label} for label in labels])
            return "staged"
        _apply(ctx, session, compactor.actor, run_id, group, plan, embedding, change_id=None)
    return "compacted"


def _apply(ctx: AppContext, session: Session, actor: dict, run_id: str, group: Group, plan: mem.MergePlan,
           embedding: list[float] | None, change_id: str | None) -> Memory:
    """Merge the group into its output and emit `memory.compacted`, in `session`'s transaction."""
    canonical = group.canonical
    output = mem.apply_merge(ctx, session, canonical.tenant_id, actor, Scope(canonical.tenant_id, canonical.agent_id),
                             canonical.id, group.sources, f"compaction:{group.kind}", plan, embedding,
                             expected=group.rows, change_id=change_id, via=run_id)
    from app.services.memory import refs

    events.lock_tenant(session, canonical.tenant_id)  # before minting the ref: one lock order everywhere
    events.emit(session, canonical.tenant_id, "memory.compacted", {
        "memoryRef": refs.ref_for(session, canonical.tenant_id, canonical.agent_id, canonical.user_id),
        "outputId": output.id, "sourceIds": group.sources, "sourceCount": len(group.sources), "trigger": TRIGGER,
        "byteSize": len(output.content.encode()), "agentId": canonical.agent_id, "compactionRunId": run_id})
    return output


def apply_staged(ctx: AppContext, session: Session, change: Change, actor: dict,
                 rows: list[Memory] | None) -> dict[str, Any]:
    """Carry out an approved staged compaction group (called by review when deciding the change)."""
    request = change.request
    by_id = {m.id: m for m in rows or []}
    if any(i not in by_id for i in [request["canonical"], *request["duplicates"]]):
        raise Conflict("memories to compact are gone; reject this change", details={"reason": "stale_review"})
    group = Group(request["compaction_kind"], by_id[request["canonical"]], list(by_id.values()))
    plan, labels = distil(ctx, session, group, request["compaction_run"])
    if labels and redaction_mode(session, change.tenant_id) == "reject":
        raise Conflict("the distilled memory now contains secret-shaped values; reject this change",
                       details={"reason": "secret_leakage"})
    # Embedding inside the decision's transaction: only for digests and newly redacted text, and
    # the plan depends on rows this transaction is about to lock.
    embedding = None if plan.embedding_from else ctx.embedder.embed([plan.content])[0].tolist()
    output = _apply(ctx, session, actor, request["compaction_run"], group, plan, embedding, change.id)
    return {"memory_id": output.id, "merged": group.sources, "compaction_run": request["compaction_run"]}


def _finish(ctx: AppContext, run: CompactionRun, actor: dict, status: str, stats: dict[str, Any]) -> None:
    with ctx.db.sessions.begin() as session:
        repo.finish_run(session, tenant_id=run.tenant_id, run_id=run.id, status=status, at=utcnow(), stats=stats)
        ctx.audit.append(session, tenant_id=run.tenant_id, event_type="compaction.finished", actor=actor,
                         subject={"type": "compaction_run", "id": run.id},
                         data={"status": status, "agent_id": run.agent_id, "trigger": run.trigger, **stats})


def run_scheduled(ctx: AppContext) -> list[dict[str, Any]]:
    """The background job: one pass over every tenant that opted in (a failing tenant is logged)."""
    with ctx.db.sessions() as session:
        tenants = repo.tenants_enabled(session)
    results = []
    for tenant_id in tenants:
        try:
            results.append(compact_tenant(ctx, tenant_id, trigger="schedule"))
        except Conflict:
            log.info("compaction of tenant %s is already running elsewhere", tenant_id)
        except Exception:
            log.exception("compaction of tenant %s failed", tenant_id)
    return results
