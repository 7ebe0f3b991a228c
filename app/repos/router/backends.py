"""Memory backends, their outbox (`backend_deliveries`, filled by the `memories` trigger of
migration 0027) and what each backend holds (`backend_records`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from sqlalchemy import delete, func, literal, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from app.db.models import BackendDelivery, BackendRecord, Memory, MemoryBackend
from app.repos.memory.memories import Scope, apply_filters, visible


def insert(session: Session, backend: MemoryBackend) -> None:
    session.add(backend)
    session.flush()


def by_name(session: Session, *, tenant_id: str, name: str) -> MemoryBackend | None:
    return session.scalars(select(MemoryBackend).where(
        MemoryBackend.tenant_id == tenant_id, MemoryBackend.name == name)).first()


def for_tenant(session: Session, *, tenant_id: str, enabled_only: bool = False) -> list[MemoryBackend]:
    stmt = select(MemoryBackend).where(MemoryBackend.tenant_id == tenant_id)
    if enabled_only:
        stmt = stmt.where(MemoryBackend.enabled.is_(True))
    return list(session.scalars(stmt.order_by(MemoryBackend.name)))


def by_ids(session: Session, *, backend_ids: set[str]) -> dict[str, MemoryBackend]:
    return {b.id: b for b in session.scalars(select(MemoryBackend).where(MemoryBackend.id.in_(backend_ids)))}


def remove(session: Session, backend: MemoryBackend) -> None:
    session.delete(backend)


def owe_existing(session: Session, *, backend_id: str, tenant_id: str, agents_like: str) -> int:
    """Owe a backend (new, or resumed) every memory already live for the agents it takes, and every
    memory it holds that is no longer live (ended while it was paused: its delete is owed too);
    returns how many."""
    live = select(Memory.tenant_id, literal(backend_id), Memory.id).where(
        Memory.tenant_id == tenant_id, Memory.status == "live", Memory.agent_id.like(agents_like))
    ended = select(BackendRecord.tenant_id, literal(backend_id), BackendRecord.memory_id).where(
        BackendRecord.tenant_id == tenant_id, BackendRecord.backend_id == backend_id,
        ~select(Memory.id).where(Memory.tenant_id == tenant_id, Memory.id == BackendRecord.memory_id,
                                 Memory.status == "live").exists())
    result = session.execute(pg_insert(BackendDelivery).from_select(["tenant_id", "backend_id", "memory_id"],
                                                                    live.union_all(ended)))
    return result.rowcount


def reset_failed(session: Session, *, tenant_id: str, backend_id: str, at: datetime) -> int:
    """Owe again the deliveries to a backend that gave up."""
    return session.execute(update(BackendDelivery).where(
        BackendDelivery.tenant_id == tenant_id, BackendDelivery.backend_id == backend_id, BackendDelivery.status == "failed",
    ).values(status="pending", attempt=0, next_attempt_at=at)).rowcount


def claim_due(session: Session, *, now: datetime, lease_until: datetime, limit: int) -> list:
    """Lease up to `limit` pending deliveries due at `now` (oldest first, skipping rows another
    worker holds) until `lease_until`, counting the claim; (id, tenant_id, backend_id, memory_id, attempt,
    claims) of each."""
    due = select(BackendDelivery.id).where(
        BackendDelivery.status == "pending", BackendDelivery.next_attempt_at <= now,
    ).order_by(BackendDelivery.next_attempt_at, BackendDelivery.id).limit(limit).with_for_update(skip_locked=True)
    return session.execute(
        update(BackendDelivery).where(BackendDelivery.id.in_(due.scalar_subquery()))
        .values(next_attempt_at=lease_until, claims=BackendDelivery.claims + 1)
        .returning(BackendDelivery.id, BackendDelivery.tenant_id, BackendDelivery.backend_id,
                   BackendDelivery.memory_id, BackendDelivery.attempt, BackendDelivery.claims)).all()


def memory_state(session: Session, *, tenant_id: str, memory_id: str) -> Memory | None:
    """The memory as it stands now (any status), or None when the row is gone."""
    return session.scalars(select(Memory).where(Memory.tenant_id == tenant_id, Memory.id == memory_id)).first()


def record_of(session: Session, *, tenant_id: str, backend_id: str, memory_id: str) -> BackendRecord | None:
    return session.get(BackendRecord, (backend_id, memory_id, tenant_id))


def save_record(session: Session, *, backend_id: str, memory_id: str, tenant_id: str, backend_ref: str,
                content_digest: str, at: datetime) -> None:
    values = {"backend_id": backend_id, "memory_id": memory_id, "tenant_id": tenant_id,
              "backend_ref": backend_ref, "content_digest": content_digest, "delivered_at": at}
    session.execute(pg_insert(BackendRecord).values(**values).on_conflict_do_update(
        index_elements=["backend_id", "memory_id", "tenant_id"],
        set_={"backend_ref": backend_ref, "content_digest": content_digest, "delivered_at": at}))


def drop_record(session: Session, *, tenant_id: str, backend_id: str, memory_id: str) -> None:
    session.execute(delete(BackendRecord).where(BackendRecord.tenant_id == tenant_id,
                                                BackendRecord.backend_id == backend_id,
                                                BackendRecord.memory_id == memory_id))


def record_attempt(session: Session, *, tenant_id: str, delivery_id: int, values: dict[str, Any]) -> None:
    session.execute(update(BackendDelivery).where(BackendDelivery.tenant_id == tenant_id,
                                                  BackendDelivery.id == delivery_id).values(**values))


def governed_refs(session: Session, *, tenant_id: str, backend_id: str, refs: Sequence[str]) -> dict[str, BackendRecord]:
    """The records of a backend's own ids (what its search returned), by backend id."""
    if not refs:
        return {}
    rows = session.scalars(select(BackendRecord).where(BackendRecord.tenant_id == tenant_id,
                                                       BackendRecord.backend_id == backend_id,
                                                       BackendRecord.backend_ref.in_(list(refs))))
    return {r.backend_ref: r for r in rows}


