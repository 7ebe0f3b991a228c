"""Typed results of the Memwarden API (field names as on the wire, contract §3, §4, §6).

Each result keeps the server's JSON in `raw`, so a field added by a newer server is still
reachable; timestamps are parsed into aware `datetime`s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 string from the server as an aware UTC datetime (None stays None)."""
    if value is None:
        return None
    text = str(value)
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(text).astimezone(timezone.utc)


@dataclass(frozen=True)
class Redaction:
    """A secret-shaped value the server replaced (`<REDACTED:label>`); never the secret itself."""

    field: str
    label: str


def _redactions(items: Any) -> list[Redaction]:
    return [Redaction(r.get("field", ""), r.get("label", "")) for r in items or []]


@dataclass(frozen=True)
class Memory:
    """A live memory (the contract's Entry)."""

    id: str
    agent_id: str
    user_id: str | None
    type: str
    content: str
    metadata: dict[str, Any]
    tags: list[str]
    confidence: float
    source: str | None
    created_at: datetime | None
    updated_at: datetime | None
    expires_at: datetime | None
    status: str
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Memory:
        return cls(id=data["id"], agent_id=data["agent_id"], user_id=data.get("user_id"), type=data["type"],
                   content=data["content"], metadata=data.get("metadata") or {}, tags=list(data.get("tags") or []),
                   confidence=float(data.get("confidence", 1.0)), source=data.get("source"),
                   created_at=parse_time(data.get("created_at")), updated_at=parse_time(data.get("updated_at")),
                   expires_at=parse_time(data.get("expires_at")), status=data.get("status", "live"), raw=data)


@dataclass(frozen=True)
class RecallHit(Memory):
    """A memory found by recall, with its fused relevance score and its cosine similarity to the query."""

    score: float = 0.0
    similarity: float | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RecallHit:
        base = Memory.from_json(data)
        similarity = data.get("similarity")
        return cls(**{**base.__dict__, "score": float(data.get("score", 0.0)),
                      "similarity": float(similarity) if similarity is not None else None})


@dataclass(frozen=True)
class RecallResult:
    hits: list[RecallHit]
    latency_ms: float | None
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RecallResult:
        return cls([RecallHit.from_json(h) for h in data.get("hits", [])], data.get("latency_ms"), data)


@dataclass(frozen=True)
class Staged:
    """Fields every write answered with 202 carries: the change a reviewer will decide."""

    change_id: str | None
    review_url: str | None

    @property
    def pending(self) -> bool:
        return self.change_id is not None


@dataclass(frozen=True)
class RememberResult(Staged):
    """201 (`status == "live"`, `memory` set) or 202 (`status == "pending"`, `change_id` set)."""

    id: str | None = None
    status: str = "live"
    memory: Memory | None = None
    redactions: list[Redaction] = field(default_factory=list)
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RememberResult:
        return cls(change_id=data.get("change_id"), review_url=data.get("review_url"), id=data.get("id"),
                   status=data.get("status", "live"),
                   memory=Memory.from_json(data["memory"]) if data.get("memory") else None,
                   redactions=_redactions(data.get("redactions")), raw=data)


@dataclass(frozen=True)
class ForgetResult(Staged):
    """`forgotten` ids when done; `matched` (a count) when staged for review."""

    status: str = "done"
    forgotten: list[str] = field(default_factory=list)
    hard_delete: bool = False
    matched: int | None = None
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ForgetResult:
        return cls(change_id=data.get("change_id"), review_url=data.get("review_url"), status=data["status"],
                   forgotten=list(data.get("forgotten") or []), hard_delete=bool(data.get("hard_delete")),
                   matched=data.get("matched"), raw=data)


@dataclass(frozen=True)
class MergeResult(Staged):
    status: str = "done"
    memory: Memory | None = None
    merged: list[str] = field(default_factory=list)
    strategy: str | None = None
    matched: int | None = None
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MergeResult:
        return cls(change_id=data.get("change_id"), review_url=data.get("review_url"), status=data["status"],
                   memory=Memory.from_json(data["memory"]) if data.get("memory") else None,
                   merged=list(data.get("merged") or []), strategy=data.get("strategy"),
                   matched=data.get("matched"), raw=data)


