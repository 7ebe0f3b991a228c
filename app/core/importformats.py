"""Reading memory files for `memwarden import`: format detection and one record shape for all.

Pure: bytes in, `ImportRecord`s (or per-line problems) out; no database.

Formats:
- `jsonl` — Memwarden's own export (`memwarden export`): one Entry per line plus `status`,
  `ended_at`, `merged_into`, `superseded_by`, `run_id`, `node_id`; an optional first line
  `{"format": "memwarden.export/v1", …}`. Ids, timestamps and status are kept as they are.
- `memorywire` — a JSON array (or `{"memories"|"entries"|"results": [...]}`) of memorywire v0
  records: the `remember` fields (`agent_id`, `user_id`, `type`, `content`, `metadata`,
  `confidence`, `source`, `expires_at`) plus `id`, `created_at`/`stored_at`, `updated_at`;
  timestamps as epoch milliseconds or RFC 3339.
- `mem0` — the platform export `{"memories": [...]}`, `get_all` output `{"results": [...]}`, or a
  bare list, of `{id, memory, user_id, agent_id, run_id, metadata, categories, created_at,
  updated_at, expiration_date, hash, role}`; `categories` become tags, `hash` and `role` are kept
  as `metadata.mem0_hash` and `metadata.mem0_role`, naive timestamps are read as UTC.

Ids: a `mem_…` id is kept. Another id (a mem0 UUID, a memorywire ULID) maps to a deterministic
`mem_…` id from (tenant, format, that id) and is kept in `metadata.import_source_id`; a record
without an id gets one from (tenant, format, its position in the file, a digest of the record
itself). Not from the whole file's digest: then fixing one bad record would change every id and
the re-run would duplicate the batches already imported; this way only the fixed record's id
changes. (Inserting or removing records shifts the positions after them.) Re-importing a file therefore yields the
same ids, which is how an interrupted import resumes without duplicates.

Remapped ids (`memwarden import --remap-ids`): ids are global, so another tenant's export cannot
keep its `mem_…` ids on the same server. With `remap_ids`, a `mem_…` id maps to a deterministic id
from (target tenant, that id), kept in `metadata.import_source_id`, and `merged_into` /
`superseded_by` are mapped the same way, so the links between the file's records hold and a re-run
resumes without duplicates.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator, TypeVar

from app.core import jsontext
from app.core.ids import format_id, has_prefix
from app.core.timefmt import parse_ts, utcnow

FORMATS = ("memorywire", "mem0", "jsonl")
EXPORT_FORMAT = "memwarden.export/v1"
IMPORTABLE_STATUSES = ("live", "pending", "forgotten", "archived", "merged", "superseded")
LIST_KEYS = ("memories", "results", "entries")
REMEMBER_FIELDS = ("agent_id", "user_id", "type", "content", "metadata", "tags", "confidence", "source",
                   "expires_at", "run_id", "node_id")


@dataclass(frozen=True)
class Problem:
    """A record that cannot be imported: where it starts in the file and why."""

    line: int
    reason: str
    path: str = "/"
    record: int | None = None
    """The record's position in the file (1-based), for files holding several records on one line."""

    def __str__(self) -> str:
        where = "" if self.path in ("", "/") else f" at {self.path}"
        which = f" (record {self.record})" if self.record is not None else ""
        return f"line {self.line}{which}{where}: {self.reason}"


@dataclass
class ImportRecord:
    """One memory to import: a `remember.request` body plus what an import also keeps."""

    line: int
    id: str
    body: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    status: str = "live"
    ended_at: datetime | None = None
    merged_into: str | None = None
    superseded_by: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class FileError(ValueError):
    """The file as a whole is unusable (not JSON, unknown shape)."""


def file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def detect_format(text: str) -> str:
    """`jsonl`, `memorywire` or `mem0`, from the file's shape; FileError when none fits."""
    start = text.lstrip()
    if not start:
        raise FileError("the file is empty")
    if start[0] == "[":
        return _list_format(_loads(text))
    if start[0] != "{":
        raise FileError("not JSON or JSON lines (expected '[' or '{' first)")
    try:
        doc = jsontext.loads(text)
    except json.JSONDecodeError:
        return "jsonl"  # several JSON values: one per line
    if isinstance(doc, dict):
        for key in LIST_KEYS:
            if isinstance(doc.get(key), list):
                return _list_format(doc[key])
    return "jsonl"


