"""Memory operations for agents: remember, get, list, delete, forget, merge, expire, history.

Each mutation runs in one transaction with its audit events. Embedding happens before the
transaction opens. Memory text never reaches the audit log: events carry an HMAC of it under a
per-memory key that a hard delete destroys.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.core import state_digest
from app.core.access import Principal
from app.core.cursor import encode_cursor
from app.core.fsm import validate_fsm
from app.core.ids import new_id
from app.core.policy import Decision, Policy, WriteRequest
from app.core.redaction import Redactor
from app.core.screening import Protection, Screening
from app.core.timefmt import format_ts, parse_ts, utcnow
from app.db.models import Memory
from app.errors import Conflict, Forbidden, NotFound, PayloadTooLarge, SecretLeakage, ValidationFailed
from app.observability import metrics
from app.repos.audit import audit_reads
from app.repos.review import changes as changes_repo
from app.repos.memory import memories as repo
from app.repos.memory.memories import Scope
from app.repos.memory.search import SqlVector
from app.services.memory import (
    derivations,
    early_embedding,
    group_commit,
    recall_tracking,
    refs,
    screening,
    staging,
)
from app.services.events import events
from app.services.audit import state_check, read_budgets
from app.services.review import learned_revocation
from app.services.audit.audit import chain_for, insert_with_commit, sends_with_commit
from app.services.runtime.context import AppContext
from app.services.runtime.cursors import decode_cursor
from app.services.tenancy.tenant_config import TenantRules, redaction_mode, redactor_for, rules_for

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


# --- remember ------------------------------------------------------------------------------------

@metrics.counts_remember
def remember(ctx: AppContext, principal: Principal, body: dict[str, Any], *,
             early: early_embedding.Early | None = None) -> Outcome:
    """Store a memory now (201) or stage it for review (202): one row through `prepare_remember`
    and `write_prepared`, the path imports take for many. `early`: its content's embedding,
    started before the key was checked (`app.services.memory.early_embedding`), used if it is of the very
    text stored."""
    rules = rules_for(ctx, principal)  # cached per tenant config version: no settings rows read
    now = utcnow()
    write = prepare_remember(ctx, principal, body, rules, memory_id=new_id("mem"), created_at=now, updated_at=now,
                             precheck=False,  # the policy is evaluated once, with the screening flags
                             future_expiry=True)
    embedding = SqlVector(early_embedding.embed(ctx, write.memory.content, early))  # bound twice: screening, insert
    if isinstance(ctx.db.sessions.kw.get("bind"), Connection):  # a unit of work (idempotent request), tests' transaction
        with ctx.db.sessions.begin() as session:
            return write_prepared(ctx, session, principal, [write], [embedding], at_commit=True)[0]
    # Screened and decided on a read in autocommit (READ COMMITTED: what a statement inside the
    # write's transaction would see too), then inserted and committed with the tenant's other
    # concurrent writes (`group_commit`); a staged or learned write commits alone.
    with ctx.db.reader() as conn, Session(bind=conn, expire_on_commit=False) as session:
        decided = decide(ctx, session, principal, write, embedding)
    if decided.write.memory.status != "live" or (decided.decision is not None and decided.decision.learned):
        with ctx.db.sessions.begin() as session:
            return write_decided(ctx, session, [decided], at_commit=True)[0]
    return group_commit.committer(ctx).commit(ctx, decided, write_decided, direct=commit_on_driver)


# --- reads ---------------------------------------------------------------------------------------

def get_memory(ctx: AppContext, principal: Principal, memory_id: str, as_of: Any = None) -> dict[str, Any]:
    """A visible memory in the key's tenant, for an agent the key may read; 404 otherwise."""
    as_of_dt = _timestamp(as_of, "/as_of") if as_of is not None else None
    with ctx.db.stale_session(principal.tenant_id, principal.key_id) as session:
        memory = repo.get_visible(session, scope=Scope(principal.tenant_id, as_of=as_of_dt), memory_id=memory_id)
        if memory is None or not principal.may_act_for(memory.agent_id):
            raise NotFound("memory not found")
        mismatched = state_check.served_mismatches(ctx, session, principal.tenant_id, [memory.id])
        entry = entry_json(memory)
    state_check.refuse_mismatched(ctx, principal.tenant_id, mismatched)
    read_budgets.account(ctx, principal, operation="get", agent_id=entry["agent_id"], memory_ids=[memory_id],
                         query={"id": memory_id, "as_of": as_of})
    return entry


