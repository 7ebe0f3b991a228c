"""Memory operations for agents: forget, delete, merge, expire; and what every memory operation
shares (the Entry shape, audit data about a memory, payload checks). Writing is
`app.services.memory.remembering`, reads `app.services.memory.reads`.

Each mutation runs in one transaction with its audit events. Embedding happens before the
transaction opens. Memory text never reaches the audit log: events carry an HMAC of it under a
per-memory key that a hard delete destroys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.core import state_digest
from app.core.access import Principal
from app.core.fsm import validate_fsm
from app.core.policy import WriteRequest
from app.core.redaction import Redactor
from app.core.timefmt import format_ts, parse_ts, utcnow
from app.db.models import Memory
from app.errors import Conflict, Forbidden, NotFound, PayloadTooLarge, SecretLeakage, ValidationFailed
from app.repos.review import changes as changes_repo
from app.repos.memory import memories as repo
from app.repos.memory.memories import Scope
from app.services.memory import derivations, recall_tracking, staging
from app.services.events import events
from app.services.audit import read_budgets
from app.services.review import learned_revocation
from app.services.runtime.context import AppContext
from app.services.tenancy.tenant_config import redaction_mode, redactor_for

MERGE_STRATEGIES = ("keep_canonical", "merge_content", "keep_highest_confidence")
DEMOTE_MULTIPLIER = 0.25


@dataclass
class Outcome:
    """What an operation did: the HTTP status and JSON body the API returns."""

    status: int
    body: dict[str, Any]
    memory_ids: list[str] = field(default_factory=list)


# --- shared helpers ------------------------------------------------------------------------------

def entry_json(memory: Memory) -> dict[str, Any]:
    """The contract's Entry shape."""
    return {
        "id": memory.id, "agent_id": memory.agent_id, "user_id": memory.user_id, "type": memory.type,
        "content": memory.content, "metadata": memory.metadata_, "tags": list(memory.tags),
        "confidence": round(float(memory.confidence), 6), "source": memory.source,
        "created_at": format_ts(memory.created_at), "updated_at": format_ts(memory.updated_at),
        "expires_at": format_ts(memory.expires_at), "status": "live",
    }


def content_digest(memory: Memory) -> str | None:
    """HMAC-SHA256 of the content under the memory's own key (what the audit log records)."""
    return state_digest.content_hmac(memory.digest_key, memory.content)


