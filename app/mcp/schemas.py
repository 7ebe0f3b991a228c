"""Tool input and output schemas for MCP clients: the contract files in `schemas/`, made self-contained.

The files reference `common.json#/$defs/…`; an MCP client only sees one tool's schema, so those
references are inlined. Validation still runs against the original files (`contracts.validate`).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from app.contracts import default_contracts

if TYPE_CHECKING:
    from referencing._core import Resolver

MAX_DEPTH = 16


@cache
def input_schema(name: str) -> dict[str, Any]:
    """Schema `name` (a file stem in `schemas/`) with every `$ref` replaced by what it points to."""
    contracts = default_contracts()
    schema = contracts.schemas[name]
    inlined = _inline(schema, contracts.registry.resolver(base_uri=schema["$id"]), 0)
    inlined.pop("$id", None)  # nothing left to resolve against it; the title names the source
    return inlined


@cache
def output_schema(names: tuple[str, ...]) -> dict[str, Any]:
    """A tool's `outputSchema`: the `/v1` response schema(s) its results take (e.g. done or staged),
    inlined; several become one object schema with `oneOf`, as MCP wants an object at the root."""
    if len(names) == 1:
        return {**input_schema(names[0]), "type": "object"}  # entry.json says it with allOf only
    variants = [{k: v for k, v in input_schema(name).items() if k != "$schema"} for name in names]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "oneOf": variants}


def _inline(node: Any, resolver: Resolver, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise ValueError("schema references nest too deeply (a cycle?)")
    if isinstance(node, list):
        return [_inline(item, resolver, depth) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        resolved = resolver.lookup(node["$ref"])
        target = _inline(resolved.contents, resolved.resolver, depth + 1)
        siblings = {k: _inline(v, resolver, depth) for k, v in node.items() if k != "$ref"}
        return {**target, **siblings}
    return {key: _inline(value, resolver, depth) for key, value in node.items()}