def list_memories(ctx: AppContext, principal: Principal, query: dict[str, Any]) -> dict[str, Any]:
    """Newest first with an opaque keyset cursor."""
    require_agent(principal, query["agent_id"])
    scope = Scope(principal.tenant_id, query["agent_id"], query.get("user_id"), _as_of(query))
    limit = query.get("limit", 100)
    after = decode_cursor(query["cursor"]) if query.get("cursor") else None
    with ctx.db.stale_session(principal.tenant_id, principal.key_id) as session:
        rows = repo.page(session, scope=scope, limit=limit + 1, after=after, type_=query.get("type"),
                         tag=query.get("tag"))
        more = len(rows) > limit
        rows = rows[:limit]
        mismatched = state_check.served_mismatches(ctx, session, principal.tenant_id, [m.id for m in rows])
    state_check.refuse_mismatched(ctx, principal.tenant_id, mismatched)
    cursor = encode_cursor(rows[-1].created_at, rows[-1].id) if more else None
    read_budgets.account(ctx, principal, operation="list", agent_id=query["agent_id"],
                         memory_ids=[m.id for m in rows], query=query)
    return {"items": [entry_json(m) for m in rows], "next_cursor": cursor}


def history(ctx: AppContext, principal: Principal, memory_id: str) -> dict[str, Any]:
    """The memory's audit trail, oldest first (never content: only digests and identifiers)."""
    with ctx.db.sessions() as session:
        memory = repo.get_in_tenant(session, tenant_id=principal.tenant_id, memory_id=memory_id)
        if (memory is None or memory.status in ("pending", "rejected", "withdrawn")
                or not principal.may_act_for(memory.agent_id)):
            raise NotFound("memory not found")
        rows = audit_reads.about_subject(session, chain_id=chain_for(principal.tenant_id), subject_id=memory_id)
        agent_id = memory.agent_id
    read_budgets.account(ctx, principal, operation="history", agent_id=agent_id, memory_ids=[memory_id],
                         query={"id": memory_id})
    events = []
    for row in rows:
        entry = json.loads(row.entry)
        events.append({"seq": row.seq, "type": entry["type"], "ts": entry["ts"], "actor": entry["actor"],
                       "data": entry["data"]})
    return {"memory_id": memory_id, "events": events}


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


# --- batch remember (imports) --------------------------------------------------------------------

ENDED_STATUSES = ("forgotten", "archived", "merged", "superseded")


@dataclass
class PreparedWrite:
    """A memory row that passed the checks of `remember` that need no embedding, waiting to be written."""

    memory: Memory
    redactions: list[dict[str, str]]
    review: bool
    """Stage it whatever the policy says (the request asked, or it was pending where it came from)."""
    policy: Policy
    """The tenant's review policy, read once for a whole batch (`tenant_config.TenantRules`)."""
    protection: Protection = Protection()
    """The tenant's extra protected keys and paths screening applies (`TenantRules`)."""

    @property
    def historical(self) -> bool:
        """An ended row (forgotten, archived…): kept for `as_of` reads, never visible, no policy applies."""
        return self.memory.status in ENDED_STATUSES


