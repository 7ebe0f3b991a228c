"""Assertions that responses follow the contract's schemas and error envelope."""

from typing import Any

from app.contracts import default_contracts
from app.openwop_errors import is_openwop_surface, openwop_code


def assert_schema(schema: str, payload: Any) -> Any:
    problems = default_contracts().problems(schema, payload)
    assert not problems, f"response breaks {schema}: {problems}"
    return payload


def assert_error(response, status: int, code: str) -> dict:
    """The response is `status` with the contract's error envelope carrying `code`.

    On an OpenWOP surface (contract §7) it must instead be OpenWOP's envelope with the registered
    code and status our `code` maps to; what is returned is then `{code, message, details}` with
    the OpenWOP code and, where the server sent a list of problems (`details.errors`), that list,
    so callers check paths and details the same way on both surfaces."""
    if is_openwop_surface(response.request.url.path):
        wire_code, wire_status = openwop_code(code, status)
        return assert_openwop_error(response, wire_status, wire_code)
    assert response.status_code == status, (response.status_code, response.text[:500])
    body = response.json()
    assert_schema("error", body)
    assert body["error"]["code"] == code, body
    return body["error"]


def assert_openwop_error(response, status: int, code: str) -> dict:
    """The response is `status` with OpenWOP's error envelope carrying the OpenWOP `code`."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    body = assert_schema("openwop-error", response.json())
    assert body["error"] == code, body
    details = body.get("details")
    if isinstance(details, dict) and "errors" in details:
        details = details["errors"]
    return {"code": body["error"], "message": body["message"], "details": details}
