"""SQL for consolidation passes: the windows and short-term items a pass reads, the claims that
make it idempotent, the one-pass-per-tenant lock, run records and the tenants due a scheduled run."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session, undefer

from app.db.models import ConsolidationClaim, ConsolidationRun, Memory, Tenant
from app.repos.memory.memories import Scope, visible


def windows(session: Session, *, tenant_id: str, agent_id: str | None) -> list[tuple[str, str | None]]:
    """(agent_id, user_id) of every window holding live episodic memories, in order."""
    stmt = (select(Memory.agent_id, Memory.user_id).where(visible(Scope(tenant_id, agent_id)),
                                                          Memory.type == "episodic")
            .group_by(Memory.agent_id, Memory.user_id).order_by(Memory.agent_id, Memory.user_id))
    return [tuple(row) for row in session.execute(stmt)]


def short_term(session: Session, *, tenant_id: str, agent_id: str, user_id: str | None, since: datetime,
               limit: int) -> list[Memory]:
    """The window's live episodic memories written since `since`, embeddings loaded, newest first."""
    user = Memory.user_id.is_(None) if user_id is None else Memory.user_id == user_id
    return list(session.scalars(select(Memory).options(undefer(Memory.embedding))
                                .where(visible(Scope(tenant_id, agent_id)), user, Memory.type == "episodic",
                                       Memory.created_at >= since, Memory.embedding.is_not(None))
                                .order_by(Memory.created_at.desc(), Memory.id.desc()).limit(limit)))


def cold(session: Session, *, tenant_id: str, agent_id: str, user_id: str | None, older_than: datetime,
         not_recalled_since: datetime, limit: int) -> list[Memory]:
    """The window's live episodic memories written before `older_than` and not recalled since
    `not_recalled_since` (the eviction candidates), embeddings loaded, oldest first."""
    user = Memory.user_id.is_(None) if user_id is None else Memory.user_id == user_id
    return list(session.scalars(select(Memory).options(undefer(Memory.embedding))
                                .where(visible(Scope(tenant_id, agent_id)), user, Memory.type == "episodic",
                                       Memory.created_at < older_than, Memory.embedding.is_not(None),
                                       func.coalesce(Memory.last_recalled_at, Memory.created_at) < not_recalled_since)
                                .order_by(Memory.created_at, Memory.id).limit(limit)))


def claimed_sources(session: Session, *, tenant_id: str, agent_id: str) -> set[str]:
    """Ids of the agent's memories already used as evidence of a promotion (never used twice)."""
    return set(session.scalars(select(func.unnest(ConsolidationClaim.source_ids)).where(
        ConsolidationClaim.tenant_id == tenant_id, ConsolidationClaim.agent_id == agent_id,
        ConsolidationClaim.kind == "promote")))


def promoted_live(session: Session, *, tenant_id: str, agent_id: str) -> set[str]:
    """Ids of the agent's memories that are sources of a promotion now live (their fact lives on)."""
    stmt = (select(func.unnest(ConsolidationClaim.source_ids))
            .join(Memory, (Memory.tenant_id == ConsolidationClaim.tenant_id) & (Memory.id == ConsolidationClaim.memory_id))
            .where(ConsolidationClaim.tenant_id == tenant_id, ConsolidationClaim.agent_id == agent_id,
                   ConsolidationClaim.kind == "promote", Memory.status == "live"))
    return set(session.scalars(stmt))


def claim(session: Session, *, tenant_id: str, key: str, kind: str, run_id: str, agent_id: str,
          user_id: str | None, source_ids: Sequence[str], evidence: dict[str, Any]) -> bool:
    """Claim `key` in the caller's transaction; False when it is claimed already (by a committed
    pass, or one that commits first: the insert waits for it)."""
    stmt = (insert(ConsolidationClaim).values(
        tenant_id=tenant_id, key=key, kind=kind, run_id=run_id, agent_id=agent_id, user_id=user_id,
        source_ids=list(source_ids), evidence=evidence)
        .on_conflict_do_nothing(index_elements=["tenant_id", "key"]).returning(ConsolidationClaim.key))
    return session.execute(stmt).first() is not None


def record_outcome(session: Session, *, tenant_id: str, key: str, memory_id: str | None,
                   change_id: str | None) -> None:
    session.execute(update(ConsolidationClaim).where(ConsolidationClaim.tenant_id == tenant_id,
                                                     ConsolidationClaim.key == key)
                    .values(memory_id=memory_id, change_id=change_id))


def claim_for_memory(session: Session, *, tenant_id: str, memory_id: str) -> ConsolidationClaim | None:
    """The promotion that wrote `memory_id`, if consolidation did (the change page's evidence)."""
    return session.scalars(select(ConsolidationClaim).where(
        ConsolidationClaim.tenant_id == tenant_id, ConsolidationClaim.memory_id == memory_id,
        ConsolidationClaim.kind == "promote")).first()


def _pass_lock_key(tenant_id: str):
    return func.hashtext("memwarden.consolidation:" + tenant_id)


def try_lock_pass(conn: Connection, *, tenant_id: str) -> bool:
    """The tenant's session-level consolidation lock on `conn` (released when the connection
    ends, so a killed pass never holds it); False when another connection holds it."""
    return bool(conn.scalar(select(func.pg_try_advisory_lock(_pass_lock_key(tenant_id)))))


def unlock_pass(conn: Connection, *, tenant_id: str) -> None:
    conn.execute(select(func.pg_advisory_unlock(_pass_lock_key(tenant_id))))


def insert_run(session: Session, run: ConsolidationRun) -> None:
    session.add(run)


def finish_run(session: Session, *, tenant_id: str, run_id: str, status: str, at: datetime,
               stats: dict[str, Any]) -> None:
    session.execute(update(ConsolidationRun).where(ConsolidationRun.id == run_id,
                                                   ConsolidationRun.tenant_id == tenant_id)
                    .values(status=status, finished_at=at, stats=stats))


def abandon_stale_runs(session: Session, *, tenant_id: str) -> int:
    """Runs left `running` by a process that died (the caller holds the tenant's pass lock, so none
    is really running): marked failed. Their claimed work is committed; the rest is redone."""
    result = session.execute(update(ConsolidationRun).where(
        ConsolidationRun.tenant_id == tenant_id, ConsolidationRun.status == "running")
        .values(status="failed", finished_at=func.now(), stats=ConsolidationRun.stats.op("||")(
            text("'{\"abandoned\": true}'::jsonb"))))
    return result.rowcount or 0


def tenants_enabled(session: Session) -> list[tuple[str, dict[str, Any]]]:
    """(id, consolidation settings) of the tenants that turned scheduled consolidation on."""
    return [(row[0], row[1]) for row in session.execute(select(Tenant.id, Tenant.settings["consolidation"]).where(
        Tenant.settings["consolidation"]["enabled"].as_boolean().is_(True)))]


def last_scheduled(session: Session, *, tenant_id: str) -> datetime | None:
    """When the tenant's last scheduled, non-dry run started."""
    return session.scalar(select(func.max(ConsolidationRun.started_at)).where(
        ConsolidationRun.tenant_id == tenant_id, ConsolidationRun.trigger == "schedule",
        ConsolidationRun.dry_run.is_(False)))
