"""Per-API-key token buckets kept in PostgreSQL, so every process and worker serving one database
enforces one limit (docs/operators/scale-out.md). The SQL is `app.repos.tenancy.rate_limits`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.repos.tenancy import rate_limits as repo

if TYPE_CHECKING:
    from app.core.access import Principal
    from app.services.runtime.context import AppContext


def take_token(ctx: AppContext, principal: Principal, per_minute: int) -> float | None:
    """None when the key may make this request; otherwise seconds until its next token."""
    with ctx.db.reader() as conn:
        tokens, allowed = repo.take_token(conn, tenant_id=principal.tenant_id, key_id=principal.key_id,
                                          per_minute=per_minute)
    return retry_after(tokens, allowed, per_minute)


def retry_after(tokens: float, allowed: bool, per_minute: int) -> float | None:
    """None when the token was taken; otherwise seconds until the bucket holds a whole one."""
    return None if allowed else (1 - tokens) / (per_minute / 60.0)


def purge_idle(ctx: AppContext) -> int:
    """Drop buckets nobody used for 10 minutes (background job); returns how many."""
    with ctx.db.reader() as conn:
        return repo.purge_idle(conn)
