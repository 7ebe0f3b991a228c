"""Typed SQLAlchemy models. Migrations in `app/db/migrations` are the schema's source of truth;
these mappings mirror them for queries."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (REAL, BigInteger, Computed, DateTime, ForeignKey, ForeignKeyConstraint, LargeBinary, Text,
                        func)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSONB, list[str]: ARRAY(Text), datetime: DateTime(timezone=True)}


class Tenant(Base):
    """An isolated customer space: its memories, keys, users and audit chain."""

    __tablename__ = "tenants"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    """Opaque id, `ten_…`."""
    name: Mapped[str] = mapped_column(Text, unique=True)
    """Human slug used by the CLI (`--tenant NAME`)."""
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    settings: Mapped[dict[str, Any]] = mapped_column(server_default="{}")
    """Per-tenant options, e.g. `redaction_mode` (`redact`/`reject`)."""


class ApiKey(Base):
    """An agent credential bound to one tenant; only a SHA-256 of the token is stored."""

    __tablename__ = "api_keys"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    """Public id, `key_…`; also the token's lookup prefix."""
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    name: Mapped[str] = mapped_column(Text, server_default="")
    token_hash: Mapped[bytes] = mapped_column(LargeBinary)
    """SHA-256 of the full token; tokens carry 256 bits of randomness, so no slow hash is needed."""
    scopes: Mapped[list[str]]
    agents: Mapped[list[str]]
    """Glob patterns of agent ids this key may act for."""
    sources: Mapped[list[str]] = mapped_column(server_default="{}")
    """Glob patterns of privileged `source` values this key may assert (write screening, provenance)."""
    origins: Mapped[list[str]] = mapped_column(server_default="{}")
    """Provenance origins (`user`, `document` …) this key's writes may claim in `source`; empty: any."""
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    revoked_at: Mapped[datetime | None]
    last_used_at: Mapped[datetime | None]
    read_budget_exceeded_at: Mapped[datetime | None]
    """When the key last met its read budget (`app.services.audit.read_budgets`); shown on the admin page."""
    owner_user_id: Mapped[str | None] = mapped_column(ForeignKey("users.id"))
    """The person the key belongs to (None: no one). Its approvals count as that person's, so one
    person cannot give both approvals of a two-person change with a key and a sign-in."""


class AuditEntry(Base):
    """One hash-chained audit event. `entry` holds the exact canonical bytes that were hashed;
    the other columns are copies for querying and are checked against those bytes by verify."""

    __tablename__ = "audit_entries"
    chain_id: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    entry: Mapped[bytes] = mapped_column(LargeBinary)
    leaf_hash: Mapped[bytes] = mapped_column(LargeBinary)
    chain_hash: Mapped[bytes] = mapped_column(LargeBinary)
    tenant_id: Mapped[str | None] = mapped_column(Text)
    event_type: Mapped[str] = mapped_column(Text)
    ts: Mapped[datetime]
    actor: Mapped[str] = mapped_column(Text)
    subject_type: Mapped[str | None] = mapped_column(Text)
    subject_id: Mapped[str | None] = mapped_column(Text)


