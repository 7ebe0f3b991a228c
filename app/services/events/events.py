"""The per-tenant event log behind `GET /v1/events` and webhooks (contract §7, OpenWOP RFC 0057).

`emit` appends inside the caller's transaction, so an event exists iff that transaction commits,
and sends `NOTIFY memwarden_events, '<tenant_id>:<id>'` in the same transaction (PostgreSQL
delivers it on commit only) to wake the event streams of every process. The table is the source
of truth; a notification is only a wake-up, so replay and live delivery read the same rows.

Ids are assigned per tenant as max + 1 under the tenant's advisory lock, held until commit: for
one tenant, id order is commit order, and a reader resuming after id N never skips an event.

Payload rules, for every emitter (`memory.compacted`, `agent.memory.consolidated` and `workspace.updated` come from other
services through `emit`): a JSON object of identifiers and small facts with camelCase keys —
never memory content, metadata values or secrets. Anything about an agent carries `agentId`, so
streams and webhooks can drop events about agents the reader's key may not act for.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.core.timefmt import utcnow
from app.db.models import Change, Memory
from app.db.transaction_work import ChainWork
from app.repos.events import events as events_repo
from app.services.memory import refs
from app.services.events import webhooks
from app.services.audit.audit import chain_for, chain_work
from app.services.audit.audit_commit import insert_with_commit, lock_chain, sends_with_commit

CHANNEL = "memwarden_events"
EVENT_TYPES = frozenset({
    "memory.written", "memory.compacted", "agent.memory.consolidated", "workspace.updated",
    "change.proposed", "change.approved", "change.rejected", "change.withdrawn", "change.approval_recorded",
    "audit.chain_broken", "review.sla_breached", "canary.missed",
    "read_budget.exceeded",
    "integrity.mismatch",
    "backend.erasure_unconfirmed",
})
FORBIDDEN_KEYS = frozenset({"content", "metadata", "secret"})


def lock_tenant(session: Session, tenant_id: str) -> None:
    """Take the tenant's advisory lock until commit. It is the audit chain's lock on purpose:
    writers append to both logs, and one lock cannot be taken in two orders (no deadlocks)."""
    lock_chain(session, chain_for(tenant_id))


def emit(session: Session, tenant_id: str, type: str, payload: dict[str, Any]) -> None:
    """Append one event to the tenant's log as part of `session`'s transaction.

    Events are inserted at commit, in that transaction, under the tenant's lock (see
    `app.services.audit.audit_commit`), so ids follow commit order. `type` is one of `EVENT_TYPES`; `payload`
    follows the module's payload rules (a `content`, `metadata` or `secret` key is refused).
    """
    if type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {type!r}")
    if FORBIDDEN_KEYS & payload.keys():
        raise ValueError("event payloads carry identifiers only, never content")
    _queue(session, tenant_id).append((type, payload))


def _queue(session: Session, tenant_id: str) -> list:
    work = chain_work(session, tenant_id)
    if not work.events:
        work.after_lock.append(_write_queued)
    return work.events


def _write_queued(session: Session, work: ChainWork) -> None:
    """Insert the transaction's events of one tenant in one statement (the lock is held, the
    head known and the NOTIFY sent by `app.services.audit.audit_commit`), sent with the COMMIT when it can be."""
    tenant_id = work.tenant_id
    rows = event_rows(tenant_id, work.event_id,
                      [(type, payload(session) if callable(payload) else payload) for type, payload in work.events])
    work.event_id += len(rows)
    if work.has_webhooks or not sends_with_commit(session):  # deliveries are queued after their events
        events_repo.insert_many(session, rows)
    else:  # nothing reads them back before the commit: they go out with it
        insert_with_commit(session, *events_repo.insert_rows(rows))
    if work.has_webhooks:
        for row in rows:
            webhooks.enqueue(session, tenant_id, row["id"], row["type"], row["payload"])


def event_rows(tenant_id: str, event_id: int, events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The `events` rows of (type, payload) pairs, numbered on from the tenant's head `event_id`
    (read under the tenant's lock)."""
    return [{"tenant_id": tenant_id, "id": event_id + i, "type": type, "payload": payload, "created_at": utcnow()}
            for i, (type, payload) in enumerate(events, 1)]


def insert_rows(tenant_id: str, event_id: int, events: list[tuple[str, dict[str, Any]]]) -> tuple[str, list]:
    """`event_rows` as an INSERT's psycopg text and parameter rows (a commit on the driver,
    `remembering.commit_on_driver`; a tenant with webhooks never takes that path)."""
    return events_repo.insert_rows(event_rows(tenant_id, event_id, events))


def written_payload(memory: Memory, ref: str) -> dict[str, Any]:
    """`memory.written`'s payload: `{memoryRef, memoryId, agentId, nodeId?, tags?}`."""
    payload: dict[str, Any] = {"memoryRef": ref, "memoryId": memory.id, "agentId": memory.agent_id}
    if memory.node_id:
        payload["nodeId"] = memory.node_id
    if memory.tags:
        payload["tags"] = list(memory.tags)
    return payload


def memory_written(session: Session, memory: Memory) -> None:
    """`memory.written` for a committed write of `memory` (`written_payload`)."""
    tenant_id, agent_id, user_id = memory.tenant_id, memory.agent_id, memory.user_id
    # The ref is minted (if new) at commit under the tenant's lock, like the event itself.
    _queue(session, tenant_id).append(("memory.written", lambda s: written_payload(
        memory, refs.ref_for(s, tenant_id, agent_id, user_id))))


def change_event(session: Session, change: Change, outcome: str) -> None:
    """`change.proposed|approved|rejected|withdrawn|approval_recorded`: `{changeId, operation, agentId,
    memoryIds}`. `approval_recorded` is an approval that leaves a change pending (more are required)."""
    emit(session, change.tenant_id, f"change.{outcome}", {
        "changeId": change.id, "operation": change.operation, "agentId": change.agent_id,
        "memoryIds": list(change.memory_ids)})


@dataclass(frozen=True)
class StoredEvent:
    id: int
    type: str
    payload: dict[str, Any]
    created_at: datetime

    def visible_to(self, may_act_for) -> bool:
        """Events about an agent are shown only to keys that may act for it."""
        agent = self.payload.get("agentId")
        return agent is None or may_act_for(agent)


def read_after(sessions, tenant_id: str, after: int, limit: int) -> list[StoredEvent]:
    """The tenant's events with id > `after`, oldest first, at most `limit`."""
    with sessions() as session:
        rows = events_repo.after(session, tenant_id=tenant_id, after_id=after, limit=limit)
    return [StoredEvent(r.id, r.type, r.payload, r.created_at) for r in rows]


def latest_id(sessions, tenant_id: str) -> int:
    """The tenant's newest event id (0: none yet): where a stream that replays nothing starts."""
    with sessions() as session:
        return events_repo.latest_id(session, tenant_id=tenant_id)
