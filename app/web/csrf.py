"""CSRF protection for browser requests (contract §5): a signed double-submit token.

The browser holds a random value in the `mw_csrf` cookie (HttpOnly, SameSite=Strict); pages embed
a token that is that value signed with the secret key. Every state-changing request outside
`/v1` must send the token in `X-CSRF-Token` (htmx, via `hx-headers` on `<body>`) or in a
`csrf_token` form field; otherwise 403.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import parse_qs

from itsdangerous import BadSignature, URLSafeSerializer
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import Forbidden

COOKIE = "mw_csrf"
HEADER = b"x-csrf-token"
FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class CsrfTokens:
    def __init__(self, secret_key: str):
        self._signer = URLSafeSerializer(secret_key, salt="memwarden.csrf")

    def token_for(self, cookie_value: str) -> str:
        return self._signer.dumps(cookie_value)

    def valid(self, token: str | None, cookie_value: str | None) -> bool:
        if not token or not cookie_value:
            return False
        try:
            value = self._signer.loads(token)
        except BadSignature:
            return False
        return isinstance(value, str) and hmac.compare_digest(value, cookie_value)


def _cookie(scope: Scope, name: str) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                k, _, v = part.strip().partition("=")
                if k == name:
                    return v
    return None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


class CsrfProtect:
    """Issues the cookie, exposes `scope["state"]["csrf_token"]`, refuses unsafe requests without a token."""

    def __init__(self, app: ASGIApp, tokens: CsrfTokens, *, secure_cookie: bool = False):
        self.app = app
        self.tokens = tokens
        self.secure_cookie = secure_cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(("/v1/", "/static/")):
            await self.app(scope, receive, send)
            return
        cookie_value = _cookie(scope, COOKIE)
        new_cookie = cookie_value is None or len(cookie_value) < 32
        if new_cookie:
            cookie_value = secrets.token_urlsafe(32)
        scope.setdefault("state", {})["csrf_token"] = self.tokens.token_for(cookie_value)

        if scope["method"] not in SAFE_METHODS:
            token = _header(scope, HEADER)
            if token is None:
                token, receive = await _form_token(scope, receive)
            if new_cookie or not self.tokens.valid(token, cookie_value):
                from app.web.errors import render_error
                from starlette.requests import Request

                error = Forbidden("missing or invalid CSRF token; reload the page and try again")
                response = render_error(Request(scope, receive), error)
                await response(scope, receive, send)
                return

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start" and new_cookie:
                headers = MutableHeaders(scope=message)
                flags = "Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if self.secure_cookie else "")
                headers.append("set-cookie", f"{COOKIE}={cookie_value}; {flags}")
            await send(message)

        await self.app(scope, receive, send_with_cookie)


async def _form_token(scope: Scope, receive: Receive) -> tuple[str | None, Receive]:
    """Read a url-encoded form body to find `csrf_token`, then hand the same body on."""
    content_type = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        return None, receive
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(chunks)
    values = parse_qs(body.decode("utf-8", "replace")).get(FIELD)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return (values[0] if values else None), replay
