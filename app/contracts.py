"""The wire contract: `schemas/*.json` loaded into one JSON Schema 2020-12 registry.

`validate(name, payload)` raises `ValidationFailed` listing every problem with its JSON path.
Schemas are referenced by file stem (`remember.request`) or by their `$id`.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from app.errors import ValidationFailed
from app.paths import SCHEMAS_DIR

SCHEMA_BASE = "https://schemas.memwarden.dev/"


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
            name: Draft202012Validator(schema, registry=self.registry, format_checker=Draft202012Validator.FORMAT_CHECKER)
            for name, schema in self.schemas.items()
        }

    def problems(self, name: str, payload: Any) -> list[dict[str, str]]:
        """Every way `payload` breaks schema `name`, as `{"path", "message"}`, sorted by path."""
        validator = self._validators[name]
        found = [
            {"path": _pointer(err.absolute_path), "message": _message(err)}
            for err in validator.iter_errors(payload)
        ]
        return sorted(found, key=lambda p: (p["path"], p["message"]))

    def validate(self, name: str, payload: Any) -> Any:
        """Return `payload` unchanged when it conforms to schema `name`, else raise 422."""
        found = self.problems(name, payload)
        if found:
            summary = found[0]["message"] if len(found) == 1 else f"{len(found)} problems in the request"
            raise ValidationFailed(summary, details=found)
        return payload


def _pointer(path: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path) or "/"


def _message(err: Any) -> str:
    if err.validator == "additionalProperties":
        return err.message.replace("Additional properties are", "unknown fields are").replace(
            "Additional properties", "unknown fields")
    if err.validator == "required":
        return err.message
    # Quote at most a short prefix of the offending value: it may be long or hostile.
    text = err.message
    return text if len(text) <= 300 else text[:297] + "..."


@cache
def default_contracts() -> Contracts:
    """The project's schemas, loaded once per process."""
    return Contracts()
