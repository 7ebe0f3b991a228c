"""Bearer-key authentication and per-key rate limiting for `/v1/*`, `/memorywire/v0/*` and `/mcp`
(contract §2)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.jsonio import json_response
from app.error_responses import as_app_error
from app.errors import AppError, RateLimited, Unauthorized
from app.openwop_errors import error_body
from app.mcp import PATH as MCP_PATH
from app.middleware import header
from app.observability import logs
from app.services import apikeys, rate_limits
from app.surfaces import is_bearer_api

if TYPE_CHECKING:
    from app.services.context import AppContext

PUBLIC_API_PATHS = frozenset({"/v1/audit/public-key"})


class RateLimiter:
    """Token bucket per API key, shared by every process and worker serving the same database:
    `per_minute` requests with bursts up to the same number (`app.services.rate_limits`).

    It is asked after the key is verified, so a caller without the secret cannot drain another
    key's bucket."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute

    def check(self, ctx: AppContext, principal) -> float | None:
        """None when allowed; otherwise seconds until a token is available."""
        if self.per_minute <= 0:
            return None
        return rate_limits.take_token(ctx, principal, self.per_minute)


class ApiKeyAuth:
    """Resolves `Authorization: Bearer` on `/v1/*` and `/mcp` into a Principal in `scope["state"]`; 401 otherwise."""

    def __init__(self, app: ASGIApp, limiter: RateLimiter):
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        guarded = (is_bearer_api(path) and path not in PUBLIC_API_PATHS) or path == MCP_PATH
        if scope["type"] != "http" or not guarded:
            await self.app(scope, receive, send)
            return
        try:
            principal, retry = await self._authenticate(scope)
            if retry is not None:
                raise RateLimited("rate limit exceeded for this API key",
                                  headers={"retry-after": str(max(1, math.ceil(retry)))})
        except AppError as error:
            headers = dict(error.headers)
            if isinstance(error, Unauthorized):
                headers["www-authenticate"] = 'Bearer realm="memwarden"'
            status, body = error_body(error, path)
            await json_response(body, status, headers)(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        logs.identify(tenant=principal.tenant_id, key_id=principal.key_id)
        await self.app(scope, receive, send)

    async def _authenticate(self, scope: Scope):
        scheme, _, token = (header(scope, b"authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("missing bearer API key (Authorization: Bearer <key>)")
        ctx = scope["app"].state.ctx
        try:
            principal, retry = await run_in_threadpool(self._verify_and_count, ctx, token.strip())
        except (OperationalError, PoolTimeout) as exc:  # 503: the database down, or every connection busy
            raise as_app_error(exc) from None
        if principal is None:
            raise Unauthorized("invalid or revoked API key")
        return principal, retry

    def _verify_and_count(self, ctx: AppContext, token: str):
        """The key's principal and the rate limiter's verdict, in one trip to the thread pool and
        one statement (the bucket is only touched when the secret matches)."""
        return apikeys.authenticate_and_take_token(ctx, token, per_minute=max(self.limiter.per_minute, 0))
