"""SQL for per-API-key token buckets (the UNLOGGED table `rate_limit_buckets`). The rule (how many
requests a minute) is the caller's: `app.services.tenancy.rate_limits`.

Taking a token is one `INSERT … ON CONFLICT DO UPDATE … RETURNING` in autocommit: the row is
refilled for the time since its last use, capped at the burst size, and decremented if a whole
token is there. An unlogged write produces no WAL, so the commit does not wait for a flush, and
the row lock lasts one statement.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection


def take_token_sql(rows: str, *, psycopg_params: bool = False) -> str:
    """The token-taking upsert for the (tenant_id, key_id) pairs `rows` yields (a VALUES list or a
    SELECT), parameters `:cap` and `:rate` (`%(cap)s` and `%(rate)s` with `psycopg_params`, for a
    statement psycopg runs itself); returns `tokens, allowed`. The key check embeds it
    (`app.repos.tenancy.apikeys.find_active_taking_token`) so a request pays one round trip for both."""
    cap, rate = ("%(cap)s", "%(rate)s") if psycopg_params else (":cap", ":rate")
    # The bucket's level now: what was left plus what flowed in since, capped at the burst size.
    refilled = f"least({cap}, b.tokens + greatest(0, extract(epoch FROM now() - b.updated_at)) * {rate})"
    return f"""
    INSERT INTO rate_limit_buckets AS b (tenant_id, key_id, tokens, allowed, updated_at)
    SELECT r.tenant_id, r.key_id, {cap} - 1, true, now() FROM ({rows}) AS r (tenant_id, key_id)
    ON CONFLICT (tenant_id, key_id) DO UPDATE SET
        tokens = {refilled} - CASE WHEN {refilled} >= 1 THEN 1 ELSE 0 END,
        allowed = {refilled} >= 1,
        updated_at = greatest(b.updated_at, now())
    RETURNING tokens, allowed"""


def bucket_parameters(per_minute: int) -> dict[str, float]:
    """`:cap` and `:rate` of `take_token_sql` for a limit of `per_minute` (bursts up to the same)."""
    return {"cap": float(per_minute), "rate": per_minute / 60.0}


_TAKE_TOKEN = text(take_token_sql("VALUES (CAST(:tenant_id AS text), CAST(:key_id AS text))"))
# A bucket idle for longer than it takes to refill is full, the same as no row at all.
_PURGE_IDLE = text("DELETE FROM rate_limit_buckets WHERE updated_at < now() - interval '10 minutes'")


def take_token(conn: Connection, *, tenant_id: str, key_id: str, per_minute: int) -> tuple[float, bool]:
    """Take a token from the key's bucket: (tokens left, whether one was taken)."""
    tokens, allowed = conn.execute(_TAKE_TOKEN, {"tenant_id": tenant_id, "key_id": key_id,
                                                 **bucket_parameters(per_minute)}).one()
    return tokens, allowed


def purge_idle(conn: Connection) -> int:
    """Drop buckets nobody used for 10 minutes; returns how many."""
    return conn.execute(_PURGE_IDLE).rowcount
