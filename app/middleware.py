"""Pure ASGI middleware: security headers on every response, a last-resort error boundary, and a
hard request-body limit."""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl

import anyio

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.jsonio import json_response
from app.contracts import UNSTORABLE, unstorable_problems
from app.errors import AppError, PayloadTooLarge, ValidationFailed
from app.openwop_errors import error_body
from app.surfaces import is_bearer_api

log = logging.getLogger(__name__)

CSP = "; ".join([
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
])
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=()",
}


_STATIC_DEFAULTS = tuple((name.encode("latin-1"), value.encode("latin-1")) for name, value in SECURITY_HEADERS.items())
_DEFAULTS = (*_STATIC_DEFAULTS, (b"cache-control", b"no-store"))
"""Each header a response gets unless it set its own (static files may be cached)."""


class SecurityHeaders:
    """Adds CSP and the usual hardening headers; API and HTML responses are never cached."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        defaults = _STATIC_DEFAULTS if scope["path"].startswith("/static/") else _DEFAULTS

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                raw = headers.raw  # one pass over the response's names, not one per default
                present = {name for name, _ in raw}
                raw.extend(pair for pair in defaults if pair[0] not in present)
                if defaults is _DEFAULTS:
                    headers.add_vary_header("HX-Request")
            await send(message)

        await self.app(scope, receive, send_with_headers)


class TrackedSend:
    """`send` that notes when the response has started: after that no other answer can be sent."""

    def __init__(self, send: Send):
        self.send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self.send(message)


class ErrorBoundary:
    """Turns any exception that escapes the app into a complete 500 response (or the error's own
    status) carrying `Connection: close`, inside `SecurityHeaders`.

    Starlette's own `ServerErrorMiddleware` sits outside all user middleware and re-raises after
    answering, so its 500s had no security headers and uvicorn then dropped the keep-alive
    connection without saying so. Here the exception is logged and answered, and never reaches the
    server. An exception after the response started cannot be answered: it is re-raised so the
    server cuts the connection and the client sees a truncated response, not a complete one.
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        tracked = TrackedSend(send)
        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            if tracked.started:
                raise
            await _error_response(scope, exc)(scope, receive, send)


class RejectUnstorableInput:
    """A page request whose path, query string or url-encoded form holds NUL is a 422 before any
    handler runs: PostgreSQL can neither store nor compare NUL, and page handlers pass filters and
    form fields straight to SQL. (`/v1` validates each parameter itself, after authentication,
    naming the field.) Sits inside `BodyLimit`, so the form it reads is already bounded."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_bearer_api(scope["path"]):
            await self.app(scope, receive, send)
            return
        fields = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if media_type(scope) == "application/x-www-form-urlencoded":
            body = await read_body(receive)
            fields += parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
            receive = replay_body(body, receive)
        problems = [problem for key, value in fields for problem in unstorable_problems({key: value})]
        if UNSTORABLE.search(scope["path"]):
            problems.append({"path": "/", "message": "the URL path contains a NUL character"})
        if problems:
            error = ValidationFailed("the request contains a NUL character", details=problems)
            await _error_response(scope, error)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of request header `name` (lower-case bytes), or None."""
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def media_type(scope: Scope) -> str:
    """The request's Content-Type without parameters, lower-cased ("" when absent)."""
    return (header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()


async def read_body(receive: Receive) -> bytes:
    """The whole request body, read from the channel (hand it on with `replay_body`)."""
    chunks, more = [], True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


def replay_body(body: bytes, receive: Receive) -> Receive:
    """The body already read, then the real channel (which reports the client's disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _error_response(scope: Scope, exc: Exception):
    from starlette.requests import Request

    from app.error_responses import render_error

    try:
        response = render_error(Request(scope), exc)
    except Exception:  # the error page itself failed: answer with the bare envelope
        log.exception("rendering the error response failed")
        error = AppError("internal error; it has been logged")
        status, body = error_body(error, scope.get("path", ""))
        response = json_response(body, status)
    if response.status_code >= 500:
        response.headers["connection"] = "close"
    return response


class BodyTooLarge(Exception):
    pass


class BodyLimit:
    """Refuses bodies over `max_bytes` with 413 before the handler reads them (by Content-Length,
    and while streaming for chunked bodies)."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            # A client waiting for `100 Continue` has sent nothing yet: answer without reading.
            unread = (header(scope, b"expect") or "").lower() != "100-continue"
            await self._reject(scope, receive, send, unread=unread)
            return
        seen, body_done = 0, False

        async def limited_receive() -> Message:
            nonlocal seen, body_done
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                body_done = not message.get("more_body", False)
                if seen > self.max_bytes:
                    raise BodyTooLarge()
            return message

        tracked = TrackedSend(send)
        try:
            await self.app(scope, limited_receive, tracked)
        except BodyTooLarge:
            if not tracked.started:
                await self._reject(scope, receive, send, unread=not body_done)

    async def _reject(self, scope: Scope, receive: Receive, send: Send, *, unread: bool) -> None:
        """413 in the envelope, after reading (and dropping) what the client is still sending: a
        client that has not finished writing its body when the server closes the connection gets
        a reset and never reads the answer. Reading stops at `DRAIN_LIMIT_BYTES` or after
        `DRAIN_SECONDS`, so a client cannot hold the connection by sending forever."""
        if unread:
            await _discard_body(receive)
        error = PayloadTooLarge(f"request body exceeds {self.max_bytes} bytes")
        status, body = error_body(error, scope.get("path", ""), header(scope, b"openwop-version"))
        response = json_response(body, status=status, headers={"connection": "close"})
        await response(scope, receive, send)


DRAIN_LIMIT_BYTES = 64 * 1024 * 1024
DRAIN_SECONDS = 10


async def _discard_body(receive: Receive) -> None:
    """Read the rest of the request body and drop it (bounded in bytes and time)."""
    discarded = 0
    with anyio.move_on_after(DRAIN_SECONDS):
        while discarded <= DRAIN_LIMIT_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                return
            discarded += len(message.get("body", b""))
            if not message.get("more_body", False):
                return


def _content_length(scope: Scope) -> int | None:
    value = header(scope, b"content-length")
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
