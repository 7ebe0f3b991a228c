"""The state digest of a stored memory: what the audit entry that produced a state records, so a
row can later be held to its last audited state (`memwarden audit verify --state`).

Two keys, so the digest neither leaks content nor outlives crypto-shredding:

- the memory's own `digest_key` (a random 32 bytes in its row, destroyed by a hard delete) keys
  the *payload digest* over content, metadata and tags. Once a memory is hard-deleted nobody can
  test a guess of what it said against any digest in the log, however long the log is kept;
- a server-held *state key* (`MEMWARDEN_STATE_KEY_FILE`, a file outside the database), narrowed
  to one key per tenant, keys the *state digest* over the payload digest and every other column
  a read serves or a snapshot depends on. Someone who can write the database but does not hold
  that file cannot compute the digest of a state they made up, so even an entry they append to
  the chain by hand cannot vouch for a row they edited.

Values are normalised to what PostgreSQL gives back, so a digest made from the row being written
equals one made from the row read later: REAL columns as float32, timestamps in UTC to the
microsecond, JSON numbers with integral floats as integers (jsonb reads `1e+20` back as an
integer), and missing server defaults as their defaults.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
from datetime import datetime, timezone
from typing import Any

STATE_VERSION = 1
_TENANT_LABEL = b"memwarden/state-digest/v1\x00"

# The columns a state covers besides the payload (content, metadata, tags), with the value a
# missing attribute (a server default not yet read back) stands for.
STATE_COLUMNS: dict[str, Any] = {
    "id": None, "agent_id": None, "user_id": None, "type": None, "status": None, "source": None,
    "confidence": 1.0, "score_multiplier": 1.0, "expires_at": None, "created_at": None, "live_from": None,
    "ended_at": None, "updated_at": None, "hard_deleted": False, "merged_into": None, "superseded_by": None,
}
PAYLOAD_COLUMNS = ("content", "metadata_", "tags", "digest_key")


def tenant_state_key(server_key: bytes, tenant_id: str) -> bytes:
    """The tenant's state key, derived from the server's (HMAC-SHA256 as a PRF)."""
    return hmac.new(server_key, _TENANT_LABEL + tenant_id.encode(), hashlib.sha256).digest()


def _json_number(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _json_number(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_number(v) for v in value]
    return value


def _float32(value: Any, default: float) -> str:
    value = default if value is None else float(value)
    return repr(struct.unpack("<f", struct.pack("<f", value))[0])


def _instant(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds")


def content_hmac(digest_key: bytes | None, content: str | None) -> str | None:
    """HMAC-SHA256 of the content alone under the memory's own key (an audit entry's
    `content_digest`); None once the key or the content is gone."""
    if digest_key is None or content is None:
        return None
    return hmac.new(bytes(digest_key), content.encode(), hashlib.sha256).hexdigest()


def payload_digest(digest_key: bytes | None, content: str | None, metadata: Any, tags: Any) -> str | None:
    """HMAC-SHA256 of content, metadata and tags under the memory's own key; None once the key
    or the content is gone (a hard-deleted tombstone)."""
    if digest_key is None or content is None:
        return None
    body = json.dumps([content, _json_number(metadata or {}), list(tags or [])], sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False)
    return hmac.new(bytes(digest_key), body.encode(), hashlib.sha256).hexdigest()


def state_of(row: Any, **overrides: Any) -> dict[str, Any]:
    """The state a row holds (any object with the `Memory` attribute names: an ORM object or a
    plain row), with `overrides` for columns an UPDATE is about to set. Holds no text: the
    payload is only present as its keyed digest."""
    def get(name: str, default: Any = None) -> Any:
        value = overrides[name] if name in overrides else getattr(row, name, default)
        return default if value is None else value

    state: dict[str, Any] = {"v": STATE_VERSION}
    for name, default in STATE_COLUMNS.items():
        state[name] = get(name, default)
    state["confidence"] = _float32(state["confidence"], 1.0)
    state["score_multiplier"] = _float32(state["score_multiplier"], 1.0)
    for name in ("expires_at", "created_at", "live_from", "ended_at", "updated_at"):
        state[name] = _instant(state[name])
    state["hard_deleted"] = bool(state["hard_deleted"])
    state["payload"] = payload_digest(get("digest_key"), get("content"), get("metadata_"), get("tags"))
    return state


def state_digest(tenant_key: bytes, state: dict[str, Any]) -> str:
    """HMAC-SHA256 of a state (`state_of`) under the tenant's state key."""
    body = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(tenant_key, body.encode(), hashlib.sha256).hexdigest()
