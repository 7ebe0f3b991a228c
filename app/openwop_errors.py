"""OpenWOP's error envelope on the OpenWOP surfaces (contract §7); `/v1` keeps ours (contract §1).

OpenWOP clients (the `openwop-client` SDK) read every error as `{"error": "<code>", "message": …,
"details": {…}}` and branch on `error`, a code from OpenWOP's registry answered with the status
the registry gives it. So on the OpenWOP paths an `AppError` is translated here: our code to the
registered one (or to a vendor code `memwarden.<code>` where the registry has none), our status
to the registered status, and list-shaped details (validation problems) under `details.errors`,
since OpenWOP's `details` is always an object.
"""

from __future__ import annotations

from typing import Any

from app.errors import AppError

# Paths whose clients are OpenWOP's: the capability document, the memory adapter over refs (and
# the run-start it reads snapshots from) and the workspace files. Every other path keeps ours.
OPENWOP_PATHS = ("/.well-known/openwop", "/v1/refs", "/v1/runs", "/v1/host")

# Our code → (OpenWOP registered code, its registered HTTP status). A code missing here keeps
# its status under the vendor code `memwarden.<code>`.
REGISTERED: dict[str, tuple[str, int]] = {
    "validation_error": ("validation_error", 400),
    "bad_request": ("validation_error", 400),
    "unsupported_media_type": ("unsupported_media_type", 415),
    "unauthorized": ("unauthenticated", 401),
    "forbidden": ("forbidden", 403),
    "policy_denied": ("forbidden", 403),
    "own_change": ("forbidden", 403),
    "not_found": ("not_found", 404),
    "protocol_version_unsupported": ("protocol_version_unsupported", 406),
    "conflict": ("version_conflict", 409),
    "workspace_conflict": ("workspace_conflict", 409),
    "idempotency_key_reused": ("idempotency_key_mismatch", 409),
    "payload_too_large": ("payload_too_large", 413),
    "workspace_too_large": ("workspace_too_large", 413),
    "rate_limited": ("rate_limited", 429),
    "read_budget_exceeded": ("rate_limited", 429),
    "internal_error": ("internal_error", 500),
    "unavailable": ("service_unavailable", 503),
}
VENDOR = "memwarden."


def is_openwop_surface(path: str) -> bool:
    """True for the paths whose errors are answered in OpenWOP's envelope."""
    return any(path == prefix or path.startswith(prefix + "/") for prefix in OPENWOP_PATHS)


def openwop_code(code: str, status: int) -> tuple[str, int]:
    """The OpenWOP code and HTTP status for one of our codes."""
    return REGISTERED.get(code) or (VENDOR + code, status)


def openwop_envelope(error: AppError) -> tuple[int, dict[str, Any]]:
    """(status, body) of `error` in OpenWOP's envelope."""
    code, status = openwop_code(error.code, error.status)
    body: dict[str, Any] = {"error": code, "message": error.message or code}
    details = error.details
    if isinstance(details, list):
        details = {"errors": details}
    elif details is not None and not isinstance(details, dict):
        details = {"value": details}
    if code != error.code and not code.startswith(VENDOR):
        # The registered code is coarser than ours (policy_denied → forbidden): keep ours for logs and humans.
        details = {**(details or {}), "memwardenCode": error.code}
    if details is not None:
        body["details"] = details
    return status, body


def speaks_openwop(path: str, openwop_version: str | None = None) -> bool:
    """Whether an error for this request is answered in OpenWOP's envelope: on the OpenWOP
    surfaces, and for an OpenWOP client (it sends `OpenWOP-Version`) calling an OpenWOP v2 path we
    do not serve (`/runs`, `/agents`, …: unversioned, so outside `/v1` and `/mcp`), which then
    reads our 404 as OpenWOP's `not_found`."""
    if is_openwop_surface(path):
        return True
    return openwop_version is not None and not path.startswith("/v1/") and path != "/mcp"


def error_body(error: AppError, path: str, openwop_version: str | None = None) -> tuple[int, dict[str, Any]]:
    """(status, body) of `error` for a request to `path`: OpenWOP's envelope where `speaks_openwop`, ours elsewhere."""
    if speaks_openwop(path, openwop_version):
        return openwop_envelope(error)
    return error.status, error.envelope()
