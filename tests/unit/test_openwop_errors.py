"""OpenWOP's error envelope on the OpenWOP surfaces, and the Python client reading it back."""

import pytest

from app import errors
from app.openwop_errors import error_body, is_openwop_surface, openwop_envelope, speaks_openwop
from memwarden import errors as client_errors
from tests.schema_check import assert_schema


@pytest.mark.parametrize("path, openwop", [
    ("/.well-known/openwop", True), ("/v1/refs", True), ("/v1/refs/ref_1/entries", True),
    ("/v1/runs", True), ("/v1/host/workspace/files/a.md", True),
    ("/v1/memories/remember", False), ("/v1/refsx", False), ("/v1/events", False), ("/mcp", False),
    ("/runs", False),
])
def test_which_paths_are_openwop_surfaces(path, openwop):
    assert is_openwop_surface(path) is openwop


def test_an_openwop_client_gets_openwop_errors_on_v2_paths_we_do_not_serve():
    assert speaks_openwop("/runs/run_1", "2.0") and speaks_openwop("/agents", "2.0")
    assert not speaks_openwop("/runs/run_1")  # a browser or curl: ours
    assert not speaks_openwop("/v1/memories/recall", "2.0") and not speaks_openwop("/mcp", "2.0")


@pytest.mark.parametrize("error, status, code", [
    (errors.ValidationFailed.at("/content", "too short"), 400, "validation_error"),
    (errors.Unauthorized("no key"), 401, "unauthenticated"),
    (errors.PolicyDenied("denied by rule"), 403, "forbidden"),
    (errors.NotFound("gone"), 404, "not_found"),
    (errors.Conflict("decided", details={"reason": "stale_review"}), 409, "version_conflict"),
    (errors.WorkspaceConflict("stale", details={"currentVersion": 3}), 409, "workspace_conflict"),
    (errors.IdempotencyKeyReused("other body"), 409, "idempotency_key_mismatch"),
    (errors.WorkspaceTooLarge("big"), 413, "workspace_too_large"),
    (errors.SecretLeakage("secret", details=[{"field": "content", "label": "aws"}]), 422, "memwarden.secret_leakage"),
    (errors.MethodNotAllowed("no"), 405, "memwarden.method_not_allowed"),
    (errors.Unavailable("db down"), 503, "service_unavailable"),
])
def test_errors_take_the_registered_code_and_status(error, status, code):
    got_status, body = openwop_envelope(error)
    assert (got_status, body["error"]) == (status, code)
    assert_schema("openwop-error", body)
    # Ours is untouched off the OpenWOP surfaces.
    assert error_body(error, "/v1/memories/recall") == (error.status, error.envelope())


def test_list_details_go_under_errors_and_a_coarser_code_keeps_ours():
    _, body = openwop_envelope(errors.ValidationFailed.at("/path", "bad"))
    assert body["details"] == {"errors": [{"path": "/path", "message": "bad"}]}
    _, body = openwop_envelope(errors.PolicyDenied("denied"))
    assert body["details"] == {"memwardenCode": "policy_denied"}
    _, body = openwop_envelope(errors.WorkspaceConflict("stale", details={"currentVersion": None}))
    assert body["details"] == {"currentVersion": None}


@pytest.mark.parametrize("error, cls", [
    (errors.WorkspaceConflict("stale", details={"currentVersion": 3}), client_errors.Conflict),
    (errors.PolicyDenied("denied"), client_errors.PolicyDenied),
    (errors.ValidationFailed.at("/content", "bad"), client_errors.ValidationError),
    (errors.SecretLeakage("secret", details=[{"field": "content"}]), client_errors.SecretLeakage),
    (errors.NotFound("gone"), client_errors.NotFound),
])
def test_the_python_client_reads_the_openwop_envelope_back_to_our_codes(error, cls):
    status, body = openwop_envelope(error)
    raised = client_errors.error_from_response(status, body, {})
    assert type(raised) is cls and raised.code == error.code and raised.details == error.details

