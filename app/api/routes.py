"""API routes as plain data: each carries its `Operation` (scope, schemas) for checks and OpenAPI."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route

from app.api import idempotency
from app.contracts import default_contracts, unstorable_problems
from app.core.access import Principal
from app.core.ids import has_prefix
from app.errors import Forbidden, NotFound, ValidationFailed
from app.services.runtime.context import AppContext

log = logging.getLogger(__name__)

Handler = Callable[[Request, Principal], Awaitable[Response]]

ONE_HOP: set[tuple[str, str]] = set()
"""(method, path) of routes whose handler verifies the key itself, in the same thread-pool hop as
its service (`ApiRoute(one_hop=True)`): the auth middleware defers to them (`app.api.auth`)."""


@dataclass(frozen=True)
class Operation:
    """What OpenAPI says about one endpoint, and what the wrapper enforces (the scope)."""

    method: str
    path: str
    summary: str
    scope: str | None
    request: str | None = None
    responses: dict[int, str | dict[str, str | None]] = field(default_factory=dict)
    """Status → JSON schema stem, or → {media type: schema stem or None (plain text)}."""
    tag: str = "memory"
    public: bool = False
    idempotent: bool = False
    """Accepts `Idempotency-Key`: a retry replays the first answer (every write and decision)."""
    headers: tuple[str, ...] = ()
    """Request headers the endpoint reads (documented in OpenAPI, see `app.api.openapi`)."""
    reads_memory: bool = False
    """Can answer live memory content (or a workspace file's) other than what the request itself
    wrote: its service takes it from the key's read budget and records it in the read audit
    (`app.services.audit.read_budgets.account`). `tests/api/test_read_routes.py` drives every route: a
    declared one must refuse a spent budget and record what it answers; any other must never
    answer seeded content."""


async def note_key_write(ctx: AppContext, principal: Principal | None) -> None:
    """After a key's write request has committed (before its answer is sent): with read replicas,
    the key's later reads wait for a replica that has replayed it (`Database.note_key_write`).
    Nothing to do, and no thread hop, without replicas. Failing to note it does not fail the
    committed write: it is logged, and the key may read a replica that lags behind it once."""
    if principal is None or ctx.db.replicas is None:
        return
    await run_in_threadpool(note_key_write_here, ctx, principal)


def note_key_write_here(ctx: AppContext, principal: Principal | None) -> None:
    """`note_key_write` on the calling thread: for handlers already in the thread pool (one-hop)."""
    if principal is None or ctx.db.replicas is None:
        return
    try:
        ctx.db.note_key_write(principal.tenant_id, principal.key_id)
    except Exception:
        log.exception("could not note a key's write for read replicas")


class ApiRoute(Route):
    """A Starlette route that checks the caller's scope before the handler runs."""

    def __init__(self, path: str, handler: Handler, *, method: str, summary: str, scope: str | None,
                 request: str | None = None, responses: dict[int, Any] | None = None, tag: str = "memory",
                 public: bool = False, idempotent: bool | None = None, headers: tuple[str, ...] = (),
                 ids: dict[str, str] | None = None, one_hop: bool = False, reads_memory: bool = False):
        """`ids`: path parameters that only ever hold a `prefix_…` id (param → prefix). The route
        does not match other values, so `/v1/memories/recall` is the recall route's path alone
        (405 with `Allow: POST` for a GET), not a memory called "recall".

        `one_hop`: the handler is called without a principal when the auth middleware deferred the
        key's verification to it (`DEFERRED_AUTH` in the request's state): it verifies the key, checks `scope`
        and runs its service in one trip to the thread pool instead of two."""
        self.ids = dict(ids or {})
        self.reads_memory = reads_memory
        idempotent = method in {"POST", "PUT", "PATCH", "DELETE"} if idempotent is None else idempotent
        writes = method != "GET" and not (scope or "").endswith(":read")  # recall is a POST that reads
        self.operation = Operation(method, path, summary, scope, request, responses or {}, tag, public, idempotent,
                                   headers, reads_memory)

        async def endpoint(req: Request) -> Response:
            principal = req.scope.get("state", {}).get("principal")
            if one_hop and principal is None and DEFERRED_AUTH in req.scope.get("state", {}):
                return await handler(req, None)
            if not public:
                require_scope(principal, scope)
            reject_unstorable_path_params(req)
            try:
                if idempotent and principal is not None and idempotency.wants_idempotency(req):
                    return await idempotency.run_once(req, principal, ctx_of(req), handler)
                return await handler(req, principal)
            finally:  # also after an error: a failed write may have committed part of its work
                if writes:
                    await note_key_write(ctx_of(req), principal)

        endpoint.__name__ = handler.__name__
        super().__init__(path, endpoint, methods=[method])
        if one_hop:
            ONE_HOP.add((method, path))

    def matches(self, scope):
        match, child_scope = super().matches(scope)
        if match != Match.NONE and self.ids:
            params = child_scope.get("path_params", {})
            for name, prefix in self.ids.items():
                value = str(params.get(name, ""))
                # Unstorable text still reaches the endpoint, whose 422 names the parameter.
                if not has_prefix(value, prefix) and not unstorable_problems({name: value}):
                    return Match.NONE, {}
        return match, child_scope


DEFERRED_AUTH = "memwarden.authenticate"
"""`scope["state"]` key of the key verification the auth middleware left to a one-hop handler: a
callable run in the thread pool that returns the Principal or raises the refusal (401, 429, 503)."""


def require_scope(principal: Principal | None, scope: str | None) -> None:
    """403 unless an authenticated key carries `scope` (shared by `/v1` routes and MCP tools)."""
    if principal is None:  # the auth middleware guarantees one; keep the check local too
        raise Forbidden("no credentials")
    if scope and not principal.has_scope(scope):
        raise Forbidden(f"this key lacks the {scope!r} scope",
                        details=[{"path": "/", "message": f"required scope: {scope}"}])


def reject_unstorable_path_params(request: Request) -> None:
    """422 at `/<param>` for a path parameter holding NUL or a lone surrogate (which `%00` and
    friends decode to), before any handler compares it with stored text."""
    bad = unstorable_problems(dict(request.path_params))
    if bad:
        raise ValidationFailed(bad[0]["message"], details=bad)


def ctx_of(request: Request) -> AppContext:
    """The services' context; inside an idempotent request, bound to that request's transaction."""
    return request.scope.get("state", {}).get(idempotency.STATE_KEY) or request.app.state.ctx


def path_id(request: Request, param: str, prefix: str, what: str) -> str:
    """A `prefix_…` id from the URL path; anything else is simply not found (no format hints)."""
    return prefixed_id(request.path_params[param], prefix, what)


def prefixed_id(value: str, prefix: str, what: str) -> str:
    """`value` when it is a `prefix_…` id; anything else is simply not found (no format hints)."""
    if not has_prefix(value, prefix):
        raise NotFound(f"{what} not found")
    return value


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this request's path (for the `Allow` of a 405)."""
    methods: set[str] = set()
    probe = {"type": "http", "path": request.scope["path"], "method": "GET", "root_path": ""}
    for route in request.app.routes:
        if isinstance(route, Route) and route.methods and route.matches(probe)[0] != Match.NONE:
            methods |= route.methods
    return sorted(methods)


ASCII_INTEGER = re.compile(r"-?[0-9]{1,4000}")
BOOLEANS = {"true": True, "1": True, "false": False, "0": False}


def parse_query(request: Request, schema: str) -> dict[str, Any]:
    """The query string, validated against `schema` (the one query parser of every `/v1` endpoint).

    A value becomes an integer or a boolean only where the schema's property admits that type and
    the text spells one (ASCII digits; `true/false/1/0`); everything else stays a string, so a bad
    value — `3.0`, `²`, `2147483648` over a maximum, NUL — is a 422 at `/<name>` from the schema.
    Repeated keys become lists (which the schemas refuse).
    """
    contracts = default_contracts()
    types = contracts.property_types(schema)
    out: dict[str, Any] = {}
    for key, raw in request.query_params.multi_items():
        value = _coerce(raw, types.get(key, frozenset()))
        if key in out:
            out[key] = out[key] if isinstance(out[key], list) else [out[key]]
            out[key].append(value)
        else:
            out[key] = value
    return contracts.validate(schema, out)


def _coerce(raw: str, types: frozenset[str]) -> Any:
    if ("integer" in types or "number" in types) and ASCII_INTEGER.fullmatch(raw):
        return int(raw)
    if "boolean" in types and raw.lower() in BOOLEANS:
        return BOOLEANS[raw.lower()]
    return raw
