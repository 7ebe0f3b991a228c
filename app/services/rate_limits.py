"""Per-API-key token buckets kept in PostgreSQL, so every process and worker serving one database
enforces one limit (docs/scale-out.md).

A bucket is a row of the UNLOGGED table `rate_limit_buckets`. Taking a token is one
`INSERT … ON CONFLICT DO UPDATE … RETURNING` in autocommit: the row is refilled for the time since
its last use, capped at the burst size, and decremented if a whole token is there. An unlogged write
produces no WAL, so the commit does not wait for a flush, and the row lock lasts one statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import text

if TYPE_CHECKING:
    from app.core.access import Principal
    from app.services.context import AppContext

# The bucket's level now: what was left plus what flowed in since, capped at the burst size.
_REFILLED = "least(:cap, b.tokens + greatest(0, extract(epoch FROM now() - b.updated_at)) * :rate)"


def take_token_sql(rows: str) -> str:
    """The token-taking upsert for the (tenant_id, key_id) pairs `rows` yields (a VALUES list or a
    SELECT), parameters `:cap` and `:rate`; returns `tokens, allowed`. The key check embeds it
    (`app.repos.apikeys.authenticate_and_take_token`) so a request pays one round trip for both."""
    return f"""
    INSERT INTO rate_limit_buckets AS b (tenant_id, key_id, tokens, allowed, updated_at)
    SELECT r.tenant_id, r.key_id, :cap - 1, true, now() FROM ({rows}) AS r (tenant_id, key_id)
    ON CONFLICT (tenant_id, key_id) DO UPDATE SET
        tokens = {_REFILLED} - CASE WHEN {_REFILLED} >= 1 THEN 1 ELSE 0 END,
        allowed = {_REFILLED} >= 1,
        updated_at = greatest(b.updated_at, now())
    RETURNING tokens, allowed"""


_TAKE_TOKEN = text(take_token_sql("VALUES (CAST(:tenant_id AS text), CAST(:key_id AS text))"))
# A bucket idle for longer than it takes to refill is full, the same as no row at all.
_PURGE_IDLE = text("DELETE FROM rate_limit_buckets WHERE updated_at < now() - interval '10 minutes'")


def take_token(ctx: AppContext, principal: Principal, per_minute: int) -> float | None:
    """None when the key may make this request; otherwise seconds until its next token."""
    rate = per_minute / 60.0
    with ctx.db.reader() as conn:
        tokens, allowed = conn.execute(_TAKE_TOKEN, {
            "tenant_id": principal.tenant_id, "key_id": principal.key_id,
            "cap": float(per_minute), "rate": rate}).one()
    return retry_after(tokens, allowed, per_minute)


def retry_after(tokens: float, allowed: bool, per_minute: int) -> float | None:
    """None when the token was taken; otherwise seconds until the bucket holds a whole one."""
    return None if allowed else (1 - tokens) / (per_minute / 60.0)


def purge_idle(ctx: AppContext) -> int:
    """Drop buckets nobody used for 10 minutes (background job); returns how many."""
    with ctx.db.reader() as conn:
        return conn.execute(_PURGE_IDLE).rowcount
