"""Home page and the sign-in page."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from app.web.templating import render


async def home(request: Request):
    return render(request, "web/home.html")


routes = [Route("/", home, methods=["GET"])]

