"""`/openapi.json` is built from the routes and `schemas/`: nothing documented is missing or dangling."""

from app.api.routing import ApiRoute
from app.contracts import default_contracts


def test_every_api_route_is_described_with_resolvable_schemas(client):
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    ids = {schema["$id"] for schema in doc["components"]["schemas"].values()}
    assert ids == {s["$id"] for s in default_contracts().schemas.values()}
    described = {(path, method.upper()) for path, item in doc["paths"].items() for method in item}
    routes = [r for r in client.app.routes if isinstance(r, ApiRoute)]
    assert routes and {(r.operation.path.replace(":path}", "}"), r.operation.method) for r in routes} == described

    def refs(node):
        if isinstance(node, dict):
            if "$ref" in node:
                yield node["$ref"]
            for value in node.values():
                yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    for ref in refs(doc["paths"]):
        assert ref in ids, ref
    for path, item in doc["paths"].items():
        for operation in item.values():
            if operation.get("security"):
                assert "default" in operation["responses"], path


def test_every_schema_file_is_a_valid_2020_12_schema():
    from jsonschema import Draft202012Validator

    for name, schema in default_contracts().schemas.items():
        Draft202012Validator.check_schema(schema)
        assert schema.get("title"), f"{name} has no title"
