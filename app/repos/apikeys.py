"""SQL for API keys. Every query that reads a key for a caller is tenant-scoped or by secret hash."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import literal_column, select, text, tuple_, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.db.models import ApiKey, Tenant
from app.repos import rate_limits


def insert(session: Session, *, key_id: str, tenant_id: str, name: str, token_hash: bytes,
           scopes: list[str], agents: list[str], sources: list[str] | None = None) -> ApiKey:
    key = ApiKey(id=key_id, tenant_id=tenant_id, name=name, token_hash=token_hash, scopes=scopes, agents=agents,
                 sources=sources or [])
    session.add(key)
    session.flush()
    return key


TOUCH_EVERY = timedelta(seconds=60)


# The tenant row's xmin: it changes with every update of the row, and every change of a tenant's
# settings or registered secrets updates the row (`app.services.tenant_config`), so it versions them.
TENANT_CONFIG_VERSION = literal_column("tenants.xmin::text::bigint").label("tenant_config_version")


def find_active(conn: Connection, *, key_id: str):
    """A key that has not been revoked (a row with the ApiKey columns and `tenant_config_version`),
    or None. Takes a plain connection: authentication is one autocommit read on the hot path of
    every request, and it brings the tenant's config version so the request's tenant settings
    come from the process cache without another round trip."""
    keys = ApiKey.__table__
    return conn.execute(select(keys, TENANT_CONFIG_VERSION)
                        .select_from(keys.join(Tenant.__table__, Tenant.id == keys.c.tenant_id))
                        .where(keys.c.id == key_id, keys.c.revoked_at.is_(None))).first()


def find_active_taking_token(conn: Connection, *, key_id: str, token_hash: bytes, per_minute: int):
    """`find_active` and, when the stored hash is `token_hash`, a token from the key's rate-limit
    bucket (`app.repos.rate_limits`), in one statement: the row gains `tokens` and `allowed`
    (NULL when the hash did not match, so a caller without the secret never drains the bucket)."""
    return conn.execute(_FIND_TAKING_TOKEN, {"key_id": key_id, "token_hash": token_hash,
                                             **rate_limits.bucket_parameters(per_minute)}).first()


_FIND_TAKING_TOKEN = text(f"""
    WITH key AS (
        SELECT api_keys.*, tenants.xmin::text::bigint AS tenant_config_version
        FROM api_keys JOIN tenants ON tenants.id = api_keys.tenant_id
        WHERE api_keys.id = :key_id AND api_keys.revoked_at IS NULL),
    bucket AS ({rate_limits.take_token_sql("SELECT tenant_id, id FROM key WHERE token_hash = :token_hash")})
    SELECT key.*, bucket.tokens, bucket.allowed FROM key LEFT JOIN bucket ON true""")


def touch(conn: Connection, *, key_id: str) -> None:
    """Record use; callers skip it when the key was used within TOUCH_EVERY, so most requests only read."""
    conn.execute(text(
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
    return session.get(ApiKey, {"id": key_id, "tenant_id": tenant_id}) if row else None


def is_active(session: Session, *, tenant_id: str, key_id: str) -> bool:
    """Whether the tenant's key exists and is not revoked."""
    return session.scalar(select(ApiKey.revoked_at.is_(None)).where(
        ApiKey.tenant_id == tenant_id, ApiKey.id == key_id)) is True


def active_among(conn: Connection, *, keys: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (tenant_id, key_id) pairs among `keys` whose key is not revoked."""
    return {tuple(row) for row in conn.execute(select(ApiKey.tenant_id, ApiKey.id).where(
        tuple_(ApiKey.tenant_id, ApiKey.id).in_(keys), ApiKey.revoked_at.is_(None)))}
