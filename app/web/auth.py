"""Browser sessions: a signed cookie holding a server-side session id (revocable), loaded per request."""

from __future__ import annotations

from itsdangerous import BadSignature, TimestampSigner
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send
from urllib.parse import quote

from app.errors import Forbidden, Unauthorized
from app.services.tenancy.users import Reviewer, TenantRole, load_reviewer
from app.surfaces import BEARER_API_PREFIXES
from app.web.csrf import _cookie

COOKIE = "mw_session"
MAX_AGE = 7 * 24 * 3600


class SessionCookies:
    def __init__(self, secret_key: str):
        self._signer = TimestampSigner(secret_key, salt="memwarden.session")

    def dump(self, session_id: str) -> str:
        return self._signer.sign(session_id).decode()

    def load(self, value: str | None) -> str | None:
        if not value:
            return None
        try:
            return self._signer.unsign(value, max_age=MAX_AGE).decode()
        except BadSignature:
            return None


class WebAuth:
    """Puts the signed-in Reviewer (or None) in `scope["state"]["user"]` for browser paths."""

    def __init__(self, app: ASGIApp, cookies: SessionCookies):
        self.app = app
        self.cookies = cookies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith((*BEARER_API_PREFIXES, "/static/", "/healthz", "/readyz")):
            state = scope.setdefault("state", {})
            session_id = self.cookies.load(_cookie(scope, COOKIE))
            state["user"] = None
            if session_id:
                state["user"] = await run_in_threadpool(load_reviewer, scope["app"].state.ctx, session_id)
        await self.app(scope, receive, send)


def set_session_cookie(response: Response, request: Request, session_id: str) -> None:
    cookies: SessionCookies = request.app.state.session_cookies
    response.set_cookie(COOKIE, cookies.dump(session_id), max_age=MAX_AGE, httponly=True, samesite="lax",
                        secure=request.url.scheme == "https", path="/")


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/")


class LoginRequired(Exception):
    """Raised by `current_user` when nobody is signed in; turned into a redirect to /login."""


def current_user(request: Request) -> Reviewer:
    user = request.scope.get("state", {}).get("user")
    if user is None:
        raise LoginRequired()
    return user


def login_redirect(request: Request) -> Response:
    target = "/login?next=" + quote(request.url.path + (("?" + request.url.query) if request.url.query else ""))
    if request.headers.get("hx-request") == "true":
        return Response(status_code=401, headers={"HX-Redirect": target})
    return RedirectResponse(target, status_code=303)


def pick_tenant(request: Request, user: Reviewer, power: str) -> TenantRole:
    """The tenant a page works on: `?tenant=` (or form field) if the user has `power` there, else their first."""
    allowed = user.tenants_with(power)
    if not allowed:
        raise Forbidden(f"your roles do not allow this ({power})")
    wanted = request.query_params.get("tenant")
    if wanted:
        for role in allowed:
            if wanted in (role.tenant_id, role.tenant_name):
                return role
        raise Forbidden("you have no such role in that tenant")
    return allowed[0]


__all__ = ["WebAuth", "SessionCookies", "current_user", "pick_tenant", "LoginRequired", "login_redirect",
           "set_session_cookie", "clear_session_cookie", "Unauthorized"]
