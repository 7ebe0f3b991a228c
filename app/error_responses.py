"""The one error path: JSON envelope under `/v1` (or when JSON is asked for), an HTMX fragment
for htmx requests, a full page otherwise.

Wiring, beside `main` and `middleware`: the app's exception handler, the middleware and the MCP
tools all answer errors through it, so it lives above `api` and `web`, not inside either."""

from __future__ import annotations

import logging

from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from app.api.jsonio import json_response
from app.errors import AppError, MethodNotAllowed, NotFound, Unavailable
from app.openwop_errors import error_body
from app.surfaces import is_machine_path

log = logging.getLogger(__name__)


def as_app_error(exc: Exception) -> AppError:
    """Map any exception to the AppError the client should see."""
    if isinstance(exc, AppError):
        return exc
    if isinstance(exc, HTTPException):
        if exc.status_code == 404:
            return NotFound("no such resource")
        if exc.status_code == 405:
            return MethodNotAllowed("method not allowed on this resource", headers=dict(exc.headers or {}))
        error = AppError(str(exc.detail))
        error.status = exc.status_code
        error.code = "bad_request" if 400 <= exc.status_code < 500 else "internal_error"
        return error
    if isinstance(exc, OperationalError):
        return Unavailable("database unreachable; the request had no effect")
    if isinstance(exc, PoolTimeout):  # every pooled connection busy past the pool timeout: shed load
        return Unavailable("the server is busy; the request had no effect, retry shortly",
                           headers={"Retry-After": "1"})
    log.exception("unhandled error", exc_info=exc)
    return AppError("internal error; it has been logged")


def wants_json(request: Request) -> bool:
    path = request.url.path
    if is_machine_path(path):
        return True
    if "openwop-version" in request.headers:  # an OpenWOP client reads JSON errors wherever it calls
        return True
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def render_error(request: Request, exc: Exception) -> Response:
    error = as_app_error(exc)
    if error.status == 405:  # Starlette names only the first matching route's methods
        from app.api.routes import allowed_methods

        error.headers["Allow"] = ", ".join(allowed_methods(request)) or error.headers.get("Allow", "")
    if wants_json(request):
        status, body = error_body(error, request.url.path, request.headers.get("openwop-version"))
        return json_response(body, status, error.headers)
    from app.web.templating import is_htmx, render

    template = "errors/_error.html" if is_htmx(request) else "errors/error.html"
    headers = dict(error.headers)
    if is_htmx(request):
        # Swap the error into the page's message area rather than the request's target.
        headers.update({"HX-Retarget": "#flash", "HX-Reswap": "innerHTML"})
    return render(request, template, {"error": error}, status=error.status, headers=headers)


async def handle_exception(request: Request, exc: Exception) -> Response:
    return render_error(request, exc)
