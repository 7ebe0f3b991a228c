"""Remembering: write one memory now (`remember`), or a batch of prepared rows (imports, consolidation).

A write is checked without the database first (`prepare_remember`: allow-list, size, FSM,
redaction), screened and decided against live state (`decide`), then inserted and journalled in
one transaction (`write_decided`); a plain live write may go out with its tenant's other
concurrent writes (`app.services.memory.group_commit`, `commit_on_driver`). Embedding happens
before the transaction opens.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.core.access import Principal
from app.core.ids import new_id
from app.core.policy import Decision, Policy, WriteRequest
from app.core.screening import Protection, Screening
from app.core.timefmt import utcnow
from app.db.models import Memory
from app.db.vectors import SqlVector
from app.errors import Forbidden, ValidationFailed
from app.observability import metrics
from app.repos.memory import memories as repo
from app.services.memory import early_embedding, group_commit, refs, screening, staging
from app.services.memory.memories import (
    Outcome,
    _timestamp,
    clean_payload,
    entry_json,
    memory_event,
    require_agent,
)
from app.services.events import events
from app.services.audit.audit_commit import insert_with_commit, sends_with_commit
from app.services.runtime.context import AppContext
from app.services.tenancy.tenant_config import TenantRules, rules_for


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
        # (`diffs.replaced`), not what is staged. On a stranger's pairs it found 1 replacement in
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
