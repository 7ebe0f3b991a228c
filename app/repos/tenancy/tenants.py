"""SQL for tenants, their settings (a JSON column of the tenant row) and registered secrets."""

from __future__ import annotations

from typing import Any, Sequence
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.db.models import Tenant, TenantSecret


def insert(session: Session, *, tenant_id: str, name: str) -> Tenant:
    tenant = Tenant(id=tenant_id, name=name, settings={})
    session.add(tenant)
    session.flush()
    return tenant


def find(session: Session, *, ref: str) -> Tenant | None:
    """A tenant by id or by name."""
    return session.scalars(select(Tenant).where(or_(Tenant.id == ref, Tenant.name == ref))).first()


def get(session: Session, *, tenant_id: str, lock: bool = False) -> Tenant | None:
    """The tenant (the session's copy when it holds one and no lock is asked), or None."""
    return session.get(Tenant, tenant_id, with_for_update=True if lock else None)


def settings_of(session: Session, *, tenant_id: str) -> dict:
    """The tenant's settings document ({} for an unknown tenant); the row is usually already in the
    session's identity map."""
    tenant = get(session, tenant_id=tenant_id)
    return (tenant.settings or {}) if tenant else {}


def list_all(session: Session) -> list[Tenant]:
    return list(session.scalars(select(Tenant).order_by(Tenant.created_at, Tenant.id)))


def with_setting(session: Session, *, key: str) -> list[Tenant]:
    """The tenants whose settings have `key` (e.g. `oidc`: those admitting people from the OpenID
    provider), by name."""
    return list(session.scalars(select(Tenant).where(Tenant.settings.has_key(key)).order_by(Tenant.name)))


def touch(session: Session, *, tenant_id: str) -> None:
    """Update the tenant row without changing it, so its version (xmin) changes: cached per-tenant
    settings keyed by that version are read afresh (`app.services.tenancy.tenant_config.rules_for`)."""
    session.execute(update(Tenant).where(Tenant.id == tenant_id).values(settings=Tenant.settings))


def secret_digests(session: Session, *, tenant_id: str) -> Sequence[Any]:
    """(length, digest) of each secret the tenant registered."""
    return session.execute(select(TenantSecret.length, TenantSecret.digest)
                           .where(TenantSecret.tenant_id == tenant_id)).all()


def secret_labels(session: Session, *, tenant_id: str) -> Sequence[Any]:
    """(id, label, created_at) of each secret the tenant registered, oldest first (never the digest)."""
    return session.execute(select(TenantSecret.id, TenantSecret.label, TenantSecret.created_at)
                           .where(TenantSecret.tenant_id == tenant_id)
                           .order_by(TenantSecret.created_at, TenantSecret.id)).all()


def add_secret(session: Session, secret: TenantSecret) -> None:
    session.add(secret)
