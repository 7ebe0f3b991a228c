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
equals one made from the row read later: REAL columns as float32, timestamps as whole
microseconds since the epoch, metadata keys sorted and integral floats as integers (jsonb reorders
keys and reads `1e+20` back as an integer), and missing server defaults as their defaults.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
from datetime import datetime, timedelta, timezone
from typing import Any

STATE_VERSION = 1
_TENANT_LABEL = b"memwarden/state-digest/v1\x00"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)
_FLOAT32 = struct.Struct("<f")

STATE_FIELDS = ("v", "id", "agent_id", "user_id", "type", "status", "source", "confidence", "score_multiplier",
                "expires_at", "created_at", "live_from", "ended_at", "updated_at", "hard_deleted", "merged_into",
                "superseded_by", "payload")
"""What a state covers, in the order `state_of` lists it (timestamps as microseconds since the epoch;
`payload` is the keyed digest of content, metadata and tags)."""


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
    return repr(_FLOAT32.unpack(_FLOAT32.pack(default if value is None else float(value)))[0])


def _instant(value: datetime | None) -> int | None:
    return None if value is None else (value - _EPOCH) // _MICROSECOND


def content_hmac(digest_key: bytes | None, content: str | None) -> str | None:
    """HMAC-SHA256 of the content alone under the memory's own key (an audit entry's
    `content_digest`); None once the key or the content is gone."""
    if digest_key is None or content is None:
        return None
    return hmac.digest(bytes(digest_key), content.encode(), "sha256").hex()


def payload_digest(digest_key: bytes | None, content: str | None, metadata: Any, tags: Any) -> str | None:
    """HMAC-SHA256 of content, metadata and tags under the memory's own key; None once the key
    or the content is gone (a hard-deleted tombstone)."""
    if digest_key is None or content is None:
        return None
    body = json.dumps([content, _json_number(metadata or {}), list(tags or [])], sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False)
    return hmac.digest(bytes(digest_key), body.encode(), "sha256").hex()


class _After:
    """A row seen through the columns an UPDATE is about to set."""

    __slots__ = ("_row", "_values")

    def __init__(self, row: Any, values: dict[str, Any]):
        self._row, self._values = row, values

    def __getattr__(self, name: str) -> Any:
        values = self._values
        return values[name] if name in values else getattr(self._row, name)


def state_of(row: Any, **overrides: Any) -> list[Any]:
    """The state a row holds, as `STATE_FIELDS` lists it (`row`: any object with the `Memory`
    attribute names, an ORM object or a plain row), with `overrides` for columns an UPDATE is about
    to set. Holds no text: the payload is only present as its keyed digest. Missing server
    defaults (None) count as their defaults."""
    r = _After(row, overrides) if overrides else row
    return [STATE_VERSION, r.id, r.agent_id, r.user_id, r.type, r.status, r.source,
            _float32(r.confidence, 1.0), _float32(r.score_multiplier, 1.0), _instant(r.expires_at),
            _instant(r.created_at), _instant(r.live_from), _instant(r.ended_at), _instant(r.updated_at),
            bool(r.hard_deleted), r.merged_into, r.superseded_by,
            payload_digest(r.digest_key, r.content, r.metadata_, r.tags)]


def state_digest(tenant_key: bytes, state: list[Any]) -> str:
    """HMAC-SHA256 of a state (`state_of`) under the tenant's state key."""
    return hmac.digest(tenant_key, json.dumps(state, separators=(",", ":"), ensure_ascii=False).encode(),
                       "sha256").hex()
