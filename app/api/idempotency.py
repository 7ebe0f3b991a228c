"""`Idempotency-Key` on `/v1` writes and MCP write tools: run the action inside one transaction
that also stores its answer, or replay the answer stored by the first request (see
`app.services.runtime.idempotency`)."""

from __future__ import annotations

from typing import Awaitable, Callable, TypeVar

import anyio

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from app.core.access import Principal
from app.errors import Unavailable
from app.services.runtime import idempotency
from app.services.runtime.context import AppContext

# Where a request's unit-of-work context lives (read by `routing.ctx_of`).
STATE_KEY = "idempotent_ctx"
REPLAYED_HEADER = "Idempotent-Replayed"

T = TypeVar("T")


def wants_idempotency(request: Request) -> bool:
    return idempotency.HEADER.lower() in request.headers


async def answer_once(ctx: AppContext, tenant_id: str, key: str, request_fingerprint: bytes,
                      action: Callable[[AppContext], Awaitable[T]],
                      storable: Callable[[T], idempotency.StoredResponse | None]) -> T | idempotency.StoredResponse:
    """Run `action` at most once per (tenant, key): the first time in a transaction that also
    stores `storable(result)` (None: nothing kept, e.g. an error), afterwards return the stored
    answer instead of running it. `action` gets a context bound to that transaction.

    The transaction holds a connection while `action` awaits the thread pool, so it first takes
    one of the database's `transaction_slots`; a request that waits longer than the pool timeout
    for one is shed (503 with `Retry-After`) rather than queued behind a saturated server."""
    slots = ctx.db.transaction_slots
    try:
        with anyio.fail_after(ctx.settings.db_pool_timeout_seconds):
            await slots.acquire()
    except TimeoutError:
        raise Unavailable("the server is busy; retry shortly", headers={"Retry-After": "1"}) from None
    try:
        return await _answer_in_unit(ctx, tenant_id, key, request_fingerprint, action, storable)
    finally:
        slots.release()


async def _answer_in_unit(ctx: AppContext, tenant_id: str, key: str, request_fingerprint: bytes,
                          action: Callable[[AppContext], Awaitable[T]],
                          storable: Callable[[T], idempotency.StoredResponse | None]) -> T | idempotency.StoredResponse:
    unit = await run_in_threadpool(ctx.db.unit_of_work)
    try:
        stored = await run_in_threadpool(idempotency.claim, unit.connection, tenant_id, key, request_fingerprint)
        if stored is not None:
            await run_in_threadpool(unit.rollback)
            return stored
        result = await action(ctx.with_database(unit.database))
        answer = storable(result)
        if answer is not None:
            await run_in_threadpool(idempotency.store, unit.connection, tenant_id, key, request_fingerprint, answer)
        await run_in_threadpool(unit.commit)
        return result
    except BaseException:
        with anyio.CancelScope(shield=True):  # even a cancelled request gives its connection back
            await run_in_threadpool(unit.rollback)
        raise


async def run_once(request: Request, principal: Principal, ctx: AppContext,
                   handler: Callable[[Request, Principal], Awaitable[Response]]) -> Response:
    """Answer a `/v1` request at most once per key: the first time by running `handler` in a
    transaction that stores its 2xx answer, afterwards by replaying that answer. `handler` finds
    the context bound to that transaction under `STATE_KEY` in the request's state."""
    key = idempotency.validate_key(request.headers[idempotency.HEADER])
    request_fingerprint = idempotency.fingerprint(
        method=request.method, path=request.url.path, query=request.url.query, api_key_id=principal.key_id,
        body=await request.body())

    async def handle(bound: AppContext) -> Response:
        request.scope.setdefault("state", {})[STATE_KEY] = bound
        try:
            return await handler(request, principal)
        finally:
            request.scope["state"].pop(STATE_KEY, None)

    result = await answer_once(ctx, principal.tenant_id, key, request_fingerprint, handle, _storable)
    return _replay(result) if isinstance(result, idempotency.StoredResponse) else result


def _storable(response: Response) -> idempotency.StoredResponse | None:
    body = getattr(response, "body", None)
    if 200 <= response.status_code < 300 and isinstance(body, bytes):
        return idempotency.StoredResponse.from_parts(response.status_code, response.raw_headers, body)
    return None


def _replay(stored: idempotency.StoredResponse) -> Response:
    response = Response(stored.body, status_code=stored.status_code)
    for name, value in stored.headers:
        response.headers.append(name, value)
    response.headers[REPLAYED_HEADER] = "true"
    return response