class AuditCheckpoint(Base):
    """A signed checkpoint (C2SP signed note) of one chain at one size, with the Merkle
    frontier at that size so the next checkpoint only hashes new leaves."""

    __tablename__ = "audit_checkpoints"
    chain_id: Mapped[str] = mapped_column(Text, primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    note: Mapped[str] = mapped_column(Text)
    frontier: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


class Memory(Base):
    """One memory. `status` is the pending sentinel and lifecycle: pending → live → forgotten/
    archived/merged/superseded, or pending → rejected/withdrawn. Reads filter on it in SQL."""

    __tablename__ = "memories"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    agent_id: Mapped[str] = mapped_column(Text)
    user_id: Mapped[str | None] = mapped_column(Text)
    type: Mapped[str] = mapped_column(Text)
    content: Mapped[str | None] = mapped_column(Text)
    """NULL only after a hard delete."""
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", server_default="{}")
    tags: Mapped[list[str]] = mapped_column(server_default="{}")
    confidence: Mapped[float] = mapped_column(REAL, server_default="1")
    source: Mapped[str | None] = mapped_column(Text)
    embedding: Mapped[Any] = mapped_column(Vector(384), nullable=True, deferred=True)
    content_tsv: Mapped[Any] = mapped_column(
        TSVECTOR, Computed("to_tsvector('english', coalesce(content, ''))", persisted=True), deferred=True)
    status: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now())
    live_from: Mapped[datetime | None]
    """When it became visible (approval time for staged writes); `as_of` compares against it."""
    ended_at: Mapped[datetime | None]
    """When it stopped being visible (forgotten, archived, merged, superseded)."""
    expires_at: Mapped[datetime | None]
    hard_deleted: Mapped[bool] = mapped_column(server_default="false")
    score_multiplier: Mapped[float] = mapped_column(REAL, server_default="1")
    """< 1 after an `expire` with action `demote`."""
    recall_count: Mapped[int] = mapped_column(server_default="0")
    last_recalled_at: Mapped[datetime | None]
    merged_into: Mapped[str | None] = mapped_column(Text)
    superseded_by: Mapped[str | None] = mapped_column(Text)
    change_id: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(Text)
    node_id: Mapped[str | None] = mapped_column(Text)
    digest_key: Mapped[bytes | None] = mapped_column(LargeBinary)
    """Per-memory key of the content digest in the audit log; destroyed by a hard delete."""
    written_by: Mapped[str | None] = mapped_column(Text)
    """The API key id that wrote it (`cli:<user>` for an operator's import); NULL on rows older than
    migration 0023, whose writer is the actor of their audit entry (see `app.services.audit.recover`)."""


class Change(Base):
    """A staged write awaiting (or past) review: the requested operation, resolved on decision."""

    __tablename__ = "changes"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    agent_id: Mapped[str] = mapped_column(Text)
    user_id: Mapped[str | None] = mapped_column(Text)
    operation: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default="pending")
    request: Mapped[dict[str, Any]]
    memory_ids: Mapped[list[str]] = mapped_column(server_default="{}")
    submitted_at: Mapped[datetime] = mapped_column(server_default=func.now())
    submitted_by: Mapped[str] = mapped_column(Text)
    decided_at: Mapped[datetime | None]
    decided_by: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    approvals: Mapped[list[Any]] = mapped_column(JSONB, server_default="[]")
    approvals_required: Mapped[int] = mapped_column(server_default="1")
    policy_rule: Mapped[str | None] = mapped_column(Text)
    redactions: Mapped[list[Any]] = mapped_column(JSONB, server_default="[]")
    risk_flags: Mapped[list[Any]] = mapped_column(JSONB, server_default="[]")
    """Write screening flags `{name, severity, score, evidence: [{field, start, end}]}` (app.core.screening)."""
    risk_level: Mapped[str] = mapped_column(Text, server_default="none")
    """Highest flag severity: none / low / medium / high."""
    result: Mapped[dict[str, Any] | None]
    sla_announced_at: Mapped[datetime | None]
    """When its `review.sla_breached` event was written (migration 0021); NULL until then."""
    decided_view: Mapped[dict[str, Any] | None]
    """What the reviewer saw when deciding: `{"diff", "reviewer"}`, or `{"erased": true}` once a memory
    it quoted was hard-deleted (migration 0028); NULL while pending and for older decisions."""
    decided_refs: Mapped[list[str]] = mapped_column(server_default="{}")
    """Ids of the memories whose content `decided_view` holds (a hard delete erases the copy)."""


class TenantSecret(Base):
    """A secret value a tenant registered for redaction, stored only as a keyed hash and length."""

    __tablename__ = "tenant_secrets"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    label: Mapped[str] = mapped_column(Text)
    digest: Mapped[bytes] = mapped_column(LargeBinary)
    length: Mapped[int]
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


class User(Base):
    """A person who signs in to review, audit or administer (argon2 password hash)."""

    __tablename__ = "users"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    username: Mapped[str] = mapped_column(Text)
    """Unique within its namespace: the home tenant's, or the operator's (no home tenant)."""
    home_tenant_id: Mapped[str | None] = mapped_column(ForeignKey("tenants.id"))
    """Set for accounts a tenant's admin created: they sign in as `<tenant name>/<username>`."""
    password_hash: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    disabled_at: Mapped[datetime | None]
    sessions_valid_after: Mapped[datetime] = mapped_column(server_default=func.now())
    """Sessions created before this instant are void ("sign out everywhere")."""
    oidc_issuer: Mapped[str | None]
    oidc_subject: Mapped[str | None]
    """Set for accounts provisioned by OpenID Connect sign-in (`app.services.tenancy.oidc`); they have no
    usable password."""


