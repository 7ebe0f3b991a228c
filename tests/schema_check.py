"""Assertions that responses follow the contract's schemas and error envelope."""

from typing import Any

from app.contracts import default_contracts


def assert_schema(schema: str, payload: Any) -> Any:
    problems = default_contracts().problems(schema, payload)
    assert not problems, f"response breaks {schema}: {problems}"
    return payload


def assert_error(response, status: int, code: str) -> dict:
    """The response is `status` with the contract's error envelope carrying `code`."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    body = response.json()
    assert_schema("error", body)
    assert body["error"]["code"] == code, body
    return body["error"]