def memory_event(ctx: AppContext, memory: Memory, after: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """Audit data about a memory: identifiers and digests, never its text, tags or metadata.

    `state` holds the digest of the state this entry leaves the row in (`app.core.state_digest`) and
    its status: the row as it is, or with `after` (the columns an UPDATE issued next sets). Every
    entry whose subject is a memory carries one: the state check holds each row to its latest."""
    data = {"agent_id": memory.agent_id, "user_id": memory.user_id, "memory_type": memory.type,
            "content_digest": content_digest(memory),
            "content_bytes": len(memory.content.encode()) if memory.content is not None else None,
            "tag_count": len(memory.tags), "metadata_keys": len(memory.metadata_ or {}),
            "state": state_record(ctx, memory, after)}
    data.update(extra)
    return data


def state_record(ctx: AppContext, memory: Memory, after: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `state` of an audit entry about `memory` (with `after` applied): digest and status."""
    return ctx.state_keys.record(memory.tenant_id, memory, **(after or {}))


def ended_columns(status: str, at: datetime, **extra: Any) -> dict[str, Any]:
    """The columns `repo.end` sets (the `after` of the entry recording that end)."""
    return {"status": status, "ended_at": at, "updated_at": at, **extra}


def require_agent(principal: Principal, agent_id: str) -> None:
    if not principal.may_act_for(agent_id):
        raise Forbidden("this key may not act for that agent",
                        details=[{"path": "/agent_id", "message": "agent not in the key's allow-list"}])


def _timestamp(value: Any, path: str) -> datetime:
    try:
        return parse_ts(value)
    except (ValueError, TypeError) as exc:
        raise ValidationFailed.at(path, f"not an RFC 3339 timestamp or epoch milliseconds: {exc}") from None


def _as_of(body: dict[str, Any]) -> datetime | None:
    return _timestamp(body["as_of"], "/as_of") if body.get("as_of") is not None else None


@dataclass(frozen=True)
class CleanWrite:
    """A write's payload after validation and redaction (SR-1)."""

    content: str
    tags: list[str]
    metadata: dict[str, Any]
    redactions: list[dict[str, str]]


def clean_payload(ctx: AppContext, session, tenant_id: str, *, content: str, tags: list[str],
                  metadata: dict[str, Any], memory_type: str, redactor: Redactor | None = None,
                  mode: str | None = None) -> CleanWrite:
    """Size limit, procedural FSM check, then redaction per the tenant's mode (a batch passes the
    tenant's `redactor` and `mode`, read once, instead of once per row)."""
    size = len(content.encode("utf-8"))
    if size > ctx.settings.max_entry_size_bytes:
        raise PayloadTooLarge(f"content is {size} bytes; the limit is {ctx.settings.max_entry_size_bytes}",
                              details=[{"path": "/content", "message": "over maxEntrySizeBytes"}])
    if memory_type == "procedural":
        problems = validate_fsm(content)
        if problems:
            raise ValidationFailed("procedural content is not a valid FSM",
                                   details=[{"path": "/content" + (p.path if p.path != "/" else ""),
                                             "message": p.message} for p in problems])
    result = (redactor or redactor_for(ctx, session, tenant_id)).redact_payload(content, tags, metadata)
    findings = [{"field": f.field, "label": f.label} for f in result.findings]
    if findings and (mode or redaction_mode(session, tenant_id)) == "reject":
        raise SecretLeakage("the write contains secret-shaped values; this tenant rejects them",
                            details=findings)
    return CleanWrite(result.content, list(dict.fromkeys(result.tags)), result.metadata, findings)


def _embed(ctx: AppContext, text: str) -> list[float]:
    return ctx.embedder.embed([text])[0].tolist()


# --- forget / delete -----------------------------------------------------------------------------

def forget(ctx: AppContext, principal: Principal, body: dict[str, Any]) -> Outcome:
    """Soft (default) or hard delete by ids and/or a metadata filter; never without a scope."""
    agent_id = body["agent_id"]
    require_agent(principal, agent_id)
    ids, metadata = body.get("ids") or None, body.get("filter") or None
    if not ids and not metadata:
        raise ValidationFailed("forget needs `ids` or a non-empty `filter`; refusing to forget everything",
                               details=[{"path": "/ids", "message": "no scope given"},
                                        {"path": "/filter", "message": "no scope given"}])
    hard = bool(body.get("hard_delete"))
    scope = Scope(principal.tenant_id, agent_id, body.get("user_id"))
    with ctx.db.sessions.begin() as session:
        rows = repo.matching(session, scope=scope, ids=ids, metadata=metadata, lock=True)
        matched = [m.id for m in rows]
        decision = staging.review_requirement(session, principal.tenant_id, WriteRequest(
            operation="forget", agent_id=agent_id, hard_delete=hard, rows_affected=len(rows),
            approval_required=bool(body.get("approval_required"))))
        if decision.action == "require_approval":
            change = staging.stage_change(
                ctx, session, principal=principal, operation="forget", agent_id=agent_id,
                user_id=body.get("user_id"), request=_stored_request(body), memory_ids=matched,
                decision=decision, redactions=[])
            return Outcome(202, {"status": "pending", "change_id": change.id, "matched": len(matched),
                                 "review_url": staging.review_url(ctx.settings, change.id)}, matched)
        apply_forget(ctx, session, principal.tenant_id, principal.actor, rows, hard=hard, reason=body.get("reason"))
    return Outcome(200, {"status": "done", "forgotten": matched, "hard_delete": hard}, matched)


def apply_forget(ctx: AppContext, session, tenant_id: str, actor: dict, rows: list[Memory], *, hard: bool,
                 reason: str | None, change_id: str | None = None, cause: str | None = None) -> None:
    """Forget locked live rows, one audit event each (used directly and when a change is approved).
    A learned rule that approved one of them revokes itself (`cause`: why they end, by default
    `hard_deleted` or `forgotten`)."""
    learned_revocation.revoke_for(ctx, session, tenant_id=tenant_id, memory_ids=[m.id for m in rows],
                                  cause=cause or ("hard_deleted" if hard else "forgotten"), actor=actor)
    now = utcnow()
    for memory in rows:
        # The columns repo.hard_delete (or repo.end) sets: the state this entry leaves.
        after = ({"content": None, "metadata_": {}, "tags": [], "digest_key": None, "hard_deleted": True,
                  "status": "forgotten", "ended_at": memory.ended_at or now, "updated_at": now}
                 if hard else ended_columns("forgotten", now))
        ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.hard_deleted" if hard else "memory.forgotten",
                         actor=actor, subject={"type": "memory", "id": memory.id},
                         data=memory_event(ctx, memory, after, reason_given=bool(reason), change_id=change_id))
    ids = [m.id for m in rows]
    if hard:
        repo.hard_delete(session, tenant_id=tenant_id, ids=ids, at=now)
        changes_repo.erase_decided_views(session, tenant_id=tenant_id, memory_ids=ids)
    else:
        repo.end(session, tenant_id=tenant_id, ids=ids, status="forgotten", at=now)


def delete_memory(ctx: AppContext, principal: Principal, memory_id: str) -> Outcome:
    """`DELETE /v1/memories/{id}`: a soft forget of one visible memory (policy may stage it)."""
    with ctx.db.sessions() as session:
        memory = repo.get_visible(session, scope=Scope(principal.tenant_id), memory_id=memory_id)
        if memory is None or not principal.may_act_for(memory.agent_id):
            raise NotFound("memory not found")
        agent_id = memory.agent_id
    outcome = forget(ctx, principal, {"agent_id": agent_id, "ids": [memory_id]})
    if outcome.status == 200:
        if memory_id not in outcome.body["forgotten"]:
            raise NotFound("memory not found")
        return Outcome(200, {"deleted": True, "id": memory_id}, [memory_id])
    return outcome


def _stored_request(body: dict[str, Any]) -> dict[str, Any]:
    """What a staged change keeps of a request (no content fields exist on these operations)."""
    return {k: v for k, v in body.items() if k not in ("approval_required",)}


# --- merge ---------------------------------------------------------------------------------------

def merge(ctx: AppContext, principal: Principal, body: dict[str, Any], *, shows_content: bool = True) -> Outcome:
    """Collapse duplicates into the canonical memory; duplicates are soft-deleted and linked.

    A merge done now answers the merged memory, whose content is made of every memory merged: with
    `shows_content` (the caller answers it) that is a read, taken from the budget before anything
    is merged, so a spent budget refuses the merge (429) rather than answering it. memorywire's
    answer names no content and passes False."""
    agent_id = body["agent_id"]
    require_agent(principal, agent_id)
    canonical_id, duplicates = body["canonical"], list(dict.fromkeys(body["duplicates"]))
    if canonical_id in duplicates:
        raise ValidationFailed.at("/duplicates", "the canonical memory cannot also be a duplicate")
    strategy = body.get("strategy", "keep_canonical")
    scope = Scope(principal.tenant_id, agent_id)
    with ctx.db.sessions.begin() as session:
        rows = repo.lock_live(session, scope=scope, ids=[canonical_id, *duplicates])
        _require_all(rows, [canonical_id, *duplicates])
        decision = staging.review_requirement(session, principal.tenant_id, WriteRequest(
            operation="merge", agent_id=agent_id, rows_affected=len(rows),
            approval_required=bool(body.get("approval_required"))))
        if decision.action == "require_approval":
            change = staging.stage_change(
                ctx, session, principal=principal, operation="merge", agent_id=agent_id, user_id=None,
                request=_stored_request(body), memory_ids=[canonical_id, *duplicates], decision=decision,
                redactions=[])
            return Outcome(202, {"status": "pending", "change_id": change.id, "matched": len(rows),
                                 "review_url": staging.review_url(ctx.settings, change.id)}, [canonical_id, *duplicates])
    if shows_content:
        read_budgets.account(ctx, principal, operation="merge", agent_id=agent_id,
                             memory_ids=[canonical_id, *duplicates], query={"canonical": canonical_id})
    merged = plan_merge(rows, canonical_id, strategy)
    embedding = _embed(ctx, merged.content) if merged.reembed else None
    with ctx.db.sessions.begin() as session:
        canonical = apply_merge(ctx, session, principal.tenant_id, principal.actor, scope, canonical_id, duplicates,
                                strategy, merged, embedding, expected=rows)
        return Outcome(200, {"status": "done", "memory": entry_json(canonical), "merged": duplicates,
                             "strategy": strategy}, [canonical_id, *duplicates])


def _require_all(rows: list[Memory], wanted: list[str]) -> None:
    found = {m.id for m in rows}
    missing = [i for i in wanted if i not in found]
    if missing:
        raise NotFound("memory not found", details=[{"path": "/", "message": f"not found: {', '.join(missing)}"}])


@dataclass(frozen=True)
class MergePlan:
    content: str
    metadata: dict[str, Any]
    tags: list[str]
    confidence: float
    embedding_from: str | None
    """Id of the row whose embedding the result keeps, or None when the content is new."""

    @property
    def reembed(self) -> bool:
        return self.embedding_from is None


def plan_merge(rows: list[Memory], canonical_id: str, strategy: str) -> MergePlan:
    """The canonical memory after merging, per strategy (pure; also used by the review diff)."""
    by_id = {m.id: m for m in rows}
    canonical = by_id[canonical_id]
    ordered = sorted(rows, key=lambda m: (m.created_at, m.id))
    tags = list(dict.fromkeys(t for m in [canonical, *ordered] for t in m.tags))
    if strategy == "keep_canonical":
        return MergePlan(canonical.content, canonical.metadata_, list(canonical.tags), canonical.confidence, canonical.id)
    if strategy == "keep_highest_confidence":
        best = max(ordered, key=lambda m: (m.confidence, -m.created_at.timestamp()))
        return MergePlan(best.content, {**canonical.metadata_, **best.metadata_}, tags,
                         max(m.confidence for m in rows), best.id)
    metadata: dict[str, Any] = {}
    for m in ordered:  # last write wins, oldest first
        metadata.update(m.metadata_ or {})
    lines = list(dict.fromkeys(m.content for m in [canonical, *[o for o in ordered if o.id != canonical_id]]))
    return MergePlan("\n".join(lines), metadata, tags, max(m.confidence for m in rows), None)


def apply_merge(ctx: AppContext, session, tenant_id: str, actor: dict, scope: Scope, canonical_id: str,
                duplicates: list[str], strategy: str, plan: MergePlan, embedding: list[float] | None,
                expected: list[Memory] | None = None, change_id: str | None = None,
                via: str | None = None) -> Memory:
    """Apply a merge plan to locked rows; refuse if they changed since the plan was made. The
    canonical memory is recorded as derived from each duplicate (`via`: the run that merged them,
    else the change)."""
    rows = repo.lock_live(session, scope=scope, ids=[canonical_id, *duplicates])
    _require_all(rows, [canonical_id, *duplicates])
    if expected is not None:
        before = {m.id: m.updated_at for m in expected}
        if any(before.get(m.id) != m.updated_at for m in rows):
            raise Conflict("memories changed while merging; retry", details={"reason": "concurrent_update"})
    by_id = {m.id: m for m in rows}
    canonical = by_id[canonical_id]
    now = utcnow()
    if plan.embedding_from is not None and plan.embedding_from != canonical_id:
        canonical.embedding = repo.embedding_of(session, tenant_id=tenant_id, memory_id=plan.embedding_from)
    elif embedding is not None:
        canonical.embedding = embedding
    canonical.content, canonical.metadata_, canonical.tags = plan.content, plan.metadata, plan.tags
    canonical.confidence, canonical.updated_at = plan.confidence, now
    repo.end(session, tenant_id=tenant_id, ids=duplicates, status="merged", at=now, merged_into=canonical_id)
    derivations.record(session, tenant_id=tenant_id, derived_id=canonical_id, source_ids=duplicates,
                       kind=derivations.kind_of_merge(strategy), via=via or change_id, at=now)
    session.flush()
    ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.merged", actor=actor,
                     subject={"type": "memory", "id": canonical_id},
                     data=memory_event(ctx, canonical, strategy=strategy, duplicates=duplicates, change_id=change_id))
    events.memory_written(session, canonical)
    for dup in duplicates:
        ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.merged_into", actor=actor,
                         subject={"type": "memory", "id": dup},
                         data={"canonical": canonical_id, "strategy": strategy, "change_id": change_id,
                               "content_digest": content_digest(by_id[dup]),
                               "state": state_record(ctx, by_id[dup],
                                                     ended_columns("merged", now, merged_into=canonical_id))})
    return canonical


