"""Sign-in through the OpenID provider: `/login/oidc` sends the browser to the provider with a
fresh state, nonce and PKCE challenge, remembered in a signed cookie that lives ten minutes and
only on these paths; `/login/oidc/callback` checks the provider's answer against it, redeems the
code and opens a session (`app.services.tenancy.oidc`), or shows why the person was refused."""

from __future__ import annotations

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from app.errors import AppError, Forbidden, NotFound
from app.services.tenancy import oidc
from app.services.tenancy.oidc_client import CALLBACK_PATH, OidcClient, PendingSignIn
from app.web.auth import set_session_cookie
from app.web.csrf import rotate_presession_cookie
from app.web.login import safe_next
from app.web.templating import render

COOKIE = "mw_oidc"
COOKIE_PATH = "/login/oidc"
PENDING_MAX_AGE = 600
MAX_PROVIDER_TEXT = 200


def _client(request: Request) -> OidcClient:
    client = getattr(request.app.state, "oidc", None)
    if client is None:
        raise NotFound("sign-in through an identity provider is not configured here")
    return client


def _serializer(request: Request) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(request.app.state.settings.resolved_secret_key(), salt="memwarden.oidc")


async def begin(request: Request) -> Response:
    client = _client(request)
    url, pending = await run_in_threadpool(client.begin, safe_next(request.query_params.get("next")))
    response = RedirectResponse(url, status_code=303)
    # SameSite=Lax: the provider's redirect back is a top-level GET navigation, which Lax lets through.
    response.set_cookie(COOKIE, _serializer(request).dumps(pending.to_doc()), max_age=PENDING_MAX_AGE,
                        httponly=True, samesite="lax", secure=request.url.scheme == "https", path=COOKIE_PATH)
    return response


async def callback(request: Request) -> Response:
    client = _client(request)
    params = request.query_params
    try:
        pending = _pending(request)
        if params.get("error"):
            # The provider's words, shortened: shown as text (escaped), never trusted as markup.
            detail = (params.get("error_description") or params["error"])[:MAX_PROVIDER_TEXT]
            raise Forbidden(f"the identity provider did not sign you in: {detail}")
        if not params.get("code") or not params.get("state"):
            raise Forbidden("the identity provider's answer is incomplete; start again")
        claims = await run_in_threadpool(client.finish, pending, state=params["state"], code=params["code"])
        session_id = await run_in_threadpool(oidc.sign_in_with_claims, request.app.state.ctx, issuer=client.issuer,
                                             claims=claims, client=request.client.host if request.client else None)
    except AppError as error:
        response = render(request, "web/oidc_refused.html",
                          {"message": error.message, "provider": client.provider_name,
                           "end_session_url": await run_in_threadpool(client.end_session_url)},
                          status=error.status)
        response.delete_cookie(COOKIE, path=COOKIE_PATH)
        return response
    response = RedirectResponse(pending.next_url, status_code=303)
    response.delete_cookie(COOKIE, path=COOKIE_PATH)
    set_session_cookie(response, request, session_id)
    rotate_presession_cookie(response, request)  # the pre-login token must not outlive sign-in
    return response


def _pending(request: Request) -> PendingSignIn:
    """The sign-in this browser started here (signed, not older than PENDING_MAX_AGE)."""
    raw = request.cookies.get(COOKIE)
    try:
        pending = PendingSignIn.from_doc(_serializer(request).loads(raw, max_age=PENDING_MAX_AGE)) if raw else None
    except BadSignature:
        pending = None
    if pending is None:
        raise Forbidden("this sign-in did not start here, or has expired; start again")
    return pending


routes = [
    Route(COOKIE_PATH, begin, methods=["GET"]),
    Route(CALLBACK_PATH, callback, methods=["GET"]),
]
