"""Sign-in and sign-out pages. Password sign-in is throttled per client address and username
(`app.services.tenancy.users.sign_in`); behind a proxy, `serve --proxy-headers` makes the address the real client's.
With an OpenID provider configured the page also offers it (`app.web.oidc`), or only it when local
passwords are off (`MEMWARDEN_PASSWORD_SIGN_IN=0`)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from app.errors import Forbidden, RateLimited, ValidationFailed
from app.services.tenancy import users
from app.web.auth import clear_session_cookie, current_user, set_session_cookie
from app.web.csrf import rotate_presession_cookie
from app.web.templating import render


def safe_next(value: str | None) -> str:
    """Only same-site absolute paths; anything else goes to the queue (no open redirects)."""
    if value and value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/review"


async def _page(request: Request, next_url: str, **context) -> dict:
    """What the sign-in page shows: the password form (unless turned off), the provider's button,
    and after a sign-out the way to sign out at the provider too."""
    oidc = getattr(request.app.state, "oidc", None)
    signed_out = oidc is not None and request.query_params.get("signed_out") == "1"
    return {"message": None, "username": "", "next_url": next_url,
            "passwords": request.app.state.settings.password_sign_in,
            "oidc_name": oidc.provider_name if oidc else None,
            "end_session_url": await run_in_threadpool(oidc.end_session_url) if signed_out else None, **context}


async def login_page(request: Request):
    return render(request, "web/login.html", await _page(request, safe_next(request.query_params.get("next"))))


async def login_submit(request: Request):
    form = await request.form()
    username, password = str(form.get("username", "")), str(form.get("password", ""))
    next_url = safe_next(str(form.get("next", "")))
    try:
        session_id = await run_in_threadpool(users.sign_in, request.app.state.ctx, username, password,
                                             client=request.client.host if request.client else None)
    except (ValidationFailed, RateLimited, Forbidden) as error:
        context = await _page(request, next_url, message=error.message, username=username[:users.MAX_SIGN_IN_NAME])
        return render(request, "web/login.html", context, status=error.status, headers=error.headers)
    response = RedirectResponse(next_url, status_code=303)
    set_session_cookie(response, request, session_id)
    rotate_presession_cookie(response, request)  # the pre-login token must not outlive sign-in
    return response


async def logout(request: Request):
    form = await request.form()
    user = request.scope.get("state", {}).get("user")
    if user is not None:
        await run_in_threadpool(users.sign_out, request.app.state.ctx, current_user(request),
                                everywhere=form.get("everywhere") == "1")
    # With a provider, the sign-in page then offers to sign out there too (RP-initiated logout).
    oidc = getattr(request.app.state, "oidc", None)
    response = RedirectResponse("/login?signed_out=1" if oidc else "/login", status_code=303)
    clear_session_cookie(response)
    rotate_presession_cookie(response, request)
    return response


routes = [
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login_submit, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
