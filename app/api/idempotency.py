"""`Idempotency-Key` on `/v1` writes: run the handler inside one transaction that also stores
its answer, or replay the answer stored by the first request (see `app.services.idempotency`)."""

from __future__ import annotations

from typing import Awaitable, Callable

import anyio

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from app.core.access import Principal
from app.services import idempotency

# Where a request's unit-of-work context lives (read by `routing.ctx_of`).
STATE_KEY = "idempotent_ctx"
REPLAYED_HEADER = "Idempotent-Replayed"


def wants_idempotency(request: Request) -> bool:
    return idempotency.HEADER.lower() in request.headers


async def run_once(request: Request, principal: Principal,
                   handler: Callable[[Request, Principal], Awaitable[Response]]) -> Response:
    """Answer `request` at most once per key: the first time by running `handler` in a transaction
    that stores its 2xx answer, afterwards by replaying that answer."""
    from app.api.routing import ctx_of

    key = idempotency.validate_key(request.headers[idempotency.HEADER])
    request_fingerprint = idempotency.fingerprint(
        method=request.method, path=request.url.path, query=request.url.query, api_key_id=principal.key_id,
        body=await request.body())
    ctx = ctx_of(request)
    unit = await run_in_threadpool(ctx.db.unit_of_work)
    try:
        stored = await run_in_threadpool(idempotency.claim, unit.connection, principal.tenant_id, key,
                                         request_fingerprint)
        if stored is not None:
            await run_in_threadpool(unit.rollback)
            return _replay(stored)
        request.scope.setdefault("state", {})[STATE_KEY] = ctx.with_database(unit.database)
        try:
            response = await handler(request, principal)
        finally:
            request.scope["state"].pop(STATE_KEY, None)
        body = getattr(response, "body", None)
        if 200 <= response.status_code < 300 and isinstance(body, bytes):
            answer = idempotency.StoredResponse.from_parts(response.status_code, response.raw_headers, body)
            await run_in_threadpool(idempotency.store, unit.connection, principal.tenant_id, key,
                                    request_fingerprint, answer)
        await run_in_threadpool(unit.commit)
        return response
    except BaseException:
        with anyio.CancelScope(shield=True):  # even a cancelled request gives its connection back
            await run_in_threadpool(unit.rollback)
        raise


def _replay(stored: idempotency.StoredResponse) -> Response:
    response = Response(stored.body, status_code=stored.status_code)
    for name, value in stored.headers:
        response.headers.append(name, value)
    response.headers[REPLAYED_HEADER] = "true"
    return response
