"""SQL for API keys. Every query that reads a key for a caller is tenant-scoped or by secret hash."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from app.db.models import ApiKey


def insert(session: Session, *, key_id: str, tenant_id: str, name: str, token_hash: bytes,
           scopes: list[str], agents: list[str]) -> ApiKey:
    key = ApiKey(id=key_id, tenant_id=tenant_id, name=name, token_hash=token_hash, scopes=scopes, agents=agents)
    session.add(key)
    session.flush()
    return key


def find_active(session: Session, *, key_id: str) -> ApiKey | None:
    """A key that has not been revoked (and whose tenant exists)."""
    return session.scalars(
        select(ApiKey).where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
    ).first()


def touch(session: Session, *, key_id: str) -> None:
    """Record use at most once a minute, so authentication stays a read."""
    session.execute(text(
        "UPDATE api_keys SET last_used_at = now() WHERE id = :id "
        "AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')"
    ), {"id": key_id})


def list_for_tenant(session: Session, *, tenant_id: str) -> list[ApiKey]:
    return list(session.scalars(
        select(ApiKey).where(ApiKey.tenant_id == tenant_id).order_by(ApiKey.created_at, ApiKey.id)))


def revoke(session: Session, *, tenant_id: str, key_id: str, at: datetime) -> ApiKey | None:
    """Mark a key revoked; None when it is unknown in this tenant or already revoked."""
    row = session.execute(
        update(ApiKey)
        .where(ApiKey.id == key_id, ApiKey.tenant_id == tenant_id, ApiKey.revoked_at.is_(None))
        .values(revoked_at=at)
        .returning(ApiKey.id)
    ).first()
    return session.get(ApiKey, key_id) if row else None