def _list_format(items: Any) -> str:
    sample = next((i for i in items if isinstance(i, dict)), {}) if isinstance(items, list) else {}
    return "mem0" if "memory" in sample and "content" not in sample else "memorywire"


def _loads(text: str) -> Any:
    try:
        return jsontext.loads(text)
    except json.JSONDecodeError as exc:
        raise FileError(f"not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from None


def raw_records(text: str, fmt: str) -> Iterator[tuple[int, Any]]:
    """(line where the record starts, decoded value) for every record of the file."""
    if fmt == "jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = jsontext.loads(line)
            except json.JSONDecodeError as exc:
                yield number, FileError(f"not valid JSON: column {exc.colno}: {exc.msg}")
                continue
            if number == 1 and isinstance(value, dict) and value.get("format") == EXPORT_FORMAT:
                continue  # the export's header line
            yield number, value
        return
    _loads(text)  # a whole-document syntax error is reported once, with its position
    yield from _array_items(text)


def _array_items(text: str) -> Iterator[tuple[int, Any]]:
    """Walk the record array of a JSON document (top level, or under one of LIST_KEYS) keeping
    each item's starting line; `json.loads` alone would lose positions."""
    decoder = json.JSONDecoder()
    pos = _skip(text, 0)
    if text[pos] == "{":
        pos = _skip(text, pos + 1)
        while text[pos] != "}":
            key, pos = decoder.raw_decode(text, pos)
            pos = _skip(text, _skip(text, pos) + 1)  # past ':'
            if key in LIST_KEYS and text[pos] == "[":
                break
            _, pos = decoder.raw_decode(text, pos)
            pos = _skip(text, pos)
            if text[pos] == ",":
                pos = _skip(text, pos + 1)
        else:
            raise FileError(f"no record list: expected a JSON array or an object with one of {', '.join(LIST_KEYS)}")
    pos = _skip(text, pos + 1)  # past '['
    line, counted = 1, 0
    while text[pos] != "]":
        line += text.count("\n", counted, pos)
        counted = pos
        value, pos = decoder.raw_decode(text, pos)
        yield line, value
        pos = _skip(text, pos)
        if text[pos] == ",":
            pos = _skip(text, pos + 1)


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


# --- one record shape ------------------------------------------------------------------------------

def derived_id(*parts: str) -> str:
    """A `mem_…` id determined by `parts` (same parts, same id)."""
    return format_id("mem", int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:17], "big") >> 6)


@dataclass(frozen=True)
class Source:
    """Where records come from: what ids and defaults are derived from."""

    tenant_id: str
    fmt: str
    digest: str
    default_agent: str | None = None
    remap_ids: bool = False
    now: datetime = field(default_factory=utcnow)


def to_record(source: Source, line: int, raw: Any, ordinal: int | None = None) -> ImportRecord:
    """Normalise one decoded record of `source.fmt` (the `ordinal`-th of its file, default `line`);
    raises ValueError(reason)."""
    ordinal = line if ordinal is None else ordinal
    if isinstance(raw, FileError):
        raise raw
    if not isinstance(raw, dict):
        raise ValueError(f"a record must be a JSON object, not {type(raw).__name__}")
    if source.fmt == "mem0":
        return _mem0(source, line, ordinal, raw)
    return _native(source, line, ordinal, raw, keep_state=source.fmt == "jsonl")