@dataclass(frozen=True)
class ExpireResult(Staged):
    status: str = "done"
    affected: list[str] = field(default_factory=list)
    action: str | None = None
    matched: int | None = None
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExpireResult:
        return cls(change_id=data.get("change_id"), review_url=data.get("review_url"), status=data["status"],
                   affected=list(data.get("affected") or []), action=data.get("action"),
                   matched=data.get("matched"), raw=data)


@dataclass(frozen=True)
class DeleteResult(Staged):
    deleted: bool = False
    id: str | None = None
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DeleteResult:
        return cls(change_id=data.get("change_id"), review_url=data.get("review_url"),
                   deleted=bool(data.get("deleted")), id=data.get("id"), raw=data)


@dataclass(frozen=True)
class MemoryPage:
    """One page of `GET /v1/memories`, newest first; pass `next_cursor` back for the next."""

    items: list[Memory]
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MemoryPage:
        return cls([Memory.from_json(m) for m in data.get("items", [])], data.get("next_cursor"))


@dataclass(frozen=True)
class HistoryEvent:
    """One audit event about a memory (identifiers and digests, never content)."""

    seq: int
    type: str
    ts: datetime | None
    actor: Any
    data: dict[str, Any]


@dataclass(frozen=True)
class History:
    memory_id: str | None
    events: list[HistoryEvent]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> History:
        return cls(data.get("memory_id"), [HistoryEvent(e["seq"], e["type"], parse_time(e.get("ts")), e.get("actor"),
                                                        e.get("data") or {}) for e in data.get("events", [])])


@dataclass(frozen=True)
class Change:
    """A staged change and its review state (contract §4)."""

    id: str
    operation: str
    status: str
    agent_id: str
    user_id: str | None
    memory_ids: list[str]
    submitted_at: datetime | None
    decided_at: datetime | None
    decided_by: str | None
    reason: str | None
    approvals: list[dict[str, Any]]
    approvals_required: int | None = None
    policy_rule: str | None = None
    redactions: list[Redaction] = field(default_factory=list)
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Change:
        return cls(id=data["id"], operation=data["operation"], status=data["status"], agent_id=data["agent_id"],
                   user_id=data.get("user_id"), memory_ids=list(data.get("memory_ids") or []),
                   submitted_at=parse_time(data.get("submitted_at")), decided_at=parse_time(data.get("decided_at")),
                   decided_by=data.get("decided_by"), reason=data.get("reason"),
                   approvals=list(data.get("approvals") or []), approvals_required=data.get("approvals_required"),
                   policy_rule=data.get("policy_rule"), redactions=_redactions(data.get("redactions")), raw=data)


@dataclass(frozen=True)
class ChangePage:
    items: list[Change]
    total: int | None
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChangePage:
        return cls([Change.from_json(c) for c in data.get("items", [])], data.get("total"), data.get("next_cursor"))


@dataclass(frozen=True)
class ChangeDiff:
    """A pending change diffed against live state now; quote `fingerprint` as `seen_state` when deciding."""

    change: Change
    diff: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @property
    def fingerprint(self) -> str | None:
        return (self.diff or {}).get("fingerprint")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChangeDiff:
        return cls(Change.from_json(data["change"]), data.get("diff"), data)


@dataclass(frozen=True)
class Checkpoint:
    """A signed checkpoint (C2SP signed note) of the tenant's audit chain at `size` entries."""

    size: int
    note: str
    created_at: datetime | None


@dataclass(frozen=True)
class Checkpoints:
    chain_id: str
    vkey: str
    checkpoints: list[Checkpoint]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Checkpoints:
        return cls(data["chain_id"], data["vkey"],
                   [Checkpoint(c["size"], c["note"], parse_time(c.get("created_at"))) for c in data["checkpoints"]])


# --- workspace files (contract §7, OpenWOP RFC 0059) --------------------------------------------

