"""Idempotency keys for `/v1` writes and decisions (contract, turn 2) and MCP write tools.

A request carrying `Idempotency-Key` runs in one database transaction that the API layer opens
(`Database.unit_of_work`): the services' own transactions become savepoints inside it, and the
answer is stored in `idempotency_keys` before that transaction commits. So a write and its stored
answer commit together, or neither does: a client whose connection died after the commit (or a
server killed right then) retries with the same key and gets the first answer, never a second write.

The key is claimed first, under a transaction-scoped advisory lock on (tenant, key): a concurrent
duplicate waits for the first to finish and then replays its answer (or, after `LOCK_WAIT`,
gets 409 `conflict`). Only 2xx answers are stored; an error changed nothing, so a retry simply
runs again. Same key with a different request (method, path, query, API key or canonical body)
is 422 `idempotency_key_reused`. Rows expire after `TTL` and are purged by a background job.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from app.core import jsontext
from app.core.timefmt import utcnow
from app.errors import Conflict, IdempotencyKeyReused, ValidationFailed
from app.repos.runtime import idempotency as repo

HEADER = "Idempotency-Key"
TTL = timedelta(hours=24)
MAX_KEY_LENGTH = 255
LOCK_WAIT = "10s"
LOCK_NOT_AVAILABLE = "55P03"
# Response headers that describe the transport, not the answer; never replayed.
_TRANSPORT_HEADERS = {"content-length", "date", "server", "set-cookie", "connection", "transfer-encoding"}


def validate_key(raw: object, where: str = f"/headers/{HEADER}") -> str:
    """The key when usable: 1–255 printable ASCII characters; 422 otherwise (at JSON path `where`)."""
    problem = None
    if not isinstance(raw, str):
        problem = "must be a string"
    elif not raw:
        problem = "must not be empty"
    elif len(raw) > MAX_KEY_LENGTH:
        problem = f"is {len(raw)} characters; at most {MAX_KEY_LENGTH} are allowed"
    elif any(not (0x20 <= ord(ch) <= 0x7E) for ch in raw):
        problem = "must be printable ASCII (no control or non-ASCII characters)"
    if problem:
        raise ValidationFailed(f"the idempotency key {problem}", details=[{"path": where, "message": problem}])
    return raw


def fingerprint(*, method: str, path: str, query: str, api_key_id: str, body: bytes) -> bytes:
    """SHA-256 identifying the request a key was first used for. A JSON body is canonicalised
    (sorted keys, no whitespace), so a retry that re-serialises the same object still matches."""
    try:
        canonical = json.dumps(jsontext.loads(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                               allow_nan=False).encode("utf-8", "surrogatepass")
    except (ValueError, RecursionError):  # not JSON, not storable JSON, or too deep to re-encode:
        canonical = body                  # the raw bytes identify it (the handler refuses it anyway)
    digest = hashlib.sha256()
    for part in (method.upper().encode(), path.encode(), query.encode(), api_key_id.encode()):
        digest.update(len(part).to_bytes(4, "big") + part)
    digest.update(canonical)
    return digest.digest()


@dataclass(frozen=True)
class StoredResponse:
    """An answer as it is replayed: status, the headers the handler set, and the body bytes."""

    status_code: int
    headers: list[tuple[str, str]]
    body: bytes

    @classmethod
    def from_parts(cls, status_code: int, raw_headers: list[tuple[bytes, bytes]], body: bytes) -> StoredResponse:
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw_headers
                   if k.decode("latin-1").lower() not in _TRANSPORT_HEADERS]
        return cls(status_code, headers, body)


def claim(conn: Connection, tenant_id: str, key: str, request_fingerprint: bytes) -> StoredResponse | None:
    """Inside the request's transaction: hold the key until commit and return its stored answer,
    if a live one exists. A different request under the key → `IdempotencyKeyReused`; a duplicate
    still running after `LOCK_WAIT` → `Conflict`."""
    try:
        repo.lock_key(conn, tenant_id=tenant_id, key=key, wait=LOCK_WAIT)
    except OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) == LOCK_NOT_AVAILABLE:
            raise Conflict(f"a request with this {HEADER} is still being processed; retry later",
                           details={"reason": "idempotency_key_in_flight"}, headers={"Retry-After": "1"}) from None
        raise
    row = repo.live_answer(conn, tenant_id=tenant_id, key=key)
    if row is None:
        return None
    if bytes(row.fingerprint) != request_fingerprint:
        raise IdempotencyKeyReused(
            f"this {HEADER} was already used for a different request; use a new key for a new request",
            details=[{"path": f"/headers/{HEADER}", "message": "key reused with a different method, path or body"}])
    return StoredResponse(row.status_code, [(k, v) for k, v in row.headers], bytes(row.body))


def store(conn: Connection, tenant_id: str, key: str, request_fingerprint: bytes, response: StoredResponse) -> None:
    """Record the answer in the request's transaction (replacing an expired row of the same key)."""
    now = utcnow()
    values: dict[str, Any] = {
        "fingerprint": request_fingerprint, "status_code": response.status_code,
        "headers": [list(h) for h in response.headers], "body": response.body,
        "created_at": now, "expires_at": now + TTL,
    }
    repo.upsert(conn, tenant_id=tenant_id, key=key, values=values)


def purge_expired(ctx, batch: int = 5_000) -> int:
    """Delete expired keys (at most `batch` per call, oldest first); returns how many went."""
    with ctx.db.sessions.begin() as session:
        return repo.purge_expired(session, batch=batch)
