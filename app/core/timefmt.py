"""Timestamps on the wire: RFC 3339 UTC out; RFC 3339 or epoch milliseconds in (contract §1)."""

from __future__ import annotations

from datetime import datetime, timezone


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def format_ts(value: datetime | None) -> str | None:
    """`2026-11-22T10:00:00.123456Z`, always UTC with microseconds."""
    if value is None:
        return None
    # Not strftime("%Y"): glibc writes year 940 as "940", which is not RFC 3339.
    return value.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_ts(value: str | int | float) -> datetime:
    """Parse RFC 3339 (offset required) or integer epoch milliseconds; raise ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError("expected an RFC 3339 timestamp or epoch milliseconds")
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(value / 1000, tz=timezone.utc)
        except (OverflowError, OSError, ValueError) as exc:
            raise ValueError("epoch milliseconds out of range") from exc
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        raise ValueError("timestamp needs a UTC offset or Z")
    if "T" not in text and " " not in text:
        raise ValueError("timestamp needs a time part")
    try:
        return parsed.astimezone(timezone.utc)
    except OverflowError:  # e.g. 9999-12-31T23:59:59-05:00 is past datetime.max in UTC
        raise ValueError("timestamp out of range") from None