@dataclass(frozen=True)
class WorkspaceFile:
    """One version of a workspace file; send `etag` back as `if_match` to write over exactly it."""

    path: str
    content: str
    content_type: str
    version: int
    etag: str
    updated_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkspaceFile:
        return cls(path=data["path"], content=data["content"], content_type=data.get("contentType", ""),
                   version=data["version"], etag=data["etag"], updated_at=parse_time(data.get("updatedAt")),
                   raw=data)


@dataclass(frozen=True)
class WorkspaceFileInfo:
    """A workspace file's metadata as listed (no body)."""

    path: str
    content_type: str
    version: int
    etag: str
    byte_size: int
    updated_at: datetime | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkspaceFileInfo:
        return cls(path=data["path"], content_type=data.get("contentType", ""), version=data["version"],
                   etag=data["etag"], byte_size=data.get("byteSize", 0), updated_at=parse_time(data.get("updatedAt")))


def workspace_listing(data: dict[str, Any]) -> list[WorkspaceFileInfo]:
    """The `files` of a workspace listing."""
    return [WorkspaceFileInfo.from_json(item) for item in data.get("files", [])]


@dataclass(frozen=True)
class WorkspaceWrite(Staged):
    """A PUT or DELETE: done (`file` set on a write, `deleted` on a delete) or staged (`pending`)."""

    path: str = ""
    file: WorkspaceFile | None = None
    deleted: bool = False
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkspaceWrite:
        pending = data.get("status") == "pending"
        return cls(change_id=data.get("changeId") if pending else None,
                   review_url=data.get("reviewUrl") if pending else None, path=data.get("path", ""),
                   file=WorkspaceFile.from_json(data) if "content" in data else None,
                   deleted=bool(data.get("deleted")), raw=data)


@dataclass(frozen=True)
class Whoami:
    """What the calling key may do: its tenant, scopes and agent allow-list (`GET /v1/whoami`)."""

    tenant_id: str
    key_id: str
    scopes: list[str]
    agents: list[str]
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Whoami:
        return cls(tenant_id=data["tenant_id"], key_id=data["key_id"], scopes=list(data.get("scopes") or []),
                   agents=list(data.get("agents") or []), raw=data)


@dataclass(frozen=True)
class Delivery:
    """The newest delivery of a memory to one backend (the router's stores)."""

    backend: str
    status: str
    attempts: int
    action: str | None
    error: str | None
    owed_at: datetime | None
    delivered_at: datetime | None
    backend_ref: str | None
    """The backend's own id for the memory."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Delivery:
        return cls(backend=data["backend"], status=data["status"], attempts=int(data.get("attempts", 0)),
                   action=data.get("action"), error=data.get("error"), owed_at=parse_time(data.get("owed_at")),
                   delivered_at=parse_time(data.get("delivered_at")), backend_ref=data.get("backend_ref"))


def deliveries(data: dict[str, Any]) -> list[Delivery]:
    return [Delivery.from_json(item) for item in data.get("deliveries") or []]


@dataclass(frozen=True)
class Read:
    """One read (recall, get, list or history) that returned a memory; never the query's text."""

    read_id: str
    read_at: datetime | None
    actor: str
    key_id: str | None
    agent_id: str | None
    operation: str
    query_digest: str | None
    audit_seq: int | None
    returned: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Read:
        return cls(read_id=data["read_id"], read_at=parse_time(data.get("read_at")), actor=data["actor"],
                   key_id=data.get("key_id"), agent_id=data.get("agent_id"), operation=data["operation"],
                   query_digest=data.get("query_digest"), audit_seq=data.get("audit_seq"),
                   returned=int(data.get("returned", 0)))


@dataclass(frozen=True)
class ReadersPage:
    """One page of the reads that returned a memory, newest first."""

    memory_id: str
    items: list[Read]
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReadersPage:
        return cls(memory_id=data["memory_id"], items=[Read.from_json(i) for i in data.get("items") or []],
                   next_cursor=data.get("next_cursor"))
