"""SQL for API keys. Every query that reads a key for a caller is tenant-scoped or by secret hash."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

import psycopg
from sqlalchemy import select, tuple_, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.db import prepared
from app.db.models import ApiKey
from app.db.prepared import Statement
from app.repos.tenancy import rate_limits


def insert(session: Session, *, key_id: str, tenant_id: str, name: str, token_hash: bytes,
           scopes: list[str], agents: list[str], sources: list[str] | None = None,
           owner_user_id: str | None = None, origins: list[str] | None = None) -> ApiKey:
    key = ApiKey(id=key_id, tenant_id=tenant_id, name=name, token_hash=token_hash, scopes=scopes, agents=agents,
                 sources=sources or [], owner_user_id=owner_user_id, origins=origins or [])
    session.add(key)
    session.flush()
    return key


TOUCH_EVERY = timedelta(seconds=60)


class ActiveKey(NamedTuple):
    """A key that has not been revoked, as the key check reads it (one prepared statement)."""

    id: str
    tenant_id: str
    scopes: list[str]
    agents: list[str]
    sources: list[str]
    token_hash: bytes
    last_used_at: datetime | None
    tenant_config_version: int
    owner_user_id: str | None
    """The person the key belongs to (`ApiKey.owner_user_id`), or None."""
    origins: list[str]
    """The origins its writes may claim (`ApiKey.origins`; empty: any)."""
    tokens: float | None = None
    """Tokens left in the key's rate-limit bucket (`find_active_taking_token`; None when the hash
    did not match, so no token was taken)."""
    allowed: bool | None = None


# The tenant row's xmin: it changes with every update of the row, and every change of a tenant's
# settings or registered secrets updates the row (`app.services.tenancy.tenant_config`), so it versions
# them. Read with the key, so the request's tenant settings come from the process cache without
# another round trip.
_ACTIVE_KEY = """
    SELECT k.id, k.tenant_id, k.scopes, k.agents, k.sources, k.token_hash, k.last_used_at,
           t.xmin::text::bigint AS tenant_config_version, k.owner_user_id,
           k.origins
    FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
    WHERE k.id = %(key_id)s AND k.revoked_at IS NULL"""
_FIND_ACTIVE = Statement(_ACTIVE_KEY)
_FIND_TAKING_TOKEN = Statement(f"""
    WITH key AS ({_ACTIVE_KEY}),
    bucket AS ({rate_limits.take_token_sql("SELECT tenant_id, id FROM key WHERE token_hash = %(token_hash)s",
                                           psycopg_params=True)})
    SELECT key.*, bucket.tokens, bucket.allowed FROM key LEFT JOIN bucket ON true""")
_TOUCH = Statement(
    "UPDATE api_keys SET last_used_at = now() WHERE id = %(id)s "
    "AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')")


def find_active(conn: psycopg.Connection, *, key_id: str) -> ActiveKey | None:
    """A key that has not been revoked, with its tenant's config version, or None. Takes a
    psycopg connection in autocommit (`app.db.prepared.autocommit`): authentication is one read
    on the hot path of every request."""
    row = prepared.fetch_one(conn, _FIND_ACTIVE, {"key_id": key_id})
    return ActiveKey(*row) if row is not None else None


def find_active_taking_token(conn: psycopg.Connection, *, key_id: str, token_hash: bytes,
                             per_minute: int) -> ActiveKey | None:
    """`find_active` and, when the stored hash is `token_hash`, a token from the key's rate-limit
    bucket (`app.repos.tenancy.rate_limits`), in one statement: `tokens` and `allowed` are None when the
    hash did not match, so a caller without the secret never drains the bucket."""
    row = prepared.fetch_one(conn, _FIND_TAKING_TOKEN, {"key_id": key_id, "token_hash": token_hash,
                                                        **rate_limits.bucket_parameters(per_minute)})
    return ActiveKey(*row) if row is not None else None


def touch(conn: psycopg.Connection, *, key_id: str) -> None:
    """Record use; callers skip it when the key was used within TOUCH_EVERY, so most requests only read."""
    prepared.fetch_none(conn, _TOUCH, {"id": key_id})


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
    return session.get(ApiKey, {"id": key_id, "tenant_id": tenant_id}) if row else None


def is_active(session: Session, *, tenant_id: str, key_id: str) -> bool:
    """Whether the tenant's key exists and is not revoked."""
    return session.scalar(select(ApiKey.revoked_at.is_(None)).where(
        ApiKey.tenant_id == tenant_id, ApiKey.id == key_id)) is True


def owner_of(session: Session, *, tenant_id: str, key_id: str) -> str | None:
    """The person the tenant's key belongs to (revoked or not), or None: no owner, or no such key."""
    return session.scalar(select(ApiKey.owner_user_id).where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id))


def active_among(conn: Connection, *, keys: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (tenant_id, key_id) pairs among `keys` whose key is not revoked."""
    return {tuple(row) for row in conn.execute(select(ApiKey.tenant_id, ApiKey.id).where(
        tuple_(ApiKey.tenant_id, ApiKey.id).in_(keys), ApiKey.revoked_at.is_(None)))}
