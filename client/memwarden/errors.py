"""Exceptions for the error envelope `{"error": {"code", "message", "details"}}` (contract §1).

The OpenWOP paths (workspace files, refs; contract §7) answer in OpenWOP's envelope
`{"error": "<code>", "message", "details"}` instead; it is read back to the same exceptions, with
Memwarden's own code (`details.memwardenCode`, or the vendor code `memwarden.<code>`).

Every exception carries `code`, `message`, `details` and `status`; the class says which code,
so callers catch what they can handle (`except NotFound`, `except RateLimited as e: e.retry_after`).
A code this client does not know yet still raises `MemwardenError` (or the subclass for its status).
"""

from __future__ import annotations

from typing import Any


class MemwardenError(Exception):
    """An error answered by the server (or, with `status=None`, the connection failing)."""

    def __init__(self, code: str, message: str, *, details: Any = None, status: int | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details
        self.status = status
        self.headers = headers or {}


class ValidationError(MemwardenError):
    """422: the request failed its schema or a semantic rule; `details` lists JSON paths."""


class SecretLeakage(ValidationError):
    """422 `secret_leakage`: the tenant rejects writes with secret-shaped values."""


class IdempotencyKeyReused(ValidationError):
    """422 `idempotency_key_reused`: the same Idempotency-Key was sent with a different body."""


class ConfirmationRequired(ValidationError):
    """422 `confirmation_required`: approving a high-risk change needs `confirm_risk=True`; nothing was decided."""


class BadRequest(MemwardenError):
    """400: the body is not JSON, or not UTF-8."""


class Unauthorized(MemwardenError):
    """401: missing, invalid or revoked API key."""


class Forbidden(MemwardenError):
    """403: the key's scope or agent allow-list does not cover the request."""


class PolicyDenied(Forbidden):
    """403 `policy_denied`: a tenant policy refuses this write."""


class OwnChange(Forbidden):
    """403 `own_change`: the author of a change (its submitting key, that key's owner, or the person who
    submitted it) cannot approve or reject it; nothing was decided. Another reviewer must."""


class NotFound(MemwardenError):
    """404: absent, pending, forgotten, expired, or in another tenant."""


class Conflict(MemwardenError):
    """409: already decided, stale review (`details.reason == "stale_review"`), stale version."""


class PayloadTooLarge(MemwardenError):
    """413: content over the server's size limit."""


class RateLimited(MemwardenError):
    """429: slow down; `retry_after` is the server's `Retry-After` in seconds (or None)."""

    @property
    def retry_after(self) -> float | None:
        return retry_after_seconds(self.headers)


class Unavailable(MemwardenError):
    """503: the database is unreachable; the request had no effect."""

    @property
    def retry_after(self) -> float | None:
        return retry_after_seconds(self.headers)


class ServerError(MemwardenError):
    """Any other 5xx (a server bug: the contract allows no 500)."""


class ConnectionFailed(MemwardenError):
    """The server could not be reached (after retries); `status` is None."""


_BY_CODE: dict[str, type[MemwardenError]] = {
    "validation_error": ValidationError, "secret_leakage": SecretLeakage,
    "idempotency_key_reused": IdempotencyKeyReused, "confirmation_required": ConfirmationRequired,
    "bad_request": BadRequest, "unauthorized": Unauthorized,
    "forbidden": Forbidden, "policy_denied": PolicyDenied, "own_change": OwnChange,
    "not_found": NotFound, "conflict": Conflict,
    "workspace_conflict": Conflict, "payload_too_large": PayloadTooLarge, "workspace_too_large": PayloadTooLarge,
    "rate_limited": RateLimited, "unavailable": Unavailable,
}
_BY_STATUS: dict[int, type[MemwardenError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 413: PayloadTooLarge,
    422: ValidationError, 429: RateLimited, 503: Unavailable,
}


def error_from_response(status: int, body: Any, headers: dict[str, str]) -> MemwardenError:
    """The exception for a non-2xx answer: by envelope code first, then by HTTP status."""
    envelope = body.get("error") if isinstance(body, dict) else None
    if isinstance(envelope, dict) and isinstance(envelope.get("code"), str):
        code, message, details = envelope["code"], str(envelope.get("message", "")), envelope.get("details")
    elif isinstance(envelope, str):
        code, message, details = _from_openwop(envelope, body)
    else:
        code, message, details = f"http_{status}", f"HTTP {status} without an error envelope", body
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or (ServerError if status >= 500 else MemwardenError)
    return cls(code, message, details=details, status=status, headers=headers)


def _from_openwop(code: str, body: dict[str, Any]) -> tuple[str, str, Any]:
    """(our code, message, details) of an OpenWOP envelope: the inverse of the server's translation."""
    details = body.get("details")
    if isinstance(details, dict):
        details = dict(details)
        code = str(details.pop("memwardenCode", code))
        if set(details) == {"errors"}:
            details = details["errors"]
        elif not details:
            details = None
    return code.removeprefix("memwarden."), str(body.get("message", "")), details


def retry_after_seconds(headers: dict[str, str]) -> float | None:
    """`Retry-After` as seconds (the delay form; an HTTP date is ignored)."""
    value = {k.lower(): v for k, v in headers.items()}.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
