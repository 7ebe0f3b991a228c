"""Carrying out an approval: the work done before the decision takes the change's lock (validating,
redacting and embedding a reviewer's edits, planning a merge: `prepare`), and applying the approved
change to live state in the decision's transaction (`apply`), each write audited and announced."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.core.timefmt import utcnow
from app.db.models import Change, Memory
from app.errors import Conflict, Forbidden, NotFound, ValidationFailed
from app.repos.memory import memories as repo
from app.repos.memory.memories import Scope
from app.services.audit import recover
from app.services.events import events
from app.services.memory import compaction, derivations, supersession, workspace
from app.services.memory import memories as mem
from app.services.review.changes import AgentCheck, load_change, staged_memory
from app.services.review.diffs import candidates_for, replaced, resolve_targets
from app.services.runtime.context import AppContext

if TYPE_CHECKING:  # the request is built and decided in app.services.review.review, which calls this module
    from app.services.review.review import DecisionRequest


@dataclass
class Prepared:
    """Work done before the decision's transaction: validation, redaction and embedding of edits."""

    clean: mem.CleanWrite | None = None
    memory_type: str | None = None
    embedding: list[float] | None = None
    merge_plan: mem.MergePlan | None = None
    merge_rows: list[Memory] | None = None


def prepare(ctx: AppContext, session, tenant_id: str, change_id: str, may_see: AgentCheck,
             request: DecisionRequest) -> Prepared:
    """Validate, redact and embed what the decision needs, reading in `session` with no lock held.
    The rows a merge plan was made from leave the session, so the decision's locked reads load
    them afresh and can tell whether they changed meanwhile."""
    prepared = _plan(ctx, session, tenant_id, change_id, may_see, request)
    for row in prepared.merge_rows or []:
        session.expunge(row)
    return prepared


def _plan(ctx: AppContext, session, tenant_id: str, change_id: str, may_see: AgentCheck,
          request: DecisionRequest) -> Prepared:
    prepared = Prepared()
    change = load_change(session, tenant_id, change_id, may_see)
    if request.memory_ids is not None and change.operation not in ("forget", "expire"):
        raise ValidationFailed.at("/memory_ids", "choosing memories applies to forget and expire changes only")
    if change.operation == "remember" and not (request.edits or request.merge_into):
        return prepared  # a plain approval: nothing to validate or embed
    if change.operation == "remember":
        memory = staged_memory(session, change)
        edits = request.edits or {}
        if edits:
            memory_type = edits.get("type", memory.type)
            prepared.clean = mem.clean_payload(
                ctx, session, tenant_id, content=edits.get("content", memory.content),
                tags=edits.get("tags", list(memory.tags)), metadata=edits.get("metadata", memory.metadata_),
                memory_type=memory_type)
            prepared.memory_type = memory_type
        content = prepared.clean.content if prepared.clean else memory.content
        if request.merge_into:
            target = repo.get_visible(session, scope=Scope(tenant_id, change.agent_id), memory_id=request.merge_into)
            if target is None:
                raise NotFound("memory to merge into not found")
            staged = Memory(id=memory.id, content=content, tags=(prepared.clean.tags if prepared.clean else memory.tags),
                            metadata_=(prepared.clean.metadata if prepared.clean else memory.metadata_),
                            confidence=memory.confidence, created_at=memory.created_at)
            prepared.merge_rows = [target]
            prepared.merge_plan = mem.plan_merge([target, staged], target.id, "merge_content")
            prepared.embedding = ctx.embedder.embed([prepared.merge_plan.content])[0].tolist()
        elif prepared.clean and prepared.clean.content != memory.content:
            prepared.embedding = ctx.embedder.embed([content])[0].tolist()
        if request.supersedes and request.supersedes == request.merge_into:
            raise ValidationFailed.at("/supersedes", "cannot both merge into and supersede the same memory")
    elif request.edits or request.merge_into or request.supersedes or request.keep_both:
        raise ValidationFailed.at("/edits", "edits, merge_into, supersedes and keep_both apply to remember changes only")
    elif change.operation == "merge":
        rows = repo.matching(session, scope=Scope(tenant_id, change.agent_id),
                             ids=[change.request["canonical"], *change.request["duplicates"]])
        plan = mem.plan_merge(rows, change.request["canonical"], change.request.get("strategy", "keep_canonical")) \
            if len(rows) == 1 + len(change.request["duplicates"]) else None
        prepared.merge_rows, prepared.merge_plan = rows, plan
        if plan is not None and plan.reembed:
            prepared.embedding = ctx.embedder.embed([plan.content])[0].tolist()
    return prepared


