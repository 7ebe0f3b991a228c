"""SQL for compaction passes: the scopes and candidate rows a pass reads, the memories pending
changes hold, the one-pass-per-tenant lock, run records and the tenants that opted in."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session, undefer

from app.db.models import Change, CompactionRun, Memory, Tenant
from app.repos.memory.memories import Scope, visible


def scopes(session: Session, *, tenant_id: str, agent_id: str | None) -> list[tuple[str, str | None, str]]:
    """(agent_id, user_id, type) of every scope holding more than one live memory, in order."""
    stmt = (select(Memory.agent_id, Memory.user_id, Memory.type).where(visible(Scope(tenant_id, agent_id)))
            .group_by(Memory.agent_id, Memory.user_id, Memory.type).having(func.count() > 1)
            .order_by(Memory.agent_id, Memory.user_id, Memory.type))
    return [tuple(row) for row in session.execute(stmt)]


def candidates(session: Session, *, tenant_id: str, agent_id: str, user_id: str | None, memory_type: str,
               limit: int) -> list[Memory]:
    """The scope's newest live memories with their embeddings loaded, newest first."""
    user = Memory.user_id.is_(None) if user_id is None else Memory.user_id == user_id
    return list(session.scalars(select(Memory).options(undefer(Memory.embedding))
                                .where(visible(Scope(tenant_id, agent_id)), user, Memory.type == memory_type)
                                .order_by(Memory.created_at.desc(), Memory.id.desc()).limit(limit)))


def held_by_pending_changes(session: Session, *, tenant_id: str) -> set[str]:
    """Ids of the tenant's memories that a pending change names."""
    return set(session.scalars(select(func.unnest(Change.memory_ids)).where(
        Change.tenant_id == tenant_id, Change.status == "pending")))


def _pass_lock_key(tenant_id: str):
    return func.hashtext("memwarden.compaction:" + tenant_id)


def try_lock_pass(conn: Connection, *, tenant_id: str) -> bool:
    """Take the tenant's session-level compaction lock on `conn` (it spans a pass's many
    transactions); False when another connection holds it."""
    return bool(conn.scalar(select(func.pg_try_advisory_lock(_pass_lock_key(tenant_id)))))


def unlock_pass(conn: Connection, *, tenant_id: str) -> None:
    conn.execute(select(func.pg_advisory_unlock(_pass_lock_key(tenant_id))))


def insert_run(session: Session, run: CompactionRun) -> None:
    session.add(run)


def finish_run(session: Session, *, tenant_id: str, run_id: str, status: str, at: datetime,
               stats: dict[str, Any]) -> None:
    session.execute(update(CompactionRun).where(CompactionRun.id == run_id, CompactionRun.tenant_id == tenant_id)
                    .values(status=status, finished_at=at, stats=stats))


def tenants_enabled(session: Session) -> list[str]:
    """Ids of the tenants whose settings turn scheduled compaction on (a job over all tenants)."""
    return list(session.scalars(select(Tenant.id).where(
        Tenant.settings["compaction"]["enabled"].as_boolean().is_(True))))
