"""API keys: issue (token shown once), list, revoke, and authenticate a bearer token."""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass
from typing import Any, Callable

from app.core import access
from app.core.timefmt import utcnow
from app.db import prepared
from app.db.models import ApiKey
from app.errors import NotFound, ValidationFailed
from app.repos.tenancy import apikeys as key_repo
from app.repos.tenancy import users as users_repo
from app.services.tenancy import rate_limits
from app.services.runtime.context import AppContext


@dataclass(frozen=True)
class CreatedKey:
    key: ApiKey
    token: str
    """The secret; it exists only in this return value."""


def create_key(ctx: AppContext, *, tenant_id: str, scopes: str | list[str], agents: str | list[str] | None = None,
               name: str = "", actor: dict, sources: str | list[str] | None = None,
               owner: str | None = None, origins: str | list[str] | None = None) -> CreatedKey:
    """Issue a key for one tenant; the audit entry records its id, scopes, agents, sources and
    owner, never the token.

    `sources` are globs of privileged `source` values the key may assert (`system`, `tool:*` …);
    by default none, so write screening flags such claims as provenance laundering. `owner` (a
    username or user id of someone holding a role in the tenant) is the person the key belongs
    to: its approvals count as theirs (422 when no such user is in the tenant). `origins` limits
    the provenance origins its writes may claim in `source` (e.g. every origin but `user`, for a
    key of an agent that reads mail): a write claiming another is refused; by default any."""
    scope_list = _normalised(access.normalise_scopes, scopes, "/scopes")
    agent_list = _normalised(access.normalise_agents, agents, "/agents")
    source_list = _normalised(access.normalise_sources, sources, "/sources")
    origin_list = _normalised(access.normalise_origins, origins, "/origins")
    issued = access.issue_token()
    with ctx.db.sessions.begin() as session:
        owner_id = _owner_id(session, tenant_id, owner) if owner else None
        key = key_repo.insert(session, key_id=issued.key_id, tenant_id=tenant_id, name=name[:200],
                              token_hash=issued.token_hash, scopes=scope_list, agents=agent_list,
                              sources=source_list, owner_user_id=owner_id, origins=origin_list)
        ctx.audit.append(session, tenant_id=tenant_id, event_type="apikey.created", actor=actor,
                         subject={"type": "api_key", "id": key.id},
                         data={"scopes": scope_list, "agents": agent_list, "sources": source_list,
                               "owner_user_id": owner_id, "origins": origin_list})
    return CreatedKey(key, issued.token)


def _normalised(normalise: Callable[[Any], Any], value: Any, field: str) -> Any:
    """`normalise(value)`, its ValueError a 422 at `field` (a JSON pointer into the request)."""
    try:
        return normalise(value)
    except ValueError as exc:
        raise ValidationFailed.at(field, str(exc)) from None


def _owner_id(session, tenant_id: str, owner: str) -> str:
    """The id of the one user holding a role in this tenant whose username or id is `owner`; 422 otherwise."""
    found = users_repo.members_named(session, tenant_id=tenant_id, name_or_id=owner.strip())
    if not found:
        raise ValidationFailed.at("/owner", f"no user {owner.strip()[:200]!r} holds a role in this tenant; "
                                  "create the user or grant them a role first")
    if len(found) > 1:
        raise ValidationFailed.at("/owner", f"{len(found)} users of this tenant are named {owner.strip()[:200]!r}; "
                                  f"give the user id instead ({', '.join(u.id for u in found)})")
    return found[0].id


def list_keys(ctx: AppContext, *, tenant_id: str) -> list[ApiKey]:
    with ctx.db.sessions() as session:
        return key_repo.list_for_tenant(session, tenant_id=tenant_id)


def revoke_key(ctx: AppContext, *, tenant_id: str, key_id: str, actor: dict) -> ApiKey:
    """Revoke at once: the next request with this key gets 401."""
    with ctx.db.sessions.begin() as session:
        key = key_repo.revoke(session, tenant_id=tenant_id, key_id=key_id, at=utcnow())
        if key is None:
            raise NotFound(f"no active key {key_id!r} in this tenant")
        ctx.audit.append(session, tenant_id=tenant_id, event_type="apikey.revoked", actor=actor,
                         subject={"type": "api_key", "id": key_id}, data={})
    return key


