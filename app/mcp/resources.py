"""Recall as MCP resources (memorywire's "memory as MCP resource" mode).

A client that reads context as resources rather than calling tools reads
`memwarden://recall?agent_id=support-1&query=how+to+reach+Ada&k=3`: the query string holds the
`recall` tool's arguments (repeat `types` / `tags` for several), the contents are the same JSON
the tool returns. The resource template advertises the URI; the arguments are validated against
`recall.request` like the tool's, and the call needs the same scope.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from app.errors import NotFound, ValidationFailed
from app.mcp.schemas import input_schema

SCHEME, RECALL = "memwarden", "recall"
RECALL_TEMPLATE = f"{SCHEME}://{RECALL}{{?agent_id,query,user_id,k}}"
RECALL_DESCRIPTION = (
    "Recall as a resource: the recall tool's JSON for the arguments in the query string "
    "(agent_id and query required; also user_id, k, types, tags, fresher_than_days, min_score, "
    "fusion, as_of; repeat types or tags for several).")
MAX_URI = 16_384


def recall_arguments(uri: str) -> dict[str, Any]:
    """The recall request a `memwarden://recall?...` URI asks for (typed as `recall.request` says);
    NotFound for any other URI, ValidationFailed for a parameter recall does not take."""
    if len(uri) > MAX_URI:
        raise ValidationFailed.at("/uri", f"the URI is longer than {MAX_URI} characters")
    parts = urlsplit(uri)
    if parts.scheme != SCHEME or parts.netloc != RECALL or parts.path not in ("", "/"):
        raise NotFound(f"no resource at {uri[:200]!r}",
                       details=[{"path": "/uri", "message": f"resources: {SCHEME}://{RECALL}?agent_id=…&query=…"}])
    properties = input_schema("recall.request")["properties"]  # references inlined: every type is visible
    arguments: dict[str, Any] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        spec = properties.get(name)
        if spec is None:
            raise ValidationFailed.at(f"/{name}", f"recall takes no parameter {name[:64]!r}")
        if spec.get("type") == "array":
            arguments.setdefault(name, []).append(value)
        elif name in arguments:
            raise ValidationFailed.at(f"/{name}", f"{name} is given more than once")
        else:
            arguments[name] = _typed(name, value, spec.get("type"))
    return arguments


def _typed(name: str, value: str, kind: str | None) -> Any:
    """A query-string value as the schema's scalar type (the schema then checks its range)."""
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            number = float(value)
            if math.isfinite(number):
                return number
            raise ValueError
    except ValueError:
        raise ValidationFailed.at(f"/{name}", f"{name} must be a {kind}") from None
    return value