# --- expire --------------------------------------------------------------------------------------

EXPIRE_PREDICATES = ("older_than_days", "type", "confidence_below", "no_recall_in_days")


def expire(ctx: AppContext, principal: Principal, body: dict[str, Any]) -> Outcome:
    """Apply a TTL policy (predicates ANDed) with action forget, archive or demote."""
    agent_id = body["agent_id"]
    require_agent(principal, agent_id)
    policy = body.get("policy") or {}
    if not any(policy.get(k) is not None for k in EXPIRE_PREDICATES):
        raise ValidationFailed("expire needs at least one policy predicate; refusing to expire everything",
                               details=[{"path": "/policy", "message": "at least one of "
                                         + ", ".join(EXPIRE_PREDICATES) + " is required"}])
    action = body.get("action", "forget")
    scope = Scope(principal.tenant_id, agent_id, body.get("user_id"))
    if policy.get("no_recall_in_days") is not None:
        recall_tracking.flush(ctx.db.engine)  # this process's batched recall counts, written first
    with ctx.db.sessions.begin() as session:
        rows = _expire_rows(session, scope, policy, lock=True)
        decision = staging.review_requirement(session, principal.tenant_id, WriteRequest(
            operation="expire", agent_id=agent_id, rows_affected=len(rows),
            approval_required=bool(body.get("approval_required"))))
        ids = [m.id for m in rows]
        if decision.action == "require_approval":
            change = staging.stage_change(
                ctx, session, principal=principal, operation="expire", agent_id=agent_id,
                user_id=body.get("user_id"), request=_stored_request(body), memory_ids=ids, decision=decision,
                redactions=[])
            return Outcome(202, {"status": "pending", "change_id": change.id, "matched": len(ids),
                                 "review_url": staging.review_url(ctx.settings, change.id)}, ids)
        apply_expire(ctx, session, principal.tenant_id, principal.actor, rows, action)
    return Outcome(200, {"status": "done", "affected": ids, "action": action}, ids)


