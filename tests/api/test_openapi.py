"""`/openapi.json` is built from the routes and `schemas/`: nothing documented is missing or dangling,
and standard tooling (openapi-spec-validator) accepts it offline."""

import json

from openapi_spec_validator import validate

from app.api.routes import ApiRoute
from app.contracts import default_contracts
from tests.schema_check import assert_schema


def _refs(node):
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _resolve(doc, ref):
    assert ref.startswith("#/"), f"non-local $ref {ref}"
    node = doc
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def test_every_api_route_is_described_and_every_ref_is_local(client):
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    validate(doc)  # the OpenAPI 3.1 meta-schema, and every $ref resolved
    assert set(doc["components"]["schemas"]) == set(default_contracts().schemas)
    assert "schemas.memwarden.dev" not in json.dumps(doc)  # no $id / absolute ref to a host that serves nothing
    described = {(path, method.upper()) for path, item in doc["paths"].items() for method in item}
    routes = [r for r in client.app.routes if isinstance(r, ApiRoute)]
    assert routes and {(r.operation.path.replace(":path}", "}"), r.operation.method) for r in routes} == described
    for ref in _refs(doc):
        assert isinstance(_resolve(doc, ref), dict), ref
    for path, item in doc["paths"].items():
        for operation in item.values():
            assert "default" in operation["responses"], path
            assert "x-query-schema" not in operation


def test_query_strings_are_real_parameters(client):
    doc = client.get("/openapi.json").json()
    listing = {p["name"]: p for p in doc["paths"]["/v1/memories"]["get"]["parameters"]}
    assert listing["agent_id"]["in"] == "query" and listing["agent_id"]["required"] is True
    assert listing["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 1000}
    assert listing["as_of"]["schema"] == {"$ref": "#/components/schemas/common/$defs/timestamp_in"}
    events = {p["name"]: p for p in doc["paths"]["/v1/events"]["get"]["parameters"]}
    assert events["after"]["schema"]["maximum"] == 2**63 - 1 and events["Last-Event-ID"]["in"] == "header"
    file_get = {p["name"]: p for p in doc["paths"]["/v1/host/workspace/files/{path}"]["get"]["parameters"]}
    assert file_get["path"]["in"] == "path" and file_get["version"]["schema"]["maximum"] == 2**31 - 1


def test_non_json_responses_have_their_real_content_types(client):
    doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    assert set(paths["/v1/audit/export"]["get"]["responses"]["200"]["content"]) == {"application/x-ndjson"}
    assert set(paths["/v1/audit/public-key"]["get"]["responses"]["200"]["content"]) == {"text/plain",
                                                                                        "application/json"}
    assert set(paths["/v1/events"]["get"]["responses"]["200"]["content"]) == {"text/event-stream"}
    diff = paths["/v1/changes/{change_id}/diff"]["get"]["responses"]["200"]
    assert diff["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/change-diff.response"}
    # ... and the endpoints really send those types (the export's is checked by the fuzz test's
    # content-type conformance against a committed database).
    assert client.get("/v1/audit/public-key").headers["content-type"].startswith("text/plain")
    as_json = client.get("/v1/audit/public-key", headers={"accept": "application/json"})
    assert as_json.headers["content-type"].startswith("application/json")
    assert_schema("public-key.response", as_json.json())


def test_every_schema_file_is_a_valid_2020_12_schema():
    from jsonschema import Draft202012Validator

    for name, schema in default_contracts().schemas.items():
        Draft202012Validator.check_schema(schema)
        assert schema.get("title"), f"{name} has no title"