def _native(source: Source, line: int, ordinal: int, raw: dict[str, Any], *, keep_state: bool) -> ImportRecord:
    known = set(REMEMBER_FIELDS) | {"id", "created_at", "updated_at", "stored_at", "status", "ended_at",
                                    "merged_into", "superseded_by", "approval_required"}
    unknown = sorted(set(raw) - known)
    if keep_state and unknown:
        raise ValueError(f"unknown field(s): {', '.join(unknown)}")
    body = {k: raw[k] for k in REMEMBER_FIELDS if raw.get(k) is not None}
    if raw.get("approval_required") is not None:
        body["approval_required"] = raw["approval_required"]
    body.setdefault("agent_id", source.default_agent)
    created = _time(raw.get("created_at", raw.get("stored_at")), "created_at", source.now)
    updated = _time(raw.get("updated_at"), "updated_at", created)
    record = ImportRecord(line=line, id="", body=body, created_at=created, updated_at=updated)
    record.id = _record_id(source, ordinal, raw.get("id"), body)
    if keep_state:
        record.status = raw.get("status") or "live"
        if record.status not in IMPORTABLE_STATUSES:
            raise ValueError(f"status {record.status!r} cannot be imported "
                             f"(one of {', '.join(IMPORTABLE_STATUSES)})")
        record.ended_at = _time(raw.get("ended_at"), "ended_at", None)
        for name in ("merged_into", "superseded_by"):
            value = raw.get(name)
            if value is not None and not (isinstance(value, str) and has_prefix(value, "mem")):
                raise ValueError(f"{name} must be a mem_… id")
            setattr(record, name, remapped_id(source.tenant_id, value) if value and source.remap_ids else value)
    return record


def _mem0(source: Source, line: int, ordinal: int, raw: dict[str, Any]) -> ImportRecord:
    text = raw.get("memory")
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ValueError("metadata must be an object")
    for name in ("hash", "role"):  # mem0's content hash and the message role it was extracted from
        if raw.get(name) is not None:
            if not isinstance(raw[name], str):
                raise ValueError(f"{name} must be a string")
            metadata = {**metadata, f"mem0_{name}": raw[name]}
    categories = raw.get("categories") or []
    if not isinstance(categories, list):
        raise ValueError("categories must be a list")
    kind = raw.get("type") or raw.get("memory_type") or metadata.get("memory_type") or "semantic"
    body = {"agent_id": raw.get("agent_id") or source.default_agent, "type": kind, "content": text,
            "metadata": metadata, "tags": list(dict.fromkeys(categories)), "source": "mem0"}
    for name in ("user_id", "run_id"):
        if raw.get(name) is not None:
            body[name] = raw[name]
    if raw.get("expiration_date") is not None:
        expires = _time(raw["expiration_date"], "expiration_date", None, naive_utc=True)
        body["expires_at"] = expires.isoformat() if expires else None
    created = _time(raw.get("created_at"), "created_at", source.now, naive_utc=True)
    updated = _time(raw.get("updated_at"), "updated_at", created, naive_utc=True)
    body = {k: v for k, v in body.items() if v is not None}
    record = ImportRecord(line=line, id="", body=body, created_at=created, updated_at=updated)
    record.id = _record_id(source, ordinal, raw.get("id"), body)
    return record


def _record_id(source: Source, ordinal: int, given: Any, body: dict[str, Any]) -> str:
    if given is None:
        return derived_id(source.tenant_id, "record", source.fmt, str(ordinal), _record_digest(body))
    if not isinstance(given, (str, int)) or isinstance(given, bool) or str(given) == "":
        raise ValueError("id must be a non-empty string")
    given_id = str(given)
    if has_prefix(given_id, "mem") and not source.remap_ids:
        return given_id
    if source.fmt == "jsonl" and not has_prefix(given_id, "mem"):
        raise ValueError("id must be a Memwarden id (mem_ and 26 base32 characters)")
    metadata = body.setdefault("metadata", {})
    if isinstance(metadata, dict):
        body["metadata"] = {**metadata, "import_source_id": given_id}
    if has_prefix(given_id, "mem"):
        return remapped_id(source.tenant_id, given_id)
    return derived_id(source.tenant_id, source.fmt, given_id)


def remapped_id(tenant_id: str, source_id: str) -> str:
    """The id a `mem_…` id of another tenant's export gets in `tenant_id` under `remap_ids`."""
    return derived_id(tenant_id, "remap", source_id)


def _record_digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


_Default = TypeVar("_Default", datetime, None)  # what `_time` gives for a missing value


def _time(value: Any, name: str, default: _Default, *, naive_utc: bool = False) -> datetime | _Default:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{name} must be an RFC 3339 timestamp or epoch milliseconds")
    try:
        if naive_utc and isinstance(value, str):
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            parsed = (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
        else:
            parsed = parse_ts(value)
        if parsed.year < 1970 or parsed.year > 9998:  # the range every other timestamp path accepts
            raise ValueError("out of range")
        return parsed
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{name} is not a timestamp: {exc}") from None
