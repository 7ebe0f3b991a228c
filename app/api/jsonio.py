"""Reading JSON request bodies safely and writing JSON responses.

Every way a body can be bad (wrong media type, invalid UTF-8, malformed JSON, duplicate keys,
NaN or overflowing numbers, NUL or lone surrogates in any string or key, nesting deeper than
`MAX_DEPTH`) becomes a 4xx in the contract's envelope, with the JSON path of the bad value.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from app.contracts import default_contracts, unstorable_problems
from app.errors import UnsupportedMediaType, ValidationFailed

MAX_DEPTH = 32


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(key)
        obj[key] = value
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json_bytes(raw: bytes) -> Any:
    """Decode strict UTF-8 JSON; raise ValidationFailed (422) describing what is wrong."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationFailed.at("/", f"body is not valid UTF-8 (byte {exc.start})") from None
    if not text.strip():
        raise ValidationFailed.at("/", "body is empty; a JSON object is required")
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except _DuplicateKey as exc:
        raise ValidationFailed.at("/", f"duplicate key {str(exc)[:60]!r} in JSON object") from None
    except RecursionError:
        raise ValidationFailed.at("/", f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise ValidationFailed.at("/", f"malformed JSON: {str(exc)[:200]}") from None
    if _depth_exceeds(value, MAX_DEPTH):
        raise ValidationFailed.at("/", f"JSON nested deeper than {MAX_DEPTH} levels")
    problems = unstorable_problems(value)
    if problems:
        raise ValidationFailed(problems[0]["message"] if len(problems) == 1 else
                               f"{len(problems)} problems in the request", details=problems)
    return value


def _depth_exceeds(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return False


async def read_json(request: Request, schema: str | None = None) -> Any:
    """The request's JSON body, validated against `schema` when given."""
    return json_body(request.headers.get("content-type", ""), await request.body(), schema)


def json_body(content_type: str, raw: bytes, schema: str | None = None) -> Any:
    """A JSON body already read (`raw`, sent as `content_type`), validated against `schema` when
    given: `read_json` for a handler that parses in the thread pool."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        raise UnsupportedMediaType(
            "request body must be JSON (Content-Type: application/json)",
            details=[{"path": "/", "message": f"got content type {content_type[:80]!r}"}],
        )
    value = parse_json_bytes(raw)
    if schema is not None:
        default_contracts().validate(schema, value)
    return value


class JSON(JSONResponse):
    """Compact UTF-8 JSON, never cached."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def json_response(content: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSON:
    return JSON(content, status_code=status, headers=headers)
