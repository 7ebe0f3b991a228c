"""API routes as plain data: each carries its `Operation` (scope, schemas) for checks and OpenAPI."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.api import idempotency
from app.core.access import Principal
from app.core.ids import has_prefix
from app.errors import Forbidden, NotFound
from app.services.context import AppContext

Handler = Callable[[Request, Principal], Awaitable[Response]]


@dataclass(frozen=True)
class Operation:
    """What OpenAPI says about one endpoint, and what the wrapper enforces (the scope)."""

    method: str
    path: str
    summary: str
    scope: str | None
    request: str | None = None
    responses: dict[int, str] = field(default_factory=dict)
    tag: str = "memory"
    public: bool = False
    idempotent: bool = False
    """Accepts `Idempotency-Key`: a retry replays the first answer (every write and decision)."""


class ApiRoute(Route):
    """A Starlette route that checks the caller's scope before the handler runs."""

    def __init__(self, path: str, handler: Handler, *, method: str, summary: str, scope: str | None,
                 request: str | None = None, responses: dict[int, str] | None = None, tag: str = "memory",
                 public: bool = False, idempotent: bool | None = None):
        idempotent = method in {"POST", "PUT", "PATCH", "DELETE"} if idempotent is None else idempotent
        self.operation = Operation(method, path, summary, scope, request, responses or {}, tag, public, idempotent)

        async def endpoint(req: Request) -> Response:
            principal = req.scope.get("state", {}).get("principal")
            if not public:
                if principal is None:  # the auth middleware guarantees one; keep the check local too
                    raise Forbidden("no credentials")
                if scope and not principal.has_scope(scope):
                    raise Forbidden(f"this key lacks the {scope!r} scope",
                                    details=[{"path": "/", "message": f"required scope: {scope}"}])
            if idempotent and principal is not None and idempotency.wants_idempotency(req):
                return await idempotency.run_once(req, principal, handler)
            return await handler(req, principal)

        endpoint.__name__ = handler.__name__
        super().__init__(path, endpoint, methods=[method])


def ctx_of(request: Request) -> AppContext:
    """The services' context; inside an idempotent request, bound to that request's transaction."""
    return request.scope.get("state", {}).get(idempotency.STATE_KEY) or request.app.state.ctx


def path_id(request: Request, param: str, prefix: str, what: str) -> str:
    """A `prefix_…` id from the URL path; anything else is simply not found (no format hints)."""
    value = request.path_params[param]
    if not has_prefix(value, prefix):
        raise NotFound(f"{what} not found")
    return value


def query_params(request: Request) -> dict[str, Any]:
    """Query string as a dict; repeated keys become lists."""
    out: dict[str, Any] = {}
    for key, value in request.query_params.multi_items():
        if key in out:
            out[key] = out[key] if isinstance(out[key], list) else [out[key]]
            out[key].append(value)
        else:
            out[key] = value
    return out
