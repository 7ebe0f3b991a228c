"""CSRF protection for browser requests (contract §5): a token bound to the session.

- Signed in: the token is an HMAC (keyed by the secret key) of the server-side session id. That id
  travels only inside the signed, HttpOnly `mw_session` cookie, so a token copied from another
  session, or a `mw_csrf` cookie planted from a sibling subdomain, does not validate.
- Not signed in (the login form): the token is bound to a random pre-session cookie `mw_csrf`
  (HttpOnly, SameSite=Strict). Sign-in and sign-out replace that cookie, and a signed-in browser's
  token is session-bound anyway, so no token from before sign-in works after it.
- Browsers that send Fetch Metadata: an unsafe request marked `Sec-Fetch-Site: cross-site` or
  `same-site` (a sibling subdomain) is refused whatever it carries. This is what stops a sibling
  subdomain that plants a pre-session cookie/token pair from posting the login form.

Pages embed the token; every state-changing request outside `/v1` sends it in `X-CSRF-Token`
(htmx, via `hx-headers` on `<body>`) or a `csrf_token` form field; otherwise 403.
Cookies get `Secure` when the request's scheme is https (directly, or via a trusted proxy's
X-Forwarded-Proto when `serve` runs with proxy headers).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from urllib.parse import parse_qs

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import Forbidden
from app.mcp import PATH as MCP_PATH
from app.surfaces import is_machine_path
from app.middleware import header, media_type, read_body, replay_body

COOKIE = "mw_csrf"
HEADER = b"x-csrf-token"
FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
FOREIGN_SITES = frozenset({"cross-site", "same-site"})


class CsrfTokens:
    """Tokens are HMAC-SHA256 of what they are bound to: `session:<id>` or `pre:<cookie value>`."""

    def __init__(self, secret_key: str):
        self._key = hmac.new(secret_key.encode(), b"memwarden.csrf.v2", hashlib.sha256).digest()

    def token_for(self, binding: str) -> str:
        digest = hmac.new(self._key, binding.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def valid(self, token: str | None, binding: str) -> bool:
        return bool(token) and hmac.compare_digest(token.encode("utf-8", "replace"),
                                                   self.token_for(binding).encode())


def binding_for(scope: Scope) -> tuple[str, str | None]:
    """What this request's token is bound to, and a new pre-session cookie value if one is needed."""
    user = scope.get("state", {}).get("user")
    if user is not None:
        return "session:" + user.session_id, None
    value = _cookie(scope, COOKIE)
    if value is None or len(value) < 32:
        value = secrets.token_urlsafe(32)
        return "pre:" + value, value
    return "pre:" + value, None


def presession_cookie(value: str, secure: bool) -> str:
    return f"{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")


def rotate_presession_cookie(response: Response, request: Request) -> None:
    """Replace the pre-session cookie (at sign-in and sign-out): tokens bound to the old one die."""
    response.headers.append("set-cookie", presession_cookie(secrets.token_urlsafe(32),
                                                            request.url.scheme == "https"))


def _cookie(scope: Scope, name: str) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                k, _, v = part.strip().partition("=")
                if k == name:
                    return v
    return None


class CsrfProtect:
    """Exposes `scope["state"]["csrf_token"]`, issues the pre-session cookie, refuses unsafe
    requests without a valid token. Runs inside `WebAuth`, which has put the user in the state."""

    def __init__(self, app: ASGIApp, tokens: CsrfTokens):
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Programs' paths (bearer APIs, probes, metrics) never use the cookie session: no token, no cookie.
        if scope["type"] != "http" or is_machine_path(path := scope["path"]) or path.startswith("/static/") or path == MCP_PATH:
            await self.app(scope, receive, send)
            return
        binding, new_cookie = binding_for(scope)
        scope.setdefault("state", {})["csrf_token"] = self.tokens.token_for(binding)

        if scope["method"] not in SAFE_METHODS and not _openwop_client_call(scope):
            token = header(scope, HEADER)
            if token is None:
                token, receive = await _form_token(scope, receive)
            foreign = (header(scope, b"sec-fetch-site") or "").lower() in FOREIGN_SITES
            if foreign or new_cookie is not None or not self.tokens.valid(token, binding):
                await _refuse(scope, receive, send)
                return

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start" and new_cookie is not None:
                headers = MutableHeaders(scope=message)
                headers.append("set-cookie", presession_cookie(new_cookie, scope.get("scheme") == "https"))
            await send(message)

        await self.app(scope, receive, send_with_cookie)


def _openwop_client_call(scope: Scope) -> bool:
    """An OpenWOP SDK calling an OpenWOP v2 path (`POST /runs`, …): it sends `OpenWOP-Version` and
    no cookie. Such a request cannot be forged by another site: a browser sends a custom header
    cross-origin only after a CORS preflight, which Memwarden never approves, and without a
    cookie it carries no ambient credentials. So it skips the token check and reaches the router
    (whose answer for these paths is OpenWOP's 404 `not_found`)."""
    foreign = (header(scope, b"sec-fetch-site") or "").lower() in FOREIGN_SITES
    return header(scope, b"openwop-version") is not None and header(scope, b"cookie") is None and not foreign


async def _refuse(scope: Scope, receive: Receive, send: Send) -> None:
    from app.error_responses import render_error

    error = Forbidden("missing or invalid CSRF token; reload the page and try again")
    response = render_error(Request(scope, receive), error)
    await response(scope, receive, send)


async def _form_token(scope: Scope, receive: Receive) -> tuple[str | None, Receive]:
    """Read a url-encoded form body to find `csrf_token`, then hand the same body on."""
    if media_type(scope) != "application/x-www-form-urlencoded":
        return None, receive
    body = await read_body(receive)
    values = parse_qs(body.decode("utf-8", "replace")).get(FIELD)
    return (values[0] if values else None), replay_body(body, receive)