def apply(ctx: AppContext, session, change: Change, actor: dict, request: DecisionRequest,
           prepared: Prepared) -> dict[str, Any]:
    """Carry out an approved change against live state, in the decision's transaction."""
    tenant_id, now = change.tenant_id, utcnow()
    if change.operation == "remember" and not request.merge_into:
        # What it replaces is read before it goes live (as the text it will hold), so it is not its own neighbour.
        staged = staged_memory(session, change)
        content = prepared.clean.content if prepared.clean is not None else staged.content
        planned = replaced(ctx, session, change, staged, candidates_for(session, change, staged, prepared.embedding),
                            content, prepared.embedding)
        # The common case in one round trip: the staged row goes live (with any edits) and comes back.
        values: dict[str, Any] = {"status": "live", "live_from": now, "updated_at": now}
        if prepared.clean is not None:
            values.update(content=prepared.clean.content, tags=prepared.clean.tags,
                          metadata_=prepared.clean.metadata, type=prepared.memory_type)
        if prepared.embedding is not None:
            values["embedding"] = prepared.embedding
        memory = repo.update_returning(session, tenant_id=tenant_id, memory_id=change.memory_ids[0], **values)
        return _committed(ctx, session, change, actor, request, memory, planned, edited=prepared.clean is not None)
    if change.operation == "remember":  # merged into a live memory instead of going live itself
        memory = staged_memory(session, change, lock=True)
        if prepared.clean is not None:
            memory.content, memory.tags, memory.metadata_ = (prepared.clean.content, prepared.clean.tags,
                                                             prepared.clean.metadata)
            memory.type = prepared.memory_type
        target = repo.lock_live(session, scope=Scope(tenant_id, change.agent_id), ids=[request.merge_into])
        if not target or target[0].updated_at != prepared.merge_rows[0].updated_at:
            raise Conflict("the memory to merge into changed; review again", details={"reason": "stale_review"})
        target = target[0]
        plan = prepared.merge_plan
        target.content, target.tags, target.metadata_ = plan.content, plan.tags, plan.metadata
        target.confidence, target.embedding, target.updated_at = plan.confidence, prepared.embedding, now
        memory.status, memory.merged_into, memory.ended_at, memory.updated_at = "merged", target.id, now, now
        derivations.record(session, tenant_id=tenant_id, derived_id=target.id, source_ids=[memory.id], kind="merge",
                           via=change.id, at=now)
        session.flush()
        ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.merged", actor=actor,
                         subject={"type": "memory", "id": target.id},
                         data=mem.memory_event(ctx, target, strategy="merge_content", duplicates=[memory.id],
                                               change_id=change.id))
        # The staged row's own end, as a merge records each duplicate's (its state is bound to the log).
        ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.merged_into", actor=actor,
                         subject={"type": "memory", "id": memory.id},
                         data={"canonical": target.id, "strategy": "merge_content", "change_id": change.id,
                               "content_digest": mem.content_digest(memory),
                               "state": mem.state_record(ctx, memory)})
        events.memory_written(session, target)
        return {"memory_id": target.id, "merged_into": target.id}

    if change.operation in ("forget", "expire"):
        rows = resolve_targets(session, change, lock=True)
        kept: list[str] = []
        if request.memory_ids is not None:
            unknown = sorted(set(request.memory_ids) - {m.id for m in rows})
            if unknown:
                raise ValidationFailed.at("/memory_ids", "not among the memories this change would touch: "
                                          + ", ".join(unknown[:10]))
            kept = [m.id for m in rows if m.id not in request.memory_ids]
            rows = [m for m in rows if m.id in request.memory_ids]
        if change.operation == "forget":
            mem.apply_forget(ctx, session, tenant_id, actor, rows, hard=bool(change.request.get("hard_delete")),
                             reason=change.request.get("reason"), change_id=change.id)
        else:
            mem.apply_expire(ctx, session, tenant_id, actor, rows, change.request.get("action", "forget"),
                             change_id=change.id)
        return {"affected": [m.id for m in rows], **({"kept": kept} if kept else {})}
    if change.operation in ("workspace_write", "workspace_delete"):
        return workspace.apply_change(ctx, session, change, actor)
    if change.operation in recover.RECOVER_OPERATIONS:
        return recover.approve(ctx, session, change, actor)
    if change.operation == "merge" and change.request.get("compaction_run"):  # a staged compaction group
        return compaction.apply_staged(ctx, session, change, actor, prepared.merge_rows)
    if change.operation == "merge":
        if prepared.merge_plan is None:
            raise Conflict("memories to merge are gone; reject this change", details={"reason": "stale_review"})
        request_body = change.request
        canonical = mem.apply_merge(ctx, session, tenant_id, actor, Scope(tenant_id, change.agent_id),
                                    request_body["canonical"], request_body["duplicates"],
                                    request_body.get("strategy", "keep_canonical"), prepared.merge_plan,
                                    prepared.embedding, expected=prepared.merge_rows, change_id=change.id)
        return {"memory_id": canonical.id, "merged": request_body["duplicates"]}
    raise Forbidden(f"cannot apply {change.operation!r} changes here")


def _committed(ctx: AppContext, session, change: Change, actor: dict, request: DecisionRequest, memory: Memory,
               planned: list[dict[str, Any]], *, edited: bool) -> dict[str, Any]:
    """Audit and announce an approved remember that is now live; retire the `planned` memories it
    replaces (`app.services.memory.supersession`), unless the reviewer keeps both."""
    tenant_id = change.tenant_id
    ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.committed", actor=actor,
                     subject={"type": "memory", "id": memory.id},
                     data=mem.memory_event(ctx, memory, change_id=change.id, edited=edited))
    events.memory_written(session, memory)
    result: dict[str, Any] = {"memory_id": memory.id, **supersession.outcome(
        planned, keep_both=request.keep_both, supersedes=request.supersedes)}
    rows = supersession.lock(session, tenant_id=tenant_id, agent_id=change.agent_id, result=result)
    supersession.retire(ctx, session, tenant_id=tenant_id, change_id=change.id, actor=actor, new_id=memory.id,
                        rows=rows)
    return result
