"""Tenants: create and list. Each creation is audited on the system chain and opens the tenant's own chain."""

from __future__ import annotations

import re

from sqlalchemy.exc import IntegrityError

from app.core.ids import new_id
from app.db.models import Tenant
from app.errors import Conflict, NotFound, ValidationFailed
from app.repos.tenancy import tenants as tenant_repo
from app.services.runtime.context import AppContext

TENANT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


def create_tenant(ctx: AppContext, *, name: str, actor: dict) -> Tenant:
    """Create a tenant named `name` (lower-case slug); audited on the system and tenant chains."""
    if not TENANT_NAME.match(name):
        raise ValidationFailed.at("/name", "tenant name must be 1-63 chars of a-z, 0-9, '_' or '-', starting alphanumeric")
    try:
        with ctx.db.sessions.begin() as session:
            tenant = tenant_repo.insert(session, tenant_id=new_id("ten"), name=name)
            subject = {"type": "tenant", "id": tenant.id}
            ctx.audit.append(session, tenant_id=None, event_type="tenant.created", actor=actor,
                             subject=subject, data={"name": name})
            ctx.audit.append(session, tenant_id=tenant.id, event_type="tenant.created", actor=actor,
                             subject=subject, data={"name": name})
            return tenant
    except IntegrityError:
        raise Conflict(f"a tenant named {name!r} already exists") from None


def list_tenants(ctx: AppContext) -> list[Tenant]:
    with ctx.db.sessions() as session:
        return tenant_repo.list_all(session)


def resolve_tenant(ctx: AppContext, ref: str) -> Tenant:
    """A tenant by id or name, else NotFound."""
    with ctx.db.sessions() as session:
        tenant = tenant_repo.find(session, ref=ref)
    if tenant is None:
        raise NotFound(f"no tenant {ref!r}")
    return tenant