def authenticate(ctx: AppContext, token: str) -> access.Principal | None:
    """The principal for a bearer token, or None when unknown, malformed or revoked."""
    return authenticate_and_take_token(ctx, token, per_minute=0)[0]


def authenticate_and_take_token(ctx: AppContext, token: str, *, per_minute: int
                                ) -> tuple[access.Principal | None, float | None]:
    """The principal for a bearer token (None when unknown, malformed or revoked) and, with a
    rate limit of `per_minute` > 0, the limiter's verdict for this request (None: allowed; else
    seconds until the key's next token), both from one statement."""
    key_id = access.parse_token(token)
    if key_id is None:
        return None, None
    token_hash = access.hash_token(token)
    with prepared.autocommit(ctx.db) as conn:
        if per_minute > 0:
            key = key_repo.find_active_taking_token(conn, key_id=key_id, token_hash=token_hash, per_minute=per_minute)
        else:
            key = key_repo.find_active(conn, key_id=key_id)
        if key is None or not hmac.compare_digest(token_hash, key.token_hash):
            _RECENT.pop(token_hash, None)
            return None, None
        if key.last_used_at is None or utcnow() - key.last_used_at > key_repo.TOUCH_EVERY:
            key_repo.touch(conn, key_id=key_id)
    principal = _principal(key)
    retry = rate_limits.retry_after(key.tokens, key.allowed, per_minute) if per_minute > 0 else None
    if retry is None and (per_minute <= 0 or key.tokens >= 1):
        if len(_RECENT) >= _RECENT_MAX:
            _RECENT.clear()
        _RECENT[token_hash] = RecentKey(time.monotonic(), key.tenant_id, key.tenant_config_version)
    else:  # over its limit, or about to be: no more early work for it until a check allows it again
        _RECENT.pop(token_hash, None)
    return principal, retry


@dataclass(frozen=True)
class RecentKey:
    """A key this process verified lately, active and with a rate-limit token to spare then."""

    verified_at: float
    tenant_id: str
    config_version: int


RECENT_SECONDS = 60.0
_RECENT: dict[bytes, RecentKey] = {}
_RECENT_MAX = 10_000


def recently_verified(token: str) -> RecentKey | None:
    """The key of `token` if this process verified it within `RECENT_SECONDS` and its last check
    found it active and under its rate limit with a token to spare; else None. Not a verdict (the
    key is checked as always): what lets a request start work before its check
    (`app.services.memory.early_embedding`) without a caller lacking the secret being able to."""
    if access.parse_token(token) is None:  # malformed: not even hashed
        return None
    found = _RECENT.get(access.hash_token(token))
    if found is None or time.monotonic() - found.verified_at > RECENT_SECONDS:
        return None
    return found


_PRINCIPALS: dict[str, tuple[tuple, access.Principal]] = {}
_PRINCIPALS_MAX = 10_000


def _principal(key: key_repo.ActiveKey) -> access.Principal:
    """The Principal for a key row just read: the one built from the same row before, if the row
    (scopes, agents, sources, tenant, its config version) is unchanged. A cache of objects, not of
    verdicts: the row is read, and revocation checked, on every request."""
    fields = key[:6] + key[7:10]  # everything but last_used_at and the bucket
    cached = _PRINCIPALS.get(key.id)
    if cached is not None and cached[0] == fields:
        return cached[1]
    principal = access.Principal(key.tenant_id, key.id, frozenset(key.scopes), tuple(key.agents),
                                 tuple(key.sources or ()), config_version=key.tenant_config_version,
                                 owner_user_id=key.owner_user_id, origins=tuple(key.origins or ()))
    if len(_PRINCIPALS) >= _PRINCIPALS_MAX:
        _PRINCIPALS.clear()
    _PRINCIPALS[key.id] = (fields, principal)
    return principal


def is_active(ctx: AppContext, *, tenant_id: str, key_id: str) -> bool:
    """Whether the key is still valid (a long-lived stream re-checks it: revocation ends the stream)."""
    with ctx.db.sessions() as session:
        return key_repo.is_active(session, tenant_id=tenant_id, key_id=key_id)
