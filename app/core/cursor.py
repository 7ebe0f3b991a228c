"""Opaque keyset-pagination cursors: (timestamp, id) as URL-safe base64 JSON."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from app.core import jsontext
from app.core.jsontext import UNSTORABLE


def pack(values: list[Any]) -> str:
    """JSON-serialisable `values` as an opaque cursor string."""
    raw = json.dumps(values, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def unpack(cursor: str) -> Any:
    """What `pack` packed; ValueError (or TypeError) for anything else."""
    return jsontext.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))


def encode_cursor(ts: datetime, item_id: str) -> str:
    return pack([ts.isoformat(), item_id])


def parse_cursor(cursor: str) -> tuple[datetime, str]:
    """The (timestamp, id) inside a cursor `encode_cursor` made; ValueError for anything else
    (`app.services.runtime.cursors.decode_cursor` answers that with a 422)."""
    try:
        ts, item_id = unpack(cursor)
        if not isinstance(item_id, str) or UNSTORABLE.search(item_id):  # a forged cursor: NUL reaches SQL
            raise ValueError("not a cursor")
        return datetime.fromisoformat(ts), item_id
    except (ValueError, TypeError):
        raise ValueError("not a cursor") from None
