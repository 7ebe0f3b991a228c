"""Parsing Server-Sent Events in tests."""

import json
from typing import Iterable


def parse_sse(text: str) -> list[dict]:
    """`[{"id", "type", "data"}]` from an event-stream body (comments and keepalives skipped)."""
    return events_from_lines(text.splitlines())


def events_from_lines(lines: Iterable[str]) -> list[dict]:
    return list(iter_events(lines))


def iter_events(lines: Iterable[str]):
    """Yield each event as soon as its blank terminating line arrives."""
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if "id" in fields:
                yield {"id": int(fields["id"]), "type": fields["event"], "data": json.loads(fields["data"])}
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