def prepare_remember(ctx: AppContext, principal: Principal, body: dict[str, Any], rules: TenantRules, *,
                     memory_id: str, created_at: datetime, updated_at: datetime, status: str = "live",
                     ended_at: datetime | None = None, merged_into: str | None = None,
                     superseded_by: str | None = None, precheck: bool = True,
                     future_expiry: bool = False) -> PreparedWrite:
    """The checks of `remember` that need no embedding nor database: agent allow-list, size, FSM,
    redaction (SR-1, `SecretLeakage` in reject mode) and, with `precheck`, the tenant policy without
    screening flags (a deny raises `Forbidden`, so an import checks a whole file first).

    `body` is a validated `remember.request`. An `expires_at` in the past is kept (the row is simply
    expired): a restored export keeps what it held; `remember` refuses one (`future_expiry`).
    `status` is where the row came from: `pending` is always staged; ended statuses are history
    (see `PreparedWrite`).
    """
    agent_id = body["agent_id"]
    require_agent(principal, agent_id)
    if not principal.may_claim(body.get("source")):
        # Refused, not downgraded: a stored origin the writer did not send would mislead whoever
        # reads it, and the writer learns at once that its key is limited.
        raise Forbidden(f"this API key may not claim source {body['source'][:64]!r}; it may claim "
                        f"{', '.join(principal.origins)} (or send no source: the write is then untrusted)",
                        details=[{"path": "/source", "message": "origin not allowed for this API key"}])
    expires_at = _timestamp(body["expires_at"], "/expires_at") if body.get("expires_at") is not None else None
    if future_expiry and expires_at is not None and expires_at <= utcnow():
        raise ValidationFailed.at("/expires_at", "expires_at must be in the future")
    clean = clean_payload(ctx, None, principal.tenant_id, content=body["content"], tags=body.get("tags", []),
                          metadata=body.get("metadata", {}), memory_type=body["type"], redactor=rules.redactor,
                          mode=rules.mode)
    memory = Memory(
        id=memory_id, tenant_id=principal.tenant_id, agent_id=agent_id, user_id=body.get("user_id"),
        type=body["type"], content=clean.content, metadata_=clean.metadata, tags=clean.tags,
        confidence=body.get("confidence", 1.0), source=body.get("source"), status=status,
        created_at=created_at, updated_at=updated_at, live_from=created_at,
        ended_at=(ended_at or updated_at) if status in ENDED_STATUSES else None, expires_at=expires_at,
        run_id=body.get("run_id"), node_id=body.get("node_id"), digest_key=os.urandom(32),
        merged_into=merged_into, superseded_by=superseded_by, written_by=principal.key_id,
        score_multiplier=1.0, hard_deleted=False,  # set here, so the state digest reads no server default
    )
    prepared = PreparedWrite(memory, clean.redactions, bool(body.get("approval_required")) or status == "pending",
                             rules.policy, rules.protection)
    if precheck and not prepared.historical:
        _decision(principal, prepared, Screening())
    return prepared


def _decision(principal: Principal, write: PreparedWrite, flags: Screening) -> Decision:
    memory = write.memory
    return staging.review_requirement(None, principal.tenant_id, WriteRequest(
        operation="remember", agent_id=memory.agent_id, type=memory.type, source=memory.source,
        tags=tuple(memory.tags), content=memory.content, confidence=memory.confidence,
        approval_required=write.review, risk_flags=flags.names, risk_level=flags.risk), policy=write.policy)


def write_prepared(ctx: AppContext, session, principal: Principal, writes: list[PreparedWrite],
                   embeddings: list[list[float]], *, at_commit: bool = False, **audit_extra: Any) -> list[Outcome]:
    """Screen, decide and insert prepared rows in the caller's transaction (`remember` writes one,
    an import a batch): a staged row gets its change and `memory.staged` (202), a live row
    `memory.remembered` and a `memory.written` event (201), an ended row `memory.restored` (200).
    `audit_extra` joins each event's data. With `at_commit` (the caller reads none of the rows back
    in its transaction), live rows go out with the COMMIT (`_insert`).

    Screening runs against live state before the batch is inserted, so rows of one batch are not
    compared with each other. A policy deny raised by screening flags raises `Forbidden` (the caller's
    transaction, and so the whole batch, rolls back); `exc.memory_id` names the row.
    """
    decided = [decide(ctx, session, principal, write, embedding)
               for write, embedding in zip(writes, embeddings, strict=True)]
    return write_decided(ctx, session, decided, at_commit=at_commit, **audit_extra)