class UserRole(Base):
    """A user's role in one tenant and the agents whose changes they may see and decide."""

    __tablename__ = "user_roles"
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    role: Mapped[str] = mapped_column(Text)
    agents: Mapped[list[str]] = mapped_column(server_default="{*}")


class WebSession(Base):
    """A signed-in browser; the cookie carries only this id, signed."""

    __tablename__ = "web_sessions"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    last_seen_at: Mapped[datetime] = mapped_column(server_default=func.now())
    revoked_at: Mapped[datetime | None]


# --- OpenWOP: events, runs, refs, webhooks (migration 0005) ----------------------------------------

class Event(Base):
    """One entry of a tenant's event log (SSE and webhooks read it). `id` increases per tenant in
    commit order; `payload` holds identifiers only, never memory content."""

    __tablename__ = "events"
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    type: Mapped[str] = mapped_column(Text)
    payload: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


class Run(Base):
    """A workflow run: its start instant is the snapshot its reads see (RFC 0004)."""

    __tablename__ = "runs"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    """`run_…`."""
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    agent_id: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime]
    created_by: Mapped[str] = mapped_column(Text)
    """The API key that started it."""


class MemoryRef(Base):
    """An opaque memory ref (`mref_…`) naming one (tenant, agent, user) scope; one ref per scope."""

    __tablename__ = "memory_refs"
    ref: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    agent_id: Mapped[str] = mapped_column(Text)
    user_id: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


class Webhook(Base):
    """A tenant's HTTP endpoint for events; the signing secret is stored encrypted, shown once."""

    __tablename__ = "webhooks"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    """`whk_…`."""
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    secret_enc: Mapped[bytes] = mapped_column(LargeBinary)
    """AES-GCM under a key derived from the server secret key (nonce ‖ ciphertext)."""
    event_types: Mapped[list[str]] = mapped_column(server_default="{}")
    """Types delivered; empty means all."""
    agents: Mapped[list[str]] = mapped_column(server_default="{*}")
    """The creating key's agent allow-list: events about other agents are not delivered."""
    active: Mapped[bool] = mapped_column(server_default="true")
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    created_by: Mapped[str] = mapped_column(Text)
    format: Mapped[str] = mapped_column(Text, server_default="json")
    """Body delivered: `json` (the signed event envelope) or `slack` (`{"text": ...}`)."""


