"""The wire contract: `schemas/*.json` loaded into one JSON Schema 2020-12 registry.

`validate(name, payload)` raises `ValidationFailed` listing every problem with its JSON path.
Schemas are referenced by file stem (`remember.request`) or by their `$id`.

Two rules are stricter than plain JSON Schema, because the database and `datetime` are: an
"integer" is never a float (`3.0` is refused), and a "date-time" must be representable in UTC
(`9999-12-31T23:59:59-05:00` is refused). Every string and object key is also checked for NUL
and lone surrogates, which PostgreSQL and UTF-8 cannot store, and numbers for infinity.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker, validators
from referencing import Registry, Resource

from app.core.jsontext import UNSTORABLE, pointer_segment
from app.errors import ValidationFailed
from app.paths import SCHEMAS_DIR

SCHEMA_BASE = "https://schemas.memwarden.dev/"
MAX_TEXT_PROBLEMS = 20


def _strict_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


StrictValidator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_integer),
)
FORMATS = FormatChecker()
for _name, _check in Draft202012Validator.FORMAT_CHECKER.checkers.items():
    FORMATS.checks(_name, _check[1])(_check[0])


@FORMATS.checks("date-time", raises=(ValueError, OverflowError))
def _utc_representable_datetime(instance: object) -> bool:
    """RFC 3339 (jsonschema's own check), and the instant exists as a UTC `datetime`."""
    if not isinstance(instance, str):
        return True
    if not Draft202012Validator.FORMAT_CHECKER.conforms(instance, "date-time"):
        return False
    parsed = datetime.fromisoformat(instance.upper().replace("Z", "+00:00"))
    parsed.astimezone(timezone.utc)
    return True


def unstorable_problems(value: Any, path: str = "") -> list[dict[str, str]]:
    """Every string or key holding NUL or a lone surrogate, and every non-finite number, with its path."""
    found: list[dict[str, str]] = []
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack and len(found) < MAX_TEXT_PROBLEMS:
        where, node = stack.pop()
        if isinstance(node, str):
            if UNSTORABLE.search(node):
                found.append({"path": where or "/", "message": _unstorable_message(node)})
        elif isinstance(node, float):
            if not math.isfinite(node):
                found.append({"path": where or "/", "message": "number out of range"})
        elif isinstance(node, dict):
            for key, child in node.items():
                if UNSTORABLE.search(key):
                    # The key itself cannot be echoed safely; point at the object holding it.
                    found.append({"path": where or "/", "message": "an object key " + _unstorable_message(key)})
                    continue
                stack.append((f"{where}/{pointer_segment(key)}", child))
        elif isinstance(node, list):
            stack.extend((f"{where}/{i}", child) for i, child in enumerate(node))
    return found


def _unstorable_message(text: str) -> str:
    if "\x00" in text:
        return "contains a NUL character (\\u0000), which cannot be stored"
    return "contains a lone UTF-16 surrogate, which is not valid Unicode"


class Contracts:
    """All schemas, a validator per schema, built once per process."""

    def __init__(self, directory: Path = SCHEMAS_DIR):
        self.schemas: dict[str, dict[str, Any]] = {}
        for path in sorted(directory.glob("*.json")):
            schema = json.loads(path.read_text(encoding="utf-8"))
            expected = SCHEMA_BASE + path.name
            if schema.get("$id") != expected:
                raise ValueError(f"{path.name}: $id must be {expected!r}")
            self.schemas[path.name.removesuffix(".json")] = schema
        self.registry = Registry().with_resources(
            (s["$id"], Resource.from_contents(s)) for s in self.schemas.values()
        )
        self._validators = {
            name: StrictValidator(schema, registry=self.registry, format_checker=FORMATS)
            for name, schema in self.schemas.items()
        }
        self._property_types: dict[str, dict[str, frozenset[str]]] = {}

    def problems(self, name: str, payload: Any) -> list[dict[str, str]]:
        """Every way `payload` breaks schema `name`, as `{"path", "message"}`, sorted by path."""
        unstorable = unstorable_problems(payload)
        if unstorable:  # schema messages would quote the bad text back; report these alone
            return sorted(unstorable, key=lambda p: (p["path"], p["message"]))
        validator = self._validators[name]
        found = [
            {"path": _pointer(err.absolute_path), "message": _message(err)}
            for err in validator.iter_errors(payload)
        ]
        return sorted(found, key=lambda p: (p["path"], p["message"]))

    def property_types(self, name: str) -> dict[str, frozenset[str]]:
        """The JSON types each top-level property of schema `name` admits (through `$ref`, `oneOf`,
        `anyOf`, `enum`) — what a query-string parser needs to know to convert `"5"` or `"true"`."""
        if name not in self._property_types:
            schema = self.schemas[name]
            resolver = self.registry.resolver(base_uri=schema["$id"])
            self._property_types[name] = {
                prop: frozenset(_types_of(sub, resolver)) for prop, sub in schema.get("properties", {}).items()
            }
        return self._property_types[name]

    def validate(self, name: str, payload: Any) -> Any:
        """Return `payload` unchanged when it conforms to schema `name`, else raise 422."""
        found = self.problems(name, payload)
        if found:
            summary = found[0]["message"] if len(found) == 1 else f"{len(found)} problems in the request"
            raise ValidationFailed(summary, details=found)
        return payload


def _types_of(schema: Any, resolver: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    if "$ref" in schema:
        resolved = resolver.lookup(schema["$ref"])
        return _types_of(resolved.contents, resolved.resolver)
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return set(declared)
    found: set[str] = set()
    for key in ("oneOf", "anyOf"):
        for sub in schema.get(key, []):
            found |= _types_of(sub, resolver)
    for value in schema.get("enum", []):
        found.add({bool: "boolean", int: "integer", float: "number", str: "string"}.get(type(value), "string"))
    return found


def _pointer(path: Any) -> str:
    return "".join("/" + pointer_segment(p) for p in path) or "/"


def _message(err: Any) -> str:
    if err.validator == "additionalProperties":
        return err.message.replace("Additional properties are", "unknown fields are").replace(
            "Additional properties", "unknown fields")
    if err.validator == "required":
        return err.message
    if err.validator in ("oneOf", "anyOf") and isinstance(err.schema, dict) and err.schema.get("description"):
        return "expected " + err.schema["description"]  # e.g. a timestamp: RFC 3339 or epoch ms
    # Quote at most a short prefix of the offending value: it may be long or hostile.
    text = err.message
    return text if len(text) <= 300 else text[:297] + "..."


@cache
def default_contracts() -> Contracts:
    """The project's schemas, loaded once per process."""
    return Contracts()
