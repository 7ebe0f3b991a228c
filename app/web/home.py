"""Home page and the favicon."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from app.web.templating import render


async def home(request: Request):
    return render(request, "web/home.html")


async def favicon(request: Request):
    """Browsers that ignore `<link rel=icon>` ask for /favicon.ico; point them at the SVG."""
    return RedirectResponse("/static/favicon.svg", status_code=301)


routes = [Route("/", home, methods=["GET"]), Route("/favicon.ico", favicon, methods=["GET"])]

