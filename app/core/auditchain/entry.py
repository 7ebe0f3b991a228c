"""One audit entry: an RFC 8785 canonical JSON object, built once and kept as exact bytes.

``{"v":1,"origin","chain","seq","ts","type","actor","subject","data"}``; `build_entry` makes the
bytes, `parse_entry` accepts only bytes `build_entry` could have made.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from ..canonical import (
    CanonicalizationError,
    NotCanonicalError,
    canonical_json,
    parse_canonical,
)
from .errors import EntryError

ENTRY_VERSION = 1
MAX_SEQ = 2**63 - 1  # the largest seq (and tree size): a PostgreSQL bigint

_ENTRY_KEYS = frozenset({"v", "origin", "chain", "seq", "ts", "type", "actor", "subject", "data"})
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})")


def build_entry(*, origin: str, chain_id: str, seq: int, ts: str, event_type: str, actor: dict[str, Any],
                subject: dict[str, Any], data: dict[str, Any]) -> bytes:
    """Canonical bytes of one audit entry. Store these bytes; never re-encode them.

    Raises `EntryError` (`entry_invalid`) for a bad field, including values RFC 8785 cannot
    represent (non-finite floats, integers beyond 2**53, non-string keys).
    """
    for name, value in (("origin", origin), ("chain_id", chain_id), ("event_type", event_type)):
        if not isinstance(value, str) or not value or "\n" in value:
            raise EntryError("entry_invalid", f"{name} must be a non-empty single-line string", found=value)
    if type(seq) is not int or not 1 <= seq <= MAX_SEQ:
        raise EntryError("entry_invalid", "seq must be an integer >= 1", found=seq)
    if not isinstance(ts, str) or not is_rfc3339(ts):
        raise EntryError("entry_invalid", "ts must be an RFC 3339 timestamp with offset", found=ts)
    for name, part in (("actor", actor), ("subject", subject), ("data", data)):
        if not isinstance(part, dict):
            raise EntryError("entry_invalid", f"{name} must be an object", found=type(part).__name__)
    obj = {"v": ENTRY_VERSION, "origin": origin, "chain": chain_id, "seq": seq, "ts": ts, "type": event_type,
           "actor": actor, "subject": subject, "data": data}
    try:
        return canonical_json(obj)
    except CanonicalizationError as exc:
        raise EntryError("entry_invalid", f"not representable in RFC 8785: {exc}") from None


def parse_entry(b: bytes) -> dict[str, Any]:
    """Parse stored entry bytes, requiring the exact canonical encoding and the v1 shape.

    Raises `EntryError` with reason `not_canonical` (bytes are not RFC 8785 canonical JSON, so
    they were not produced by `build_entry`) or `entry_invalid` (canonical, but not a v1 entry).
    """
    try:
        obj = parse_canonical(b)
    except NotCanonicalError as exc:
        raise EntryError("not_canonical", str(exc)) from None
    # One expression for the common case; the slow diagnosis below only runs on failure.
    if (type(obj) is dict and obj.keys() == _ENTRY_KEYS and type(obj["v"]) is int and obj["v"] == ENTRY_VERSION
            and type(obj["seq"]) is int and obj["seq"] >= 1 and type(obj["origin"]) is str and obj["origin"]
            and type(obj["chain"]) is str and obj["chain"] and type(obj["ts"]) is str and obj["ts"]
            and type(obj["type"]) is str and obj["type"] and type(obj["actor"]) is dict
            and type(obj["subject"]) is dict and type(obj["data"]) is dict):
        return obj
    raise _entry_shape_error(obj)


def _entry_shape_error(obj: Any) -> EntryError:
    if type(obj) is not dict or obj.keys() != _ENTRY_KEYS:
        found: Any = sorted(obj) if type(obj) is dict else type(obj).__name__
        return EntryError("entry_invalid", "not a v1 entry object", expected=sorted(_ENTRY_KEYS), found=found)
    if type(obj["v"]) is not int or obj["v"] != ENTRY_VERSION:
        return EntryError("entry_invalid", "unsupported entry version", expected=ENTRY_VERSION, found=obj["v"])
    if type(obj["seq"]) is not int or obj["seq"] < 1:
        return EntryError("entry_invalid", "seq must be an integer >= 1", found=obj["seq"])
    for key in ("origin", "chain", "ts", "type"):
        if type(obj[key]) is not str or not obj[key]:
            return EntryError("entry_invalid", f"{key} must be a non-empty string", found=obj[key])
    bad = next(key for key in ("actor", "subject", "data") if type(obj[key]) is not dict)
    return EntryError("entry_invalid", f"{bad} must be an object", found=type(obj[bad]).__name__)


def rfc3339_datetime(ts: str) -> datetime | None:
    """The instant an RFC 3339 timestamp with offset names (fraction cut to microseconds), or None
    if `ts` is not one."""
    m = _RFC3339.fullmatch(ts)
    if not m:
        return None
    frac = m.group(1) or ""
    text = ts[:19] + frac[:7] + ("+00:00" if m.group(2) == "Z" else m.group(2))
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def is_rfc3339(ts: str) -> bool:
    """True if `ts` is an RFC 3339 timestamp with an offset (the form of an entry's `ts`)."""
    return rfc3339_datetime(ts) is not None
