"""Application errors carrying the contract's error code and HTTP status (contract §1)."""

from __future__ import annotations

from typing import Any


class AppError(Exception):
    """Base class: `code` and `status` are what the client sees in the error envelope."""

    code = "internal_error"
    status = 500

    def __init__(self, message: str, *, details: Any = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.details = details
        self.headers = headers or {}

    def envelope(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            body["details"] = self.details
        return {"error": body}


class ValidationFailed(AppError):
    code, status = "validation_error", 422

    @classmethod
    def at(cls, path: str, message: str) -> ValidationFailed:
        """One problem at a JSON pointer path."""
        return cls(message, details=[{"path": path, "message": message}])


class BadRequest(AppError):
    code, status = "bad_request", 400


class UnsupportedMediaType(AppError):
    code, status = "unsupported_media_type", 415


class Unauthorized(AppError):
    code, status = "unauthorized", 401


class Forbidden(AppError):
    code, status = "forbidden", 403


class PolicyDenied(Forbidden):
    """A tenant policy rule with action `deny` matched the write (contract, additions turn 2).
    A `Forbidden`, so callers that catch refusals in general still do."""

    code, status = "policy_denied", 403


class OwnChange(Forbidden):
    """The author of a change (the key that submitted it, or its owner, or the person who submitted
    it) tried to approve or reject it; nothing is decided (`app.services.review.duties`)."""

    code, status = "own_change", 403


class NotFound(AppError):
    code, status = "not_found", 404


class MethodNotAllowed(AppError):
    code, status = "method_not_allowed", 405


class ProtocolVersionUnsupported(AppError):
    """`OpenWOP-Version` names a protocol major this host does not serve (OpenWOP discovery)."""

    code, status = "protocol_version_unsupported", 406


class Conflict(AppError):
    code, status = "conflict", 409


class BacktestFailed(AppError):
    """A policy change would admit, with no one deciding, known attacks or writes a reviewer rejected or
    a recover pulled back (`app.services.review.policy_backtest`); `details` is the backtest report. Nothing
    changes unless the admin gives an override reason."""

    code, status = "backtest_failed", 409


class ConfirmationRequired(AppError):
    """Approving a high-risk change needs the reviewer's explicit confirmation (`confirm_risk`);
    without it nothing is decided and the change stays pending."""

    code, status = "confirmation_required", 422


class IdempotencyKeyReused(AppError):
    """The `Idempotency-Key` was first used for a different request (method, path, key or body)."""

    code, status = "idempotency_key_reused", 422


class WorkspaceConflict(AppError):
    code, status = "workspace_conflict", 409


class AuditChainBroken(AppError):
    """The stored audit chain does not verify (first bad seq and reason in `details`): nothing is
    appended to it, signed over it or exported from it."""

    code, status = "audit_chain_broken", 409


class IntegrityMismatch(AppError):
    """A stored memory differs from its last audited state (`app.services.audit.state_check`); with
    `MEMWARDEN_INTEGRITY_FAIL_CLOSED` such a memory is not served. `details` names the memory, the
    audit seq whose state it should hold and why it does not (never content)."""

    code, status = "integrity_mismatch", 409


class PayloadTooLarge(AppError):
    code, status = "payload_too_large", 413


class WorkspaceTooLarge(AppError):
    code, status = "workspace_too_large", 413


class SecretLeakage(AppError):
    code, status = "secret_leakage", 422


class RateLimited(AppError):
    code, status = "rate_limited", 429


class ReadBudgetExceeded(AppError):
    """The key (or the agent) was returned as many distinct memories in this window as its read
    budget allows; `Retry-After` says when the window ends. Nothing of the refused read is returned."""

    code, status = "read_budget_exceeded", 429


class Unavailable(AppError):
    code, status = "unavailable", 503
