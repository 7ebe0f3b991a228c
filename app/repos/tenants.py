"""SQL for tenants."""

from __future__ import annotations

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from app.db.models import Tenant


def insert(session: Session, *, tenant_id: str, name: str) -> Tenant:
    tenant = Tenant(id=tenant_id, name=name, settings={})
    session.add(tenant)
    session.flush()
    return tenant


def find(session: Session, *, ref: str) -> Tenant | None:
    """A tenant by id or by name."""
    return session.scalars(select(Tenant).where(or_(Tenant.id == ref, Tenant.name == ref))).first()


def get(session: Session, *, tenant_id: str) -> Tenant | None:
    return session.get(Tenant, tenant_id)


def list_all(session: Session) -> list[Tenant]:
    return list(session.scalars(select(Tenant).order_by(Tenant.created_at, Tenant.id)))