def visible_by_ids(session: Session, *, scope: Scope, filters: dict[str, Any], ids: Sequence[str]) -> dict[str, Memory]:
    """The memories among `ids` recall may return for `scope` with the recall's own filters (types,
    tags, metadata, freshness; never expired, pending or ended): what a backend hit may name."""
    if not ids:
        return {}
    stmt = apply_filters(select(Memory).where(visible(scope), Memory.id.in_(list(ids))), **filters)
    return {m.id: m for m in session.scalars(stmt)}


def deliveries_of(session: Session, *, tenant_id: str, memory_id: str) -> list:
    """The newest delivery of the memory to each backend, with the backend's name and what it holds."""
    latest = (select(BackendDelivery.backend_id, func.max(BackendDelivery.id).label("id"))
              .where(BackendDelivery.tenant_id == tenant_id, BackendDelivery.memory_id == memory_id)
              .group_by(BackendDelivery.backend_id).subquery())
    return session.execute(
        select(MemoryBackend.name, BackendDelivery.status, BackendDelivery.attempt, BackendDelivery.action,
               BackendDelivery.error, BackendDelivery.created_at, BackendDelivery.delivered_at,
               BackendRecord.backend_ref)
        .join(latest, latest.c.id == BackendDelivery.id)
        .join(MemoryBackend, MemoryBackend.id == BackendDelivery.backend_id)
        .outerjoin(BackendRecord, (BackendRecord.backend_id == BackendDelivery.backend_id)
                   & (BackendRecord.memory_id == BackendDelivery.memory_id))
        .order_by(MemoryBackend.name)).all()


def backlog(session: Session, *, tenant_id: str) -> list:
    """(backend name, pending, failed, oldest pending created_at) per backend of the tenant."""
    return session.execute(
        select(MemoryBackend.name,
               func.count().filter(BackendDelivery.status == "pending"),
               func.count().filter(BackendDelivery.status == "failed"),
               func.min(BackendDelivery.created_at).filter(BackendDelivery.status == "pending"))
        .select_from(MemoryBackend)
        .outerjoin(BackendDelivery, BackendDelivery.backend_id == MemoryBackend.id)
        .where(MemoryBackend.tenant_id == tenant_id)
        .group_by(MemoryBackend.name).order_by(MemoryBackend.name)).all()


def records_of_backend(session: Session, *, tenant_id: str, backend_id: str) -> dict[str, BackendRecord]:
    """Every record of one backend by memory id (the drift check's ledger side)."""
    return {r.memory_id: r for r in session.scalars(select(BackendRecord).where(
        BackendRecord.tenant_id == tenant_id, BackendRecord.backend_id == backend_id))}


def live_ids_for_agents(session: Session, *, tenant_id: str, agents_like: str) -> dict[str, Memory]:
    """Live memories of the agents a backend takes (the drift check's Memwarden side)."""
    return {m.id: m for m in session.scalars(select(Memory).where(
        Memory.tenant_id == tenant_id, Memory.status == "live", Memory.agent_id.like(agents_like)))}


def pending_memory_ids(session: Session, *, tenant_id: str, backend_id: str) -> set[str]:
    """Memories with a delivery to the backend still owed."""
    return set(session.scalars(select(BackendDelivery.memory_id).where(
        BackendDelivery.tenant_id == tenant_id, BackendDelivery.backend_id == backend_id, BackendDelivery.status == "pending")))


def owe(session: Session, *, backend_id: str, tenant_id: str, memory_ids: Sequence[str]) -> None:
    """Owe the backend a delivery of each memory (the drift check's resync)."""
    session.add_all([BackendDelivery(tenant_id=tenant_id, backend_id=backend_id, memory_id=i) for i in memory_ids])


def delivery_lags(session: Session, *, tenant_id: str, since: datetime) -> list[float]:
    """Seconds from owed to delivered of the tenant's rows owed since `since` (the benchmark's lag)."""
    lag = func.extract("epoch", BackendDelivery.delivered_at - BackendDelivery.created_at)
    return [float(v) for v in session.scalars(select(lag).where(
        BackendDelivery.tenant_id == tenant_id, BackendDelivery.status == "delivered",
        BackendDelivery.created_at >= since))]
