"""`json.loads` for text that came from outside (agents, forms, files, cursors).

Python's parser recurses once per nesting level, so a few thousand `[` raise RecursionError,
which no caller expects and which became 500s and CLI tracebacks. Here that is malformed JSON
like any other: a `json.JSONDecodeError`, hence a `ValueError`.
"""

from __future__ import annotations

import json
import re
from typing import Any

# What PostgreSQL text and UTF-8 cannot hold: NUL and lone surrogates (JSON's `\u0000`, `\ud800`).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`, raising JSONDecodeError for JSON nested too deeply to parse."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("JSON nested too deeply", text if isinstance(text, str) else "", 0) from None


def pointer_segment(key: Any) -> str:
    """One JSON Pointer (RFC 6901) reference token: `~` as `~0`, `/` as `~1`."""
    return str(key).replace("~", "~0").replace("/", "~1")
