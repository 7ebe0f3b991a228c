"""Settings: one frozen object read from the environment (contract §8).

Nothing happens at import time. `Settings.from_env()` reads variables; `ensure_secrets()`
creates the generated key files in the data dir on first use (0600).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping


def _setting(env: str, default: Any, help: str) -> Any:
    return field(default=default, metadata={"env": env, "help": help})


@dataclass(frozen=True)
class Settings:
    """Every knob Memwarden reads. Each field names its environment variable."""

    database_url: str | None = _setting(
        "MEMWARDEN_DATABASE_URL", None,
        "PostgreSQL (with pgvector) to use; unset starts the embedded PostgreSQL in the data dir.")
    migration_database_url: str | None = _setting(
        "MEMWARDEN_MIGRATION_DATABASE_URL", None,
        "Owner role URL for migrations when the app role may not alter the schema; defaults to the database URL.")
    data_dir: Path = _setting(
        "MEMWARDEN_DATA_DIR", Path(".memwarden"),
        "Embedded database and generated keys.")
    secret_key: str | None = _setting(
        "MEMWARDEN_SECRET_KEY", None,
        "Session and CSRF signing key; generated once into the data dir when unset.")
    signing_key_file: Path | None = _setting(
        "MEMWARDEN_SIGNING_KEY_FILE", None,
        "Ed25519 private key (PEM) for audit checkpoints; generated once into the data dir when unset.")
    embedder: str = _setting(
        "MEMWARDEN_EMBEDDER", "local",
        "Embedding model: `local` (bundled all-MiniLM-L6-v2 ONNX) or `openai:<model>@<base_url>`.")
    contradiction_model: bool = _setting(
        "MEMWARDEN_CONTRADICTION_MODEL", True,
        "Read what an approval retires with the shipped contradiction model as well as the rules: a write that "
        "reports a change retires the live memory the model reads it as ruling out. Off: rules only.")
    host: str = _setting("MEMWARDEN_HOST", "127.0.0.1", "Address `memwarden serve` binds.")
    port: int = _setting("MEMWARDEN_PORT", 8000, "Port `memwarden serve` binds.")
    max_body_bytes: int = _setting(
        "MEMWARDEN_MAX_BODY_BYTES", 1_048_576, "Largest request body accepted (413 above).")
    max_entry_size_bytes: int = _setting(
        "MEMWARDEN_MAX_ENTRY_SIZE_BYTES", 65_536, "Largest memory content in UTF-8 bytes (413 above).")
    rate_limit_per_minute: int = _setting(
        "MEMWARDEN_RATE_LIMIT_PER_MINUTE", 6_000, "Requests per API key per minute (429 above); 0 disables.")
    read_audit_flush_ms: int = _setting(
        "MEMWARDEN_READ_AUDIT_FLUSH_MS", 200,
        "Every read that returns memory is recorded in the tenant's audit chain (`memory.read`) in batches "
        "written at least this often; a crash of the process loses at most the reads of this last interval.")
    read_audit_flush_records: int = _setting(
        "MEMWARDEN_READ_AUDIT_FLUSH_RECORDS", 500,
        "A read-audit batch is written as soon as this many reads are waiting, before the interval ends.")
    read_budget_per_key: int = _setting(
        "MEMWARDEN_READ_BUDGET_PER_KEY", 2_000,
        "Distinct memories one API key may be returned per budget window (429 `read_budget_exceeded` above); "
        "0 disables. A tenant may set its own (`memwarden tenant set --read-budget-per-key`).")
    read_budget_per_agent: int = _setting(
        "MEMWARDEN_READ_BUDGET_PER_AGENT", 5_000,
        "Distinct memories of one agent returned per budget window, over all keys; 0 disables. "
        "A tenant may set its own (`memwarden tenant set --read-budget-per-agent`).")
    read_budget_window_seconds: int = _setting(
        "MEMWARDEN_READ_BUDGET_WINDOW_SECONDS", 3_600, "Length of a read-budget window (fixed, aligned to the epoch).")
    audit_origin: str = _setting(
        "MEMWARDEN_AUDIT_ORIGIN", "memwarden.local",
        "Log origin named in every audit entry and checkpoint.")
    checkpoint_every: int = _setting(
        "MEMWARDEN_CHECKPOINT_EVERY", 1_000, "Sign a checkpoint after this many new events on a chain.")
    checkpoint_interval_seconds: int = _setting(
        "MEMWARDEN_CHECKPOINT_INTERVAL_SECONDS", 60, "Sign a checkpoint of an active chain at least this often.")
    audit_verify_interval_seconds: int = _setting(
        "MEMWARDEN_AUDIT_VERIFY_INTERVAL_SECONDS", 3_600,
        "Fully verify every audit chain this often (0 disables); a chain that does not verify is closed "
        "to writes (409 `audit_chain_broken`) until `memwarden audit clear-alarm`.")
    state_key_file: Path | None = _setting(
        "MEMWARDEN_STATE_KEY_FILE", None,
        "Key of the memory state digests the audit log records (`audit verify --state`); generated once into "
        "the data dir when unset. Keep it out of the database owner's reach: who holds it and can append to "
        "the audit chain can vouch for a forged row.")
    state_check_interval_seconds: int = _setting(
        "MEMWARDEN_STATE_CHECK_INTERVAL_SECONDS", 3_600,
        "Check every stored memory against its last audited state this often (0 disables); the first "
        "mismatch raises an `integrity.mismatch` event, its webhooks and a banner for the tenant's admins.")
    integrity_fail_closed: bool = _setting(
        "MEMWARDEN_INTEGRITY_FAIL_CLOSED", False,
        "Check each memory a read returns (get, list, recall) against its last audited state; a mismatch "
        "is not served: 409 `integrity_mismatch`, reported like the periodic check's.")
    audit_witness_file: Path | None = _setting(
        "MEMWARDEN_AUDIT_WITNESS_FILE", None,
        "Append-only JSON-lines file, outside the data dir, that receives every signed audit checkpoint; "
        "the signer refuses states that do not extend the last one in it (`audit verify --witness`).")
    audit_witness_url: str | None = _setting(
        "MEMWARDEN_AUDIT_WITNESS_URL", None,
        "URL that receives every signed audit checkpoint as a JSON POST (best effort, retried; "
        "the webhook SSRF rule applies).")
    public_url: str | None = _setting(
        "MEMWARDEN_PUBLIC_URL", None,
        "Base URL people reach this server's UI at (`https://memwarden.example.com`); messages that "
        "leave the server (Slack review-SLA alerts) link to the review queue under it, and a staged "
        "write's review link (`review_url` on /v1 and MCP, memorywire's `approval_url`, the workspace's "
        "`reviewUrl`) is absolute under it (unset: the path `/review/<id>`).")
    mcp_allowed_origins: str = _setting(
        "MEMWARDEN_MCP_ALLOWED_ORIGINS", "",
        "Comma list of browser origins (`https://host[:port]`) allowed to call `/mcp`; requests without "
        "an `Origin` header and a loopback origin naming the host the request went to are always allowed, "
        "any other origin gets 403.")
    workspace_max_file_bytes: int = _setting(
        "MEMWARDEN_WORKSPACE_MAX_FILE_BYTES", 262_144,
        "Largest workspace file in UTF-8 bytes (413 `workspace_too_large` above).")
    workspace_max_files: int = _setting(
        "MEMWARDEN_WORKSPACE_MAX_FILES", 256, "Live workspace files per tenant (413 `workspace_too_large` above).")
    workspace_max_versions: int = _setting(
        "MEMWARDEN_WORKSPACE_MAX_VERSIONS", 20,
        "Versions kept per workspace file, the latest and tombstones included; older ones are pruned.")
    compaction_interval_seconds: int = _setting(
        "MEMWARDEN_COMPACTION_INTERVAL_SECONDS", 3_600,
        "How often the compaction job runs for tenants that opted in; 0 disables the job.")
    canary_poll_seconds: int = _setting(
        "MEMWARDEN_CANARY_POLL_SECONDS", 30,
        "How often the reviewer-canary job stages a canary in each tenant that enabled them and staged "
        "enough real writes since its last (`memwarden canaries set`); 0 disables the job.")
    consolidation_poll_seconds: int = _setting(
        "MEMWARDEN_CONSOLIDATION_POLL_SECONDS", 300,
        "How often the consolidation job looks for opted-in tenants whose own interval "
        "(`memwarden consolidate --interval-minutes`) has passed; 0 disables the job.")
    webhook_allow_private: bool = _setting(
        "MEMWARDEN_WEBHOOK_ALLOW_PRIVATE", False,
        "Allow webhook URLs (and the audit witness URL) that are or resolve to loopback, private or other "
        "non-public addresses (off: no SSRF into your network).")
    backend_allow_private: bool = _setting(
        "MEMWARDEN_BACKEND_ALLOW_PRIVATE", False,
        "Allow memory backends (another Memwarden) whose URL is or resolves to a loopback, private or other "
        "non-public address, for stores on the operator's own network. Operator-only: it also lets a tenant "
        "admin's backend form reach those addresses, so leave it off unless every tenant admin is trusted.")
    oidc_allow_private: bool = _setting(
        "MEMWARDEN_OIDC_ALLOW_PRIVATE", False,
        "Allow the OpenID provider's discovery, token, JWKS and userinfo URLs to be or resolve to loopback, "
        "private or other non-public addresses (an identity provider on the operator's own network).")
    backend_retry_base_seconds: float = _setting(
        "MEMWARDEN_BACKEND_RETRY_BASE_SECONDS", 5.0,
        "First retry delay of a failed delivery to a memory backend (the router); each retry waits 4× longer, "
        "up to MEMWARDEN_BACKEND_RETRY_MAX_SECONDS.")
    backend_retry_max_seconds: float = _setting(
        "MEMWARDEN_BACKEND_RETRY_MAX_SECONDS", 3600.0,
        "Longest wait between two delivery attempts to a memory backend.")
    backend_max_attempts: int = _setting(
        "MEMWARDEN_BACKEND_MAX_ATTEMPTS", 10,
        "Attempts before a delivery to a memory backend is marked failed and shown to admins "
        "(`memwarden backend retry` owes it again).")
    backend_lease_seconds: int = _setting(
        "MEMWARDEN_BACKEND_LEASE_SECONDS", 120,
        "How long a delivery to a memory backend is leased to the process working it; after a crash it is "
        "delivered again once the lease ends (the store's id for it makes that a no-op).")
    backend_poll_seconds: float = _setting(
        "MEMWARDEN_BACKEND_POLL_SECONDS", 1.0,
        "How often the leading process delivers what memory backends are owed.")
    trusted_proxies: str = _setting(
        "MEMWARDEN_TRUSTED_PROXIES", "",
        "Comma list of proxy IPs/CIDRs whose X-Forwarded-For/-Proto `serve` honours (turns proxy headers on; "
        "`serve --proxy-headers` alone trusts 127.0.0.1). The client address then drives sign-in throttling, "
        "and https makes the session and CSRF cookies `Secure`; other clients' forwarded headers are ignored.")
    db_pool_size: int = _setting("MEMWARDEN_DB_POOL_SIZE", 10, "Database connections per process.")
    db_pool_timeout_seconds: int = _setting(
        "MEMWARDEN_DB_POOL_TIMEOUT_SECONDS", 5,
        "Longest a request waits for a database connection (or a transaction slot) before it is shed "
        "with 503 `unavailable` and `Retry-After`.")
    read_replica_urls: str = _setting(
        "MEMWARDEN_READ_REPLICA_URLS", "",
        "Comma-separated URLs of PostgreSQL streaming replicas (hot standbys of the database, app role) that "
        "serve reads which tolerate staleness (recall, list, get, export); empty reads from the primary only. "
        "A key still reads its own writes (docs/operators/replicas.md); a replica that is down is passed over.")
    replica_max_wait_ms: int = _setting(
        "MEMWARDEN_REPLICA_MAX_WAIT_MS", 50,
        "Longest a read waits for a replica to replay the calling key's last write before it is served "
        "by the primary instead; 0 falls back at once.")
    db_restart_give_up_seconds: int = _setting(
        "MEMWARDEN_DB_RESTART_GIVE_UP_SECONDS", 30,
        "How long `serve` keeps failing to restart its embedded PostgreSQL before `/healthz` answers 503.")
    server: str = _setting(
        "MEMWARDEN_SERVER", "uvicorn",
        "HTTP server `serve` runs the app on: `uvicorn`, or `granian` (needs the `granian` package; "
        "forwarded headers are honoured as with uvicorn, through its proxy-header middleware).")
    log_level: str = _setting("MEMWARDEN_LOG_LEVEL", "info", "Log level.")
    log_format: str = _setting(
        "MEMWARDEN_LOG_FORMAT", "text",
        "`text` or `json` (one JSON object per line with `request_id`, `tenant`, `key_id` and `route`; "
        "never content, headers or secrets).")
    oidc_issuer: str | None = _setting(
        "MEMWARDEN_OIDC_ISSUER", None,
        "OpenID Connect issuer URL (discovery at `/.well-known/openid-configuration`); set, the sign-in page "
        "offers the provider (authorization code with PKCE; needs `MEMWARDEN_PUBLIC_URL`).")
    oidc_client_id: str | None = _setting("MEMWARDEN_OIDC_CLIENT_ID", None, "OpenID Connect client id.")
    oidc_client_secret_file: Path | None = _setting(
        "MEMWARDEN_OIDC_CLIENT_SECRET_FILE", None,
        "File holding the OpenID Connect client secret; unset, the client is public (PKCE only).")
    oidc_scopes: str = _setting(
        "MEMWARDEN_OIDC_SCOPES", "openid email profile",
        "Scopes asked of the provider; add the one that releases the role claim (`groups`…) if needed.")
    oidc_provider_name: str = _setting(
        "MEMWARDEN_OIDC_PROVIDER_NAME", "your identity provider",
        "Name on the sign-in button (`Sign in with …`).")
    password_sign_in: bool = _setting(
        "MEMWARDEN_PASSWORD_SIGN_IN", True,
        "Local passwords on the sign-in page; off (`0`), people sign in only through the OpenID provider.")
    metrics_token: str | None = _setting(
        "MEMWARDEN_METRICS_TOKEN", None,
        "Bearer token a Prometheus scraper sends to `GET /metrics`; unset, `/metrics` is off (404).")
    suggest_min_decisions: int = _setting(
        "MEMWARDEN_SUGGEST_MIN_DECISIONS", 20,
        "Distinct occasions (batches) of consistent human approvals, and no contrary decision, a pattern needs "
        "before it is suggested as a policy rule.")
    suggest_min_days: int = _setting(
        "MEMWARDEN_SUGGEST_MIN_DAYS", 2,
        "Distinct days (UTC) those occasions must fall on before a pattern is suggested as a policy rule.")
    suggest_batch_gap_seconds: float = _setting(
        "MEMWARDEN_SUGGEST_BATCH_GAP_SECONDS", 30.0,
        "One person's decisions less than this many seconds apart are one occasion (a bulk action is one piece "
        "of evidence for a suggested rule, however many rows it approved); 0 makes every decision its own.")
    suggest_window: int = _setting(
        "MEMWARDEN_SUGGEST_WINDOW", 1000,
        "How many of the latest decided changes a suggestion's measured effect is counted over.")
    backtest_window: int = _setting(
        "MEMWARDEN_BACKTEST_WINDOW", 10_000,
        "How many of the latest decided changes a policy change is replayed over before it goes live "
        "(besides the shipped known attacks).")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from environment variables (missing ones keep their defaults)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = environ.get(f.metadata["env"])
            if raw is None or raw == "":
                continue
            values[f.name] = _coerce(f.name, f.default, raw)
        values.update(overrides)
        return cls(**values)

    @classmethod
    def env_vars(cls) -> dict[str, str]:
        """Map of environment variable name → help text (used by docs and deploy checks)."""
        return {f.metadata["env"]: f.metadata["help"] for f in fields(cls)}

    def with_changes(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir).expanduser().resolve()

    def resolved_secret_key(self) -> str:
        """The session/CSRF key: the configured one, else the generated file in the data dir."""
        if self.secret_key:
            return self.secret_key
        path = self.data_path / "secret_key"
        return _read_or_create(path, lambda: secrets.token_urlsafe(48).encode()).decode().strip()

    def proxy_header_options(self, enabled: bool = False) -> dict[str, Any]:
        """uvicorn's options for X-Forwarded-For/-Proto: off unless `enabled` or trusted proxies are
        configured; then honoured only from those proxies (default 127.0.0.1)."""
        trusted = [entry.strip() for entry in self.trusted_proxies.split(",") if entry.strip()]
        if not enabled and not trusted:
            return {"proxy_headers": False}
        for entry in trusted:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"MEMWARDEN_TRUSTED_PROXIES: {entry!r} is not an IP address or CIDR") from None
        return {"proxy_headers": True, "forwarded_allow_ips": ",".join(trusted) or "127.0.0.1"}

    def resolved_state_key(self) -> bytes:
        """The server's state-digest key (32 bytes): the configured file's, else a file generated
        once into the data dir (hex text)."""
        path = Path(self.state_key_file) if self.state_key_file else self.data_path / "state-digest-key"
        raw = _read_or_create(path, lambda: secrets.token_hex(32).encode()).strip()
        try:
            key = bytes.fromhex(raw.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            key = raw
        if len(key) < 16:
            raise ValueError(f"{path}: a state key needs at least 16 bytes")
        return key

    def resolved_signing_key_file(self) -> Path:
        """The checkpoint signing key file, generated (Ed25519 PEM) when absent."""
        if self.signing_key_file:
            return Path(self.signing_key_file)
        from app.core.auditchain import generate_private_key_pem

        path = self.data_path / "audit-signing-key.pem"
        _read_or_create(path, generate_private_key_pem)
        return path


def _coerce(name: str, default: Any, raw: str) -> Any:
    if isinstance(default, bool):
        return raw.lower() in {"1", "true", "yes", "on"}
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError as exc:
            raise ValueError(f"setting {name} must be an integer, got {raw!r}") from exc
    if isinstance(default, float):
        try:
            return float(raw)
        except ValueError as exc:
            raise ValueError(f"setting {name} must be a number, got {raw!r}") from exc
    if isinstance(default, Path) or name.endswith("_file"):
        return Path(raw)
    return raw


def _read_or_create(path: Path, make: Any) -> bytes:
    """Read a generated secret, creating it atomically with 0600 permissions if missing."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    data = make()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    try:
        os.link(tmp, path)  # fails if another process won the race; theirs is kept
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_bytes()