class WebhookDelivery(Base):
    """One event owed to one webhook: the outbox row the delivery job works off, and its log."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (ForeignKeyConstraint(["webhook_id", "tenant_id"], ["webhooks.id", "webhooks.tenant_id"],
                                           ondelete="CASCADE"),)
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    webhook_id: Mapped[str] = mapped_column(Text)
    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    event_id: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(Text, server_default="pending")
    """pending → delivered, or failed after the last attempt."""
    attempt: Mapped[int] = mapped_column(server_default="0")
    """Attempts made so far."""
    status_code: Mapped[int | None]
    error: Mapped[str | None] = mapped_column(Text)
    next_attempt_at: Mapped[datetime | None]
    last_attempt_at: Mapped[datetime | None]
    delivered_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


# --- The router: other memory stores governed memories are delivered to (migration 0027) -----------

class MemoryBackend(Base):
    """A store besides the built-in one that receives a tenant's governed memories (by agent
    pattern) and is searched by recall. Secrets (an API key) are stored encrypted, never shown."""

    __tablename__ = "memory_backends"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    """`mbk_…`."""
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text)
    """`mem0`, `memwarden` (another server, over HTTP) or `memorywire` (a MemoryStore by import path)."""
    agents: Mapped[str] = mapped_column(Text, server_default="*")
    """Glob of the agent ids whose memories this backend takes."""
    agents_like: Mapped[str] = mapped_column(Text, server_default="%")
    """`agents` as a LIKE pattern, for the outbox trigger."""
    options: Mapped[dict[str, Any]] = mapped_column(server_default="{}")
    """Non-secret configuration: `url`, `factory` (module:callable), `config` (a JSON file path)."""
    secret_enc: Mapped[bytes | None] = mapped_column(LargeBinary)
    weight: Mapped[float] = mapped_column(REAL, server_default="1")
    timeout_ms: Mapped[int] = mapped_column(server_default="2000")
    enabled: Mapped[bool] = mapped_column(server_default="true")
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


class BackendDelivery(Base):
    """One memory owed to one backend (written by a trigger on `memories`): the outbox row the
    delivery job works off, and its log. The job syncs the memory's state at delivery time."""

    __tablename__ = "backend_deliveries"
    __table_args__ = (ForeignKeyConstraint(["backend_id", "tenant_id"], ["memory_backends.id", "memory_backends.tenant_id"],
                                           ondelete="CASCADE"),)
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    backend_id: Mapped[str] = mapped_column(Text)
    memory_id: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default="pending")
    """pending → delivered, or failed after the last attempt."""
    attempt: Mapped[int] = mapped_column(server_default="0")
    claims: Mapped[int] = mapped_column(server_default="0")
    """Times a delivery process leased it: above 1, an earlier holder may have written before it died."""
    action: Mapped[str | None] = mapped_column(Text)
    """What delivery did: `put`, `delete`, `unchanged` or `absent`."""
    error: Mapped[str | None] = mapped_column(Text)
    next_attempt_at: Mapped[datetime] = mapped_column(server_default=func.now())
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    delivered_at: Mapped[datetime | None]


class BackendRecord(Base):
    """What a backend holds for a memory: its own id for it and the digest of what was delivered."""

    __tablename__ = "backend_records"
    __table_args__ = (ForeignKeyConstraint(["backend_id", "tenant_id"], ["memory_backends.id", "memory_backends.tenant_id"],
                                           ondelete="CASCADE"),)
    backend_id: Mapped[str] = mapped_column(Text, primary_key=True)
    memory_id: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    backend_ref: Mapped[str] = mapped_column(Text)
    content_digest: Mapped[str] = mapped_column(Text)
    delivered_at: Mapped[datetime] = mapped_column(server_default=func.now())


class ErasureReceipt(Base):
    """A store's confirmed erasure of a memory (migration 0043): the signed receipt and what it names."""

    __tablename__ = "erasure_receipts"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    memory_id: Mapped[str] = mapped_column(Text)
    backend_id: Mapped[str] = mapped_column(Text)
    store: Mapped[str] = mapped_column(Text)
    audit_seq: Mapped[int] = mapped_column(BigInteger)
    confirmed_at: Mapped[datetime] = mapped_column()
    note: Mapped[str] = mapped_column(Text)


# --- OpenWOP: workspace files and compaction runs (migration 0006) -----------------------------------

class WorkspaceFile(Base):
    """A workspace file's head (RFC 0059): the current version, or a tombstone when `deleted`."""

    __tablename__ = "workspace_files"
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    path: Mapped[str] = mapped_column(Text, primary_key=True)
    """Flat name; `/` may appear inside it, `..` never."""
    version: Mapped[int]
    """Latest version written (tombstones included); monotonic, never reused."""
    content_type: Mapped[str] = mapped_column(Text)
    deleted: Mapped[bool] = mapped_column(server_default="false")
    digest_key: Mapped[bytes] = mapped_column(LargeBinary)
    """Per-file key of the content digests in the audit log (as for memories)."""
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now())


class WorkspaceVersion(Base):
    """One retained version of a workspace file; a tombstone has `deleted` and no content."""

    __tablename__ = "workspace_versions"
    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    path: Mapped[str] = mapped_column(Text, primary_key=True)
    version: Mapped[int] = mapped_column(primary_key=True)
    content: Mapped[str | None] = mapped_column(Text)
    content_type: Mapped[str] = mapped_column(Text)
    etag: Mapped[str] = mapped_column(Text)
    byte_size: Mapped[int] = mapped_column(server_default="0")
    deleted: Mapped[bool] = mapped_column(server_default="false")
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    """When this version became current; `snapshot=` reads compare against it."""
    created_by: Mapped[str] = mapped_column(Text)
    """The API key that wrote it (for an approved change, the submitting key)."""
    run_id: Mapped[str | None] = mapped_column(Text)
    change_id: Mapped[str | None] = mapped_column(Text)


