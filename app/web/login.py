"""Sign-in and sign-out pages. Sign-in is throttled per client address and username
(`app.services.users.sign_in`); behind a proxy, `serve --proxy-headers` makes the address the real client's."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from app.errors import RateLimited, ValidationFailed
from app.services import users
from app.web.auth import clear_session_cookie, current_user, set_session_cookie
from app.web.csrf import rotate_presession_cookie
from app.web.templating import render


def _safe_next(value: str | None) -> str:
    """Only same-site absolute paths; anything else goes to the queue (no open redirects)."""
    if value and value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/review"


async def login_page(request: Request):
    return render(request, "web/login.html", {"message": None, "username": "",
                                              "next_url": _safe_next(request.query_params.get("next"))})


async def login_submit(request: Request):
    form = await request.form()
    username, password = str(form.get("username", "")), str(form.get("password", ""))
    next_url = _safe_next(str(form.get("next", "")))
    try:
        session_id = await run_in_threadpool(users.sign_in, request.app.state.ctx, username, password,
                                             client=request.client.host if request.client else None)
    except (ValidationFailed, RateLimited) as error:
        return render(request, "web/login.html", {"message": error.message, "username": username[:users.MAX_SIGN_IN_NAME],
                                                  "next_url": next_url}, status=error.status, headers=error.headers)
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
    response = RedirectResponse("/login", status_code=303)
    clear_session_cookie(response)
    rotate_presession_cookie(response, request)
    return response


routes = [
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login_submit, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