def _expire_rows(session, scope: Scope, policy: dict[str, Any], lock: bool,
                 ids: list[str] | None = None) -> list[Memory]:
    """`ids`: only these (an expire consolidation chose; the predicates still apply to each)."""
    return repo.expire_candidates(session, scope=scope, older_than_days=policy.get("older_than_days"),
                                  type_=policy.get("type"), confidence_below=policy.get("confidence_below"),
                                  no_recall_in_days=policy.get("no_recall_in_days"), lock=lock, ids=ids)


def apply_expire(ctx: AppContext, session, tenant_id: str, actor: dict, rows: list[Memory], action: str,
                 change_id: str | None = None) -> None:
    now = utcnow()
    ids = [m.id for m in rows]
    for memory in rows:
        after = ({"score_multiplier": DEMOTE_MULTIPLIER, "updated_at": now} if action == "demote"
                 else ended_columns("forgotten" if action == "forget" else "archived", now))
        ctx.audit.append(session, tenant_id=tenant_id, event_type=f"memory.expired.{action}", actor=actor,
                         subject={"type": "memory", "id": memory.id},
                         data=memory_event(ctx, memory, after, action=action, change_id=change_id))
    if action == "forget":
        repo.end(session, tenant_id=tenant_id, ids=ids, status="forgotten", at=now)
    elif action == "archive":
        repo.end(session, tenant_id=tenant_id, ids=ids, status="archived", at=now)
    else:
        for memory in rows:
            memory.score_multiplier = DEMOTE_MULTIPLIER
            memory.updated_at = now