@dataclass
class DecidedWrite:
    """A prepared write screened and decided (`decide`), waiting to be inserted (`write_decided`)."""

    principal: Principal
    write: PreparedWrite
    decision: Decision | None
    flags: Screening


def decide(ctx: AppContext, session, principal: Principal, write: PreparedWrite, embedding) -> DecidedWrite:
    """Screen one prepared write against live state (read through `session`) and apply the tenant's
    policy: the row's status becomes `live` or `pending` (a change id is given when it is staged or
    decided by a learned rule). Writes nothing. A policy deny raises `Forbidden` naming the row."""
    memory = write.memory
    memory.embedding = embedding
    decision, flags = None, Screening()
    if not write.historical:
        flags = screening.screen_write(
            session, tenant_id=principal.tenant_id, agent_id=memory.agent_id, user_id=memory.user_id,
            memory_type=memory.type, content=memory.content, tags=memory.tags, metadata=memory.metadata_,
            source=memory.source, embedding=embedding, allowed_sources=principal.sources,
            protection=write.protection, embedder=ctx.embedder.name)
        # No `encoder`: the change-of-state reader by meaning decides what an approval retires
        # (`review._replaced`), not what is staged. On a stranger's pairs it found 1 replacement in
        # 10 and raised ordinary notes ("closed on holidays" beside opening hours) as contradictions,
        # which would send them to review and keep learned rules from approving them.
        try:
            decision = _decision(principal, write, flags)
        except Forbidden as exc:
            exc.memory_id = memory.id
            raise
        if decision.action == "require_approval":
            # The change's id, known before the row is inserted, saves updating the row later.
            memory.status, memory.live_from, memory.change_id = "pending", None, new_id("chg")
        else:
            memory.status = "live"
            if decision.learned:  # journaled as the learned rule's decision (`_audit_written`)
                memory.change_id = new_id("chg")
    return DecidedWrite(principal, write, decision, flags)


def write_decided(ctx: AppContext, session, decided: list[DecidedWrite], *, at_commit: bool = False,
                  **audit_extra: Any) -> list[Outcome]:
    """Insert decided writes (each maybe of another key of the same tenant) and journal each in
    the caller's transaction: the second half of `write_prepared`."""
    _insert(session, [d.write.memory for d in decided], at_commit=at_commit)
    return [_audit_written(ctx, session, d.principal, d.write, d.decision, d.flags, audit_extra) for d in decided]


def _insert(session, rows: list[Memory], *, at_commit: bool) -> None:
    """Insert new rows: with `at_commit`, the live ones in one pipeline with the transaction's COMMIT
    (a round trip and the ORM's unit of work saved: nothing later in a remember's transaction reads
    them back); the rest, and all when the session's commit is not the database's, at once."""
    deferred = [m for m in rows if m.status == "live"] if at_commit and sends_with_commit(session) else []
    if deferred:
        insert_with_commit(session, *repo.insert_rows(deferred))
    if len(deferred) < len(rows):
        repo.insert_all(session, [m for m in rows if m not in deferred])


def remembered_data(ctx: AppContext, write: PreparedWrite, flags: Screening, learned: dict[str, Any],
                    audit_extra: dict[str, Any]) -> dict[str, Any]:
    """The data of a live write's `memory.remembered` entry (both commit paths build it here)."""
    labels = sorted({r["label"] for r in write.redactions})
    return memory_event(ctx, write.memory, redaction_labels=labels, risk_flags=flags.names, risk_level=flags.risk,
                        **learned, **audit_extra)


