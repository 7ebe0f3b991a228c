"""Jinja2 environment: autoescape always on (memory content is hostile), asset URLs, CSRF token,
the navigation a user's roles allow, and filters that show hostile text safely."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode
from functools import cache

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from app import __version__
from app.core.diff import reveal_hidden
from app.core.durations import human_age
from app.core.screening.flags import SEVERITIES, level_rank
from app.paths import TEMPLATES_DIR
from app.web import flag_text

#: Top-level pages and the role power each needs in at least one tenant (the handlers enforce the same).
PAGES = (
    ("/review", "Review", "read", "pending memory changes, each diffed against live memory."),
    ("/memories", "Memories", "read", "browse and search what agents remember."),
    ("/audit", "Audit", "audit", "verify and export the signed, hash-chained log."),
    ("/admin", "Admin", "admin", "users, API keys, policies and redaction."),
)
PREVIEW_CHARS = 120


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
    env.filters["reveal"] = reveal
    env.filters["preview"] = preview
    env.filters["label"] = label
    env.globals["risk_of"] = risk_of
    env.globals["flag_explanation"] = flag_text.explanation
    env.globals["flag_summary"] = flag_text.summary
    env.filters["age"] = age
    env.globals["overdue_by"] = overdue_by
    return Jinja2Templates(env=env)


def reveal(text: object) -> Markup:
    """Text escaped, with each hidden character (zero-width, bidi override, tag character…) replaced by a
    visible marker such as ⟨ZWSP⟩ or ⟨U+202E⟩. Escaping happens piece by piece before marking, so the
    result is safe HTML whatever the text holds."""
    parts = []
    for piece, marker in reveal_hidden("" if text is None else str(text)):
        if marker is None:
            parts.append(str(escape(piece)))
        else:
            code_points = " ".join(f"U+{ord(c):04X}" for c in piece[:8])
            parts.append(f'<mark class="hidden-char" data-testid="hidden-char" title="hidden character '
                         f'{escape(code_points)}">{escape(marker)}</mark>')
    return Markup("".join(parts))


def preview(text: object, limit: int = PREVIEW_CHARS) -> Markup:
    """The first non-blank line of `text`, cut to `limit` characters (… when cut), hidden characters revealed."""
    lines = str(text or "").splitlines()
    first = next((line for line in lines if line.strip()), "").strip()
    cut = len(first) > limit or len([line for line in lines if line.strip()]) > 1
    return reveal(first[:limit]) + (Markup("…") if cut else Markup(""))


def label(text: object, limit: int = 80) -> str:
    """`text` as one line of plain text for elements that hold no markup (an <option>): whitespace
    runs folded, hidden characters written as their markers, cut to `limit` (… when cut). Plain
    text: autoescape escapes it where it is shown."""
    flat = " ".join(str(text or "").split())
    shown = "".join(marker or piece for piece, marker in reveal_hidden(flat))
    return shown[:limit] + ("…" if len(shown) > limit else "")


def age(then: datetime, now: datetime) -> str:
    """How long ago `then` was, to a reviewer's precision: 40 s, 12 min, 5 h, 3 d."""
    return human_age((now - then).total_seconds())


def overdue_by(submitted_at: datetime, sla_seconds: int, now: datetime) -> str:
    """How far past the review SLA a change waiting since `submitted_at` is ("" when within it or
    without an SLA)."""
    if not sla_seconds:
        return ""
    due = submitted_at + timedelta(seconds=sla_seconds)
    return age(due, now) if due < now else ""


def risk_of(change: Any) -> dict[str, Any]:
    """A change's risk flags, highest severity first, and its risk level (None when screening raised
    nothing, as for changes staged before screening existed)."""
    flags = [f for f in (change.risk_flags or []) if isinstance(f, dict) and f.get("name")]
    flags.sort(key=lambda f: (-_severity_rank(f.get("severity")), str(f["name"])))
    level = change.risk_level if change.risk_level in SEVERITIES else None
    return {"flags": flags, "level": level, "names": [str(f["name"]) for f in flags]}


def _severity_rank(severity: Any) -> int:
    return level_rank(severity) if severity in SEVERITIES else 0


def nav_links(user: Any) -> list[dict[str, str]]:
    """The top-level pages this user may open: each needs its power in at least one of their tenants."""
    if user is None:
        return []
    return [{"href": href, "label": label, "about": about}
            for href, label, power, about in PAGES if user.tenants_with(power)]


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def render(request: Request, name: str, context: dict | None = None, status: int = 200,
           headers: dict[str, str] | None = None) -> HTMLResponse:
    """Render `name` with the request, its CSRF token and the signed-in user (if any) in context."""
    state = request.scope.get("state", {})
    ctx = {
        "csrf_token": state.get("csrf_token", ""),
        "user": state.get("user"),
        "nav": nav_links(state.get("user")),
        "current_path": request.url.path,
        "is_htmx": is_htmx(request),
        **(context or {}),
    }
    return templates().TemplateResponse(request, name, ctx, status_code=status, headers=headers)


def tenant_query(tenant_name: str, shown: dict[str, str], **extra: str) -> str:
    """A page's query string: its tenant, the filters shown, and any non-empty extras (cursors)."""
    return urlencode({"tenant": tenant_name, **shown, **{k: v for k, v in extra.items() if v}})
