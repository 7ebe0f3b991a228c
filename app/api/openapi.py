"""`/openapi.json`, built from the routes' Operations and the files in `schemas/` — no second contract.

The document resolves offline: every `schemas/` file is embedded under `components/schemas/<stem>`
without its `$id`, and every `$ref` between them (`common.json#/$defs/tag`) is rewritten to a local
pointer (`#/components/schemas/common/$defs/tag`). Query strings are described as real `parameters`
taken from each endpoint's query schema, so tools generate and validate the same requests the
handlers accept.
"""

from __future__ import annotations

from typing import Any, Iterable

from starlette.requests import Request
from starlette.routing import Route

from app import __version__
from app.api.jsonio import json_response
from app.api.routes import ApiRoute
from app.contracts import SCHEMA_BASE, default_contracts
from app.openwop_errors import is_openwop_surface

ERROR_SCHEMA = "error"
OPENWOP_ERROR_SCHEMA = "openwop-error"
COMPONENTS = "#/components/schemas/"
IDEMPOTENCY_KEY_PARAMETER = {
    "name": "Idempotency-Key", "in": "header", "required": False,
    "description": "Retry-safe writes: the same key with the same request within 24 h returns the first answer "
                   "(with `Idempotent-Replayed: true`) and writes nothing again; the same key with another "
                   "request is 422 `idempotency_key_reused`. 1-255 printable ASCII characters.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7E]+$"},
}
HEADER_PARAMETERS = {
    "Last-Event-ID": {"description": "Resume after this event id (wins over `after`).",
                      "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"}},
    "If-Match": {"description": "Write only if the file's current version is this ETag (`\"v<version>\"`, or `*`); "
                                "409 `workspace_conflict` otherwise.",
                 "schema": {"type": "string", "maxLength": 256}},
    "X-Agent-Id": {"description": "The writing agent (checked against the key's allow-list; default: the key id).",
                   "schema": {"$ref": COMPONENTS + "common/$defs/agent_id"}},
}
ERROR_STATUSES = {
    "401": "Missing, invalid or revoked API key",
    "403": "The key lacks the scope or the agent",
    "404": "No such resource in the key's tenant",
    "413": "Request body too large",
    "422": "Validation failed; `details` lists each problem with its JSON path",
    "429": "Rate limit or read budget exceeded (`rate_limited`, `read_budget_exceeded`; see `Retry-After`)",
}


def build_openapi(routes: Iterable[Any]) -> dict[str, Any]:
    """An OpenAPI 3.1 document whose every `$ref` is local (see the module docstring)."""
    contracts = default_contracts()
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        if isinstance(route, ApiRoute):
            path = route.operation.path.replace(":path}", "}")
            paths.setdefault(path, {})[route.operation.method.lower()] = _operation(route, contracts)
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {"title": "Memwarden API", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": {name: localize(schema, name) for name, schema in contracts.schemas.items()},
            "responses": {"Error": {"description": "Error envelope (contract §1)",
                                    "content": {"application/json": {"schema": _ref(ERROR_SCHEMA)}}},
                          "OpenwopError": {"description": "OpenWOP's error envelope, on the OpenWOP surfaces (contract §7)",
                                           "content": {"application/json": {"schema": _ref(OPENWOP_ERROR_SCHEMA)}}}},
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}},
        },
    }


def _operation(route: ApiRoute, contracts) -> dict[str, Any]:
    op = route.operation
    item: dict[str, Any] = {"summary": op.summary, "tags": [op.tag], "operationId": route.name, "responses": {}}
    if not op.public:
        item["security"] = [{"apiKey": []}]
        if op.scope:
            item["description"] = f"Requires scope `{op.scope}`."
    path_params = [p.strip("{}").split(":")[0] for p in op.path.split("/") if p.startswith("{")]
    parameters: list[dict[str, Any]] = [
        {"name": p, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
        for p in path_params]
    if op.request and op.method in {"GET", "DELETE"}:
        parameters += _query_parameters(contracts.schemas[op.request], op.request)
    elif op.request:
        item["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(op.request)}}}
    parameters += [{"name": name, "in": "header", "required": False, **HEADER_PARAMETERS[name]}
                   for name in op.headers]
    if op.idempotent:
        parameters.append(IDEMPOTENCY_KEY_PARAMETER)
    if parameters:
        item["parameters"] = parameters
    for status, body in op.responses.items():
        item["responses"][str(status)] = {"description": f"{status}", "content": _content(body)}
    openwop = is_openwop_surface(op.path)
    error = {"$ref": "#/components/responses/" + ("OpenwopError" if openwop else "Error")}
    for error_status in ERROR_STATUSES:
        if _may_answer(error_status, op, bool(path_params)):
            # OpenWOP's registry answers a validation error with 400, not 422.
            item["responses"]["400" if openwop and error_status == "422" else error_status] = error
    item["responses"]["default"] = error
    return item


def _may_answer(status: str, op, has_path_params: bool) -> bool:
    if status in {"401", "429"}:
        return not op.public
    if status == "403":
        return not op.public and bool(op.scope)
    if status == "404":
        return has_path_params
    if status == "413":
        return bool(op.request) and op.method not in {"GET", "DELETE"}
    return bool(op.request) or has_path_params or bool(op.headers)  # 422


def _content(body: str | dict[str, str | None]) -> dict[str, Any]:
    """`"entry"` → JSON of that schema; `{"text/plain": None, ...}` → each media type (None: a string)."""
    if isinstance(body, str):
        return {"application/json": {"schema": _ref(body)}}
    return {media: {"schema": _ref(schema) if schema else {"type": "string"}} for media, schema in body.items()}


def _query_parameters(schema: dict[str, Any], owner: str) -> list[dict[str, Any]]:
    required = set(schema.get("required", []))
    out = []
    for name, sub in schema.get("properties", {}).items():
        param: dict[str, Any] = {"name": name, "in": "query", "required": name in required,
                                 "schema": localize(sub, owner)}
        if "description" in sub:
            param["description"] = sub["description"]
        out.append(param)
    return out


def localize(node: Any, owner: str, top: bool = True) -> Any:
    """A copy of schema `node` (from file `owner`) with `$ref`s pointing inside `components/schemas`."""
    if isinstance(node, list):
        return [localize(v, owner, False) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if top and key in ("$id", "$schema"):
            continue
        out[key] = _local_ref(value, owner) if key == "$ref" else localize(value, owner, False)
    return out


def _local_ref(ref: str, owner: str) -> str:
    target, _, fragment = ref.removeprefix(SCHEMA_BASE).partition("#")
    stem = target.removesuffix(".json") if target else owner
    return COMPONENTS + stem + fragment


def _ref(stem: str) -> dict[str, str]:
    default_contracts().schemas[stem]  # KeyError on a route naming a schema that does not exist
    return {"$ref": COMPONENTS + stem}


async def openapi(request: Request):
    return json_response(build_openapi(request.app.routes))


routes = [Route("/openapi.json", openapi, methods=["GET"])]
