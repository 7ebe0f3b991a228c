"""Bearer-key authentication and per-key rate limiting for `/v1/*` and `/mcp` (contract §2)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.jsonio import json_response
from app.errors import AppError, RateLimited, Unauthorized, Unavailable
from app.mcp import PATH as MCP_PATH
from app.services import apikeys

PUBLIC_API_PATHS = frozenset({"/v1/audit/public-key"})


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """Token bucket per key, per process: `per_minute` requests with bursts up to the same number."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self._buckets: dict[str, _Bucket] = {}

    def check(self, key_id: str) -> float | None:
        """None when allowed; otherwise seconds until a token is available."""
        if self.per_minute <= 0:
            return None
        now = time.monotonic()
        rate = self.per_minute / 60.0
        bucket = self._buckets.get(key_id)
        if bucket is None:
            bucket = self._buckets[key_id] = _Bucket(float(self.per_minute), now)
        bucket.tokens = min(self.per_minute, bucket.tokens + (now - bucket.updated) * rate)
        bucket.updated = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return None
        return (1 - bucket.tokens) / rate


class ApiKeyAuth:
    """Resolves `Authorization: Bearer` on `/v1/*` and `/mcp` into a Principal in `scope["state"]`; 401 otherwise."""

    def __init__(self, app: ASGIApp, limiter: RateLimiter):
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        guarded = (path.startswith("/v1/") and path not in PUBLIC_API_PATHS) or path == MCP_PATH
        if scope["type"] != "http" or not guarded:
            await self.app(scope, receive, send)
            return
        try:
            principal = await self._authenticate(scope)
            retry = self.limiter.check(principal.key_id)
            if retry is not None:
                raise RateLimited("rate limit exceeded for this API key",
                                  headers={"retry-after": str(max(1, math.ceil(retry)))})
        except AppError as error:
            headers = dict(error.headers)
            if isinstance(error, Unauthorized):
                headers["www-authenticate"] = 'Bearer realm="memwarden"'
            await json_response(error.envelope(), error.status, headers)(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)

    async def _authenticate(self, scope: Scope):
        header = ""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                header = value.decode("latin-1")
                break
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("missing bearer API key (Authorization: Bearer <key>)")
        ctx = scope["app"].state.ctx
        try:
            principal = await run_in_threadpool(apikeys.authenticate, ctx, token.strip())
        except OperationalError:
            raise Unavailable("database unreachable; the request had no effect") from None
        if principal is None:
            raise Unauthorized("invalid or revoked API key")
        return principal