class CompactionRun(Base):
    """One compaction pass over a tenant (RFC 0012); its id is the `compacted-from:<id>` tag."""

    __tablename__ = "compaction_runs"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    """`cmp_…`."""
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    agent_id: Mapped[str | None] = mapped_column(Text)
    trigger: Mapped[str] = mapped_column(Text)
    """`schedule` (the background job) or `cli` (`memwarden compact`)."""
    status: Mapped[str] = mapped_column(Text, server_default="running")
    started_at: Mapped[datetime] = mapped_column(server_default=func.now())
    finished_at: Mapped[datetime | None]
    stats: Mapped[dict[str, Any]] = mapped_column(server_default="{}")


class ConsolidationRun(Base):
    """One consolidation pass over a tenant (short-term to long-term memory, `app.services.memory.consolidation`)."""

    __tablename__ = "consolidation_runs"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    """`cns_…`."""
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    agent_id: Mapped[str | None] = mapped_column(Text)
    trigger: Mapped[str] = mapped_column(Text)
    """`schedule`, `cli` (`memwarden consolidate`) or `api` (`POST /v1/consolidate`)."""
    dry_run: Mapped[bool] = mapped_column(server_default="false")
    status: Mapped[str] = mapped_column(Text, server_default="running")
    started_at: Mapped[datetime] = mapped_column(server_default=func.now())
    finished_at: Mapped[datetime | None]
    stats: Mapped[dict[str, Any]] = mapped_column(server_default="{}")


class ConsolidationClaim(Base):
    """A promotion or eviction a consolidation pass carried out or staged, claimed once by its key
    (a digest of the window and the source ids) in the same transaction as the write."""

    __tablename__ = "consolidation_claims"
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    kind: Mapped[str] = mapped_column(Text)
    """`promote` or `evict`."""
    run_id: Mapped[str] = mapped_column(Text)
    agent_id: Mapped[str] = mapped_column(Text)
    user_id: Mapped[str | None] = mapped_column(Text)
    source_ids: Mapped[list[str]] = mapped_column(ARRAY(Text))
    memory_id: Mapped[str | None] = mapped_column(Text)
    """The promoted memory (live or pending)."""
    change_id: Mapped[str | None] = mapped_column(Text)
    """The change that staged it, when a policy rule did."""
    evidence: Mapped[dict[str, Any]] = mapped_column(server_default="{}")
    """Scores and source ids, never content (the change page shows it beside the sources)."""
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


class IdempotencyKey(Base):
    """The first answer to a `/v1` write sent with an `Idempotency-Key`, kept 24 h for replays.
    Written in the write's own transaction, so a committed write always has its answer."""

    __tablename__ = "idempotency_keys"
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    fingerprint: Mapped[bytes] = mapped_column(LargeBinary)
    """SHA-256 of method, path, query, API key id and canonical body."""
    status_code: Mapped[int]
    headers: Mapped[list[Any]] = mapped_column(JSONB)
    """`[[name, value], …]` as the handler set them (content type, ETag, Location …)."""
    body: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    expires_at: Mapped[datetime]


class PolicySuggestion(Base):
    """A policy rule suggested from the tenant's own decisions (migration 0030). The id is derived
    from the rule's match, so a pattern keeps its id while its evidence changes; `status` is `open`,
    `accepted` (then `rule_id` names the rule it became) or `dismissed` (then `dismissed_support`
    is the consistent decisions counted when it was dismissed: it reopens only on materially more)."""

    __tablename__ = "policy_suggestions"
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    match: Mapped[dict[str, Any]] = mapped_column(JSONB)
    action: Mapped[str] = mapped_column(Text)
    evidence: Mapped[dict[str, Any]] = mapped_column(JSONB)
    status: Mapped[str] = mapped_column(Text, server_default="open")
    dismissed_support: Mapped[int | None]
    rule_id: Mapped[str | None] = mapped_column(Text)
    decided_by: Mapped[str | None] = mapped_column(Text)
    decided_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now())