def remembered_outcome(write: PreparedWrite) -> Outcome:
    """A live write's 201."""
    memory = write.memory
    return Outcome(201, {"id": memory.id, "status": "live", "memory": entry_json(memory),
                         "redactions": write.redactions}, [memory.id])


def commit_on_driver(ctx: AppContext, decided: list[DecidedWrite]) -> list[Outcome] | None:
    """Insert, journal and commit live writes of one tenant decided by the plain policy (what
    `group_commit` groups) on a psycopg connection of their own, without a `Session`: the rows,
    each write's `memory.remembered` entry and `memory.written` event, built by the same code as
    `write_decided`'s, go out in one pipeline with the COMMIT (`AuditLog.commit_on_driver`).

    None, with nothing written, where that transaction would do more than this path does: a
    scope whose memory ref this process does not know yet (minting it is an INSERT under the
    lock), a tenant with webhooks, a checkpoint due. The caller then commits through a `Session`
    (`write_decided`)."""
    tenant_id = decided[0].principal.tenant_id
    records, payloads = [], []
    for d in decided:
        memory = d.write.memory
        ref = refs.known_ref(tenant_id, memory.agent_id, memory.user_id)
        if ref is None:
            return None
        records.append((tenant_id, "memory.remembered", d.principal.actor, {"type": "memory", "id": memory.id},
                        remembered_data(ctx, d.write, d.flags, {}, {})))
        payloads.append(("memory.written", events.written_payload(memory, ref)))
    committed = ctx.audit.commit_on_driver(
        ctx.db.engine, tenant_id, records, [repo.insert_rows([d.write.memory for d in decided])],
        lambda event_id: [events.insert_rows(tenant_id, event_id, payloads)])
    return [remembered_outcome(d.write) for d in decided] if committed else None


def _audit_written(ctx: AppContext, session, principal: Principal, write: PreparedWrite, decision: Decision | None,
                   flags: Screening, audit_extra: dict[str, Any]) -> Outcome:
    memory, subject = write.memory, {"type": "memory", "id": write.memory.id}
    labels = sorted({r["label"] for r in write.redactions})
    if memory.status == "pending":
        change = staging.stage_change(
            ctx, session, principal=principal, operation="remember", agent_id=memory.agent_id,
            user_id=memory.user_id, request={"memory_id": memory.id, "run_id": memory.run_id,
                                             "node_id": memory.node_id},
            memory_ids=[memory.id], decision=decision, redactions=write.redactions, screening=flags,
            change_id=memory.change_id)
        ctx.audit.append(session, tenant_id=principal.tenant_id, event_type="memory.staged", actor=principal.actor,
                         subject=subject, data=memory_event(ctx, memory, change_id=change.id, **audit_extra))
        return Outcome(202, {"id": memory.id, "status": "pending", "change_id": change.id,
                             "review_url": staging.review_url(ctx.settings, change.id), "redactions": write.redactions},
                       [memory.id])
    if memory.status == "live":
        learned = {}
        if decision is not None and decision.learned:
            staging.record_learned_approval(
                ctx, session, tenant_id=principal.tenant_id, submitted_by=principal.key_id, actor=principal.actor,
                operation="remember", agent_id=memory.agent_id, user_id=memory.user_id, memory_ids=[memory.id],
                decision=decision, screening=flags, change_id=memory.change_id)
            learned = {"learned_rule": decision.rule_id, "change_id": memory.change_id}
        ctx.audit.append(session, tenant_id=principal.tenant_id, event_type="memory.remembered",
                         actor=principal.actor, subject=subject,
                         data=remembered_data(ctx, write, flags, learned, audit_extra))
        events.memory_written(session, memory)
        return remembered_outcome(write)
    ctx.audit.append(session, tenant_id=principal.tenant_id, event_type="memory.restored", actor=principal.actor,
                     subject=subject, data=memory_event(ctx, memory, None, status=memory.status, redaction_labels=labels,
                                                        **audit_extra))
    return Outcome(200, {"id": memory.id, "status": memory.status}, [memory.id])
