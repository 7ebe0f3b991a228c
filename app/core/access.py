"""API-key tokens, scopes, people's roles and agent allow-lists (contract §2). Pure: no database."""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from app.core.ids import new_id

ROLES = ("viewer", "reviewer", "auditor", "admin")
"""A person's role in a tenant (what each may do: `app.services.tenancy.users.ROLE_POWERS`)."""

SCOPES = (
    "memory:read", "memory:write", "review:decide", "audit:read",
    "workspace:read", "workspace:write", "events:read", "admin",
)
"""`admin`: tenant-wide operations beyond one agent's memory (`POST /v1/recover`)."""
_TOKEN = re.compile(r"^mw_(key_[0-9a-z]{26})_([A-Za-z0-9_-]{43})$")
AGENT_GLOB = re.compile(r"^[A-Za-z0-9_.:@*?\[\]-]{1,128}$")
SOURCE_GLOB = re.compile(r"^[A-Za-z0-9_.:@/*?\[\]-]{1,128}$")


@dataclass(frozen=True)
class IssuedToken:
    key_id: str
    token: str
    token_hash: bytes


def issue_token() -> IssuedToken:
    """A new key id and its secret token (`mw_<key id>_<43 chars>`, 256 random bits)."""
    key_id = new_id("key")
    token = f"mw_{key_id}_{secrets.token_urlsafe(32)}"
    return IssuedToken(key_id, token, hash_token(token))


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def parse_token(token: str) -> str | None:
    """The key id a well-formed token names, or None."""
    match = _TOKEN.match(token)
    return match.group(1) if match else None


def token_matches(token: str, stored_hash: bytes) -> bool:
    return hmac.compare_digest(hash_token(token), stored_hash)


def normalise_scopes(raw: str | list[str]) -> list[str]:
    """Parse `a,b` or a list into known scopes; ValueError names any unknown one."""
    items = [s.strip() for s in (raw.split(",") if isinstance(raw, str) else raw) if s.strip()]
    unknown = [s for s in items if s not in SCOPES]
    if unknown:
        raise ValueError(f"unknown scope(s): {', '.join(unknown)}; known: {', '.join(SCOPES)}")
    if not items:
        raise ValueError("at least one scope is required")
    return sorted(set(items), key=SCOPES.index)


WRITE_SCOPES = ("memory:write", "workspace:write")
"""The scopes whose writes a policy may stage for review."""


def writes_and_decides(scopes: Iterable[str]) -> bool:
    """Whether a key holds a write scope and `review:decide`. Such a key can never decide its own
    writes (`app.services.review.duties`), only others': one key per duty is the clearer split."""
    return "review:decide" in scopes and any(scope in scopes for scope in WRITE_SCOPES)


def normalise_agents(raw: str | list[str] | None) -> list[str]:
    items = [a.strip() for a in (raw.split(",") if isinstance(raw, str) else (raw or ["*"])) if a.strip()]
    bad = [a for a in items if not AGENT_GLOB.match(a)]
    if bad:
        raise ValueError(f"invalid agent pattern(s): {', '.join(bad)}")
    return items or ["*"]


def normalise_sources(raw: str | list[str] | None) -> list[str]:
    """Parse `a,b` or a list of source globs a key may assert (default: none)."""
    items = [s.strip() for s in (raw.split(",") if isinstance(raw, str) else (raw or [])) if s.strip()]
    bad = [s for s in items if not SOURCE_GLOB.match(s)]
    if bad:
        raise ValueError(f"invalid source pattern(s): {', '.join(bad)}")
    return list(dict.fromkeys(items))


def normalise_origins(raw: str | list[str] | None) -> list[str]:
    """Parse `a,b` or a list of provenance origins a key's writes may claim (default: any, ``[]``);
    each must be one of ``provenance.ORIGINS``."""
    from app.core.screening.provenance import ORIGINS

    items = [s.strip() for s in (raw.split(",") if isinstance(raw, str) else (raw or [])) if s.strip()]
    bad = [s for s in items if s not in ORIGINS]
    if bad:
        raise ValueError(f"unknown origin(s): {', '.join(bad)[:200]} (origins: {', '.join(ORIGINS)})")
    return sorted(set(items), key=ORIGINS.index)


def agent_allowed(agent_id: str, patterns: list[str] | tuple[str, ...]) -> bool:
    """Case-sensitive glob match of an agent id against an allow-list."""
    return any(fnmatch.fnmatchcase(agent_id, p) for p in patterns)


@dataclass(frozen=True)
class Principal:
    """Who is calling: an API key, its tenant, scopes and agent allow-list."""

    tenant_id: str
    key_id: str
    scopes: frozenset[str]
    agents: tuple[str, ...]
    sources: tuple[str, ...] = ()
    """Globs of privileged `source` values this key may assert without a provenance flag."""
    config_version: int | None = None
    """The version of the tenant's settings and secrets seen when the key was checked (keys the
    per-process cache of `app.services.tenancy.tenant_config.rules_for`); None when not known."""
    owner_user_id: str | None = None
    """The person the key belongs to, or None: its approvals of changes count as that person's."""
    origins: tuple[str, ...] = ()
    """Provenance origins this key's writes may claim in `source` (`may_claim`); empty: any."""

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    def may_act_for(self, agent_id: str) -> bool:
        return agent_allowed(agent_id, self.agents)

    def may_claim(self, source: str | None) -> bool:
        """Whether this key's writes may say they came from ``source``: any when the key has no
        ``origins``; otherwise a documented origin must be one of them. An absent or undocumented
        source is untrusted whatever the key (``provenance.origin``), so it claims nothing and passes."""
        from app.core.screening.provenance import UNKNOWN, origin

        claimed = origin(source)
        return not self.origins or claimed == UNKNOWN or claimed in self.origins

    @property
    def actor(self) -> dict[str, str]:
        """How this caller is named in audit entries."""
        return {"kind": "api_key", "id": self.key_id}

    @property
    def reviewer_actor(self) -> dict[str, str | None]:
        """`actor` plus the key's owner (None: no one), for deciding a change: an owned key's
        approval is counted as its owner's (`app.services.review.review`); audit entries name the key."""
        return {**self.actor, "owner_user_id": self.owner_user_id}
