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
from app.api.routes import DEFERRED_AUTH, ONE_HOP
from app.services.runtime.idempotency import HEADER as IDEMPOTENCY_KEY
from app.error_responses import as_app_error
from app.errors import AppError, RateLimited, Unauthorized
from app.openwop_errors import error_body
from app.mcp import PATH as MCP_PATH
from app.middleware import header
from app.observability import logs
from app.services.tenancy import apikeys, rate_limits
from app.surfaces import is_bearer_api

if TYPE_CHECKING:
    from app.services.runtime.context import AppContext

PUBLIC_API_PATHS = frozenset({"/v1/audit/public-key"})


class RateLimiter:
    """Token bucket per API key, shared by every process and worker serving the same database:
    `per_minute` requests with bursts up to the same number (`app.services.tenancy.rate_limits`).

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
            token = _bearer_token(scope)
            if _defers(scope, path):
                # The route verifies the key in its own thread-pool hop (`verify`), with its service.
                scope.setdefault("state", {})[DEFERRED_AUTH] = DeferredAuth(self, scope, token)
            else:
                self._admit(scope, *await self._authenticate(scope, token))
        except AppError as error:
            await refusal_response(error, path)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _authenticate(self, scope: Scope, token: str):
        ctx = scope["app"].state.ctx
        try:
            return await run_in_threadpool(self._verify_and_count, ctx, token)
        except (OperationalError, PoolTimeout) as exc:  # 503: the database down, or every connection busy
            raise as_app_error(exc) from None

    def verify(self, scope: Scope, token: str):
        """The key's principal, verified and counted here in the thread pool, for a one-hop route
        (`app.api.routes.ONE_HOP`); a refusal raises `Refusal`, whose `refusal_response` is the
        answer the middleware itself gives."""
        try:
            try:
                principal, retry = self._verify_and_count(scope["app"].state.ctx, token)
            except (OperationalError, PoolTimeout) as exc:
                raise as_app_error(exc) from None
            return self._admit(scope, principal, retry)
        except AppError as error:
            raise Refusal(error) from None

    @staticmethod
    def _admit(scope: Scope, principal, retry: float | None):
        """The principal, named in the request's state and log lines, unless refused (401, 429)."""
        if principal is None:
            raise Unauthorized("invalid or revoked API key")
        if retry is not None:
            raise RateLimited("rate limit exceeded for this API key",
                              headers={"retry-after": str(max(1, math.ceil(retry)))})
        scope.setdefault("state", {})["principal"] = principal
        logs.identify(tenant=principal.tenant_id, key_id=principal.key_id)
        return principal

    def _verify_and_count(self, ctx: AppContext, token: str):
        """The key's principal and the rate limiter's verdict, in one trip to the thread pool and
        one statement (the bucket is only touched when the secret matches)."""
        return apikeys.authenticate_and_take_token(ctx, token, per_minute=max(self.limiter.per_minute, 0))


class DeferredAuth:
    """The key verification a one-hop route runs itself (`DEFERRED_AUTH` in the request's state):
    call it in the thread pool for the Principal (or the refusal); `token` is the bearer token,
    for what may start before the check (`app.services.memory.early_embedding`)."""

    __slots__ = ("auth", "scope", "token")

    def __init__(self, auth: ApiKeyAuth, scope: Scope, token: str):
        self.auth, self.scope, self.token = auth, scope, token

    def __call__(self):
        return self.auth.verify(self.scope, self.token)


class Refusal(Exception):
    """A deferred key verification refused the request (`error`: 401, 429 or 503)."""

    def __init__(self, error: AppError):
        super().__init__(error.message)
        self.error = error


def refusal_response(error: AppError, path: str):
    """What a refused key gets: the error's envelope, with `WWW-Authenticate` on a 401."""
    headers = dict(error.headers)
    if isinstance(error, Unauthorized):
        headers["www-authenticate"] = 'Bearer realm="memwarden"'
    status, body = error_body(error, path)
    return json_response(body, status, headers)


def _bearer_token(scope: Scope) -> str:
    scheme, _, token = (header(scope, b"authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer API key (Authorization: Bearer <key>)")
    return token.strip()


def _defers(scope: Scope, path: str) -> bool:
    """Whether the route verifies the key itself (a one-hop route, without `Idempotency-Key`:
    an idempotent replay needs the principal before its handler runs)."""
    return (scope.get("method", ""), path) in ONE_HOP and header(scope, IDEMPOTENCY_KEY.lower().encode()) is None
