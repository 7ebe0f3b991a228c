"""Jinja2 environment: autoescape always on (memory content is hostile), asset URLs, CSRF token."""

from __future__ import annotations

import json
from urllib.parse import urlencode
from functools import cache

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from app import __version__
from app.paths import TEMPLATES_DIR


@cache
def templates() -> Jinja2Templates:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["app_version"] = __version__
    # Readable JSON as plain text; autoescape then makes it inert (unlike `tojson`, which is for
    # embedding in scripts/attributes and shows \u003c escapes to people).
    env.filters["pretty_json"] = lambda value, indent=2: json.dumps(value, indent=indent, ensure_ascii=False,
                                                                     sort_keys=True)
    return Jinja2Templates(env=env)


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def render(request: Request, name: str, context: dict | None = None, status: int = 200,
           headers: dict[str, str] | None = None) -> HTMLResponse:
    """Render `name` with the request, its CSRF token and the signed-in user (if any) in context."""
    state = request.scope.get("state", {})
    ctx = {
        "csrf_token": state.get("csrf_token", ""),
        "user": state.get("user"),
        "is_htmx": is_htmx(request),
        **(context or {}),
    }
    return templates().TemplateResponse(request, name, ctx, status_code=status, headers=headers)


def tenant_query(tenant_name: str, shown: dict[str, str], **extra: str) -> str:
    """A page's query string: its tenant, the filters shown, and any non-empty extras (cursors)."""
    return urlencode({"tenant": tenant_name, **shown, **{k: v for k, v in extra.items() if v}})
