"""Durations as operators write them (`30m`, `4h`, `2d`) and as people read them (`5 h`)."""

from __future__ import annotations

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> int:
    """Seconds in a duration such as `30m`, `4h`, `2d` (units s, m, h, d; a bare number is
    seconds); `0` or `off` is 0, meaning none. Raises ValueError on anything else."""
    value = text.strip().lower()
    if value in ("0", "off", "none", ""):
        return 0
    unit = _UNITS.get(value[-1])
    number = value[:-1] if unit else value
    if not (number.isascii() and number.isdigit()) or len(number) > 9:
        raise ValueError(f"not a duration: {text[:40]!r} (use e.g. 30m, 4h, 2d, or off)")
    return int(number) * (unit or 1)


def format_duration(seconds: int) -> str:
    """The shortest exact spelling `parse_duration` reads back: 4h, 90m, 2d; `off` for 0."""
    if not seconds:
        return "off"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def human_age(seconds: float) -> str:
    """A wait to a reviewer's precision, largest unit only: 40 s, 12 min, 5 h, 3 d."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"
