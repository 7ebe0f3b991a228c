"""`/openapi.json`, built from the routes' Operations and the files in `schemas/` — no second contract."""

from __future__ import annotations

from typing import Any, Iterable

from starlette.requests import Request
from starlette.routing import Route

from app import __version__
from app.api.jsonio import json_response
from app.api.routing import ApiRoute
from app.contracts import default_contracts

ERROR_SCHEMA = "error"
IDEMPOTENCY_KEY_PARAMETER = {
    "name": "Idempotency-Key", "in": "header", "required": False,
    "description": "Retry-safe writes: the same key with the same request within 24 h returns the first answer "
                   "(with `Idempotent-Replayed: true`) and writes nothing again; the same key with another "
                   "request is 422 `idempotency_key_reused`. 1-255 printable ASCII characters.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7E]+$"},
}


def build_openapi(routes: Iterable[Any]) -> dict[str, Any]:
    """An OpenAPI 3.1 document; component schemas are the contract files, embedded with their $id."""
    contracts = default_contracts()
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        if not isinstance(route, ApiRoute):
            continue
        op = route.operation
        item: dict[str, Any] = {"summary": op.summary, "tags": [op.tag], "operationId": route.name,
                                "responses": {}}
        if not op.public:
            item["security"] = [{"apiKey": []}]
            if op.scope:
                item["description"] = f"Requires scope `{op.scope}`."
        params = [p.strip("{}") for p in op.path.split("/") if p.startswith("{")]
        if params:
            item["parameters"] = [{"name": p.split(":")[0], "in": "path", "required": True,
                                   "schema": {"type": "string"}} for p in params]
        if op.idempotent:
            item.setdefault("parameters", []).append(IDEMPOTENCY_KEY_PARAMETER)
        if op.request:
            if op.method in {"GET", "DELETE"}:
                item["x-query-schema"] = _ref(contracts.schemas[op.request])
            else:
                item["requestBody"] = {"required": True, "content": {
                    "application/json": {"schema": _ref(contracts.schemas[op.request])}}}
        for status, schema in op.responses.items():
            item["responses"][str(status)] = {"description": f"{status}", "content": {
                "application/json": {"schema": _ref(contracts.schemas[schema])}}}
        item["responses"]["default"] = {"description": "error envelope (contract §1)", "content": {
            "application/json": {"schema": _ref(contracts.schemas[ERROR_SCHEMA])}}}
        paths.setdefault(op.path.replace(":path}", "}"), {})[op.method.lower()] = item
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {"title": "Memwarden API", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": dict(contracts.schemas),
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}},
        },
    }


def _ref(schema: dict[str, Any]) -> dict[str, str]:
    return {"$ref": schema["$id"]}


async def openapi(request: Request):
    return json_response(build_openapi(request.app.routes))


routes = [Route("/openapi.json", openapi, methods=["GET"])]
