"""State digests of memories under the server's state key (`app.core.state_digest` says what they
cover and why two keys). `memory_event` puts one in every audit entry about a memory; the state
check (`app.services.audit.state_check`) recomputes them from the rows."""

from __future__ import annotations

import threading
from typing import Any

from app.core import state_digest


class StateKeys:
    """The server's state key and the per-tenant keys derived from it (cached: one HMAC each)."""

    def __init__(self, server_key: bytes):
        self._server_key = server_key
        self._tenant_keys: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def for_tenant(self, tenant_id: str) -> bytes:
        key = self._tenant_keys.get(tenant_id)
        if key is None:
            key = state_digest.tenant_state_key(self._server_key, tenant_id)
            with self._lock:
                self._tenant_keys[tenant_id] = key
        return key

    def digest(self, tenant_id: str, row: Any, **overrides: Any) -> str:
        """The state digest of `row` (a `Memory` or a plain row with its attribute names) as it
        is, or as it will be once `overrides` (columns an UPDATE sets) are applied."""
        return state_digest.state_digest(self.for_tenant(tenant_id), state_digest.state_of(row, **overrides))

    def record(self, tenant_id: str, row: Any, **overrides: Any) -> dict[str, Any]:
        """What an audit entry about a memory records of the state it leaves: the digest, and the
        status in clear (no content; it lets a mismatch say "status changed")."""
        status = overrides["status"] if "status" in overrides else row.status
        return {"digest": self.digest(tenant_id, row, **overrides), "status": status}
