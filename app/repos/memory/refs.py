"""SQL for memory refs (`memory_refs`: one opaque ref per (tenant, agent, user) scope) and runs
(`runs`: an agent's run and the instant its reads see). Every query is scoped by tenant."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from app.db.models import MemoryRef, Run


def find(session: Session, *, tenant_id: str, agent_id: str, user_id: str | None) -> str | None:
    """The scope's ref, or None while none was minted."""
    user = MemoryRef.user_id.is_(None) if user_id is None else MemoryRef.user_id == user_id
    return session.scalar(select(MemoryRef.ref).where(
        MemoryRef.tenant_id == tenant_id, MemoryRef.agent_id == agent_id, user))


def insert_unless_present(session: Session, *, ref: str, tenant_id: str, agent_id: str, user_id: str | None) -> None:
    """Mint `ref` for the scope; a no-op when the scope has one already (unique index)."""
    session.execute(insert(MemoryRef).values(ref=ref, tenant_id=tenant_id, agent_id=agent_id, user_id=user_id)
                    .on_conflict_do_nothing())


def get(session: Session, *, tenant_id: str, ref: str) -> MemoryRef | None:
    return session.scalars(select(MemoryRef).where(MemoryRef.ref == ref, MemoryRef.tenant_id == tenant_id)).first()


def insert_run(session: Session, run: Run) -> None:
    session.add(run)


def get_run(session: Session, *, tenant_id: str, run_id: str) -> Run | None:
    return session.scalars(select(Run).where(Run.id == run_id, Run.tenant_id == tenant_id)).first()
