"""Keyset-pagination cursors from clients: a forged or mangled one is a 422 at its parameter."""

from __future__ import annotations

from datetime import datetime

from app.core.cursor import parse_cursor
from app.errors import ValidationFailed


def decode_cursor(cursor: str, path: str = "/cursor") -> tuple[datetime, str]:
    """The (timestamp, id) inside a cursor this API issued; 422 at `path` for anything else."""
    try:
        return parse_cursor(cursor)
    except ValueError:
        raise ValidationFailed.at(path, "not a cursor returned by this API") from None
