"""Reviewer accounts: argon2 passwords (passlib API via libpass), per-tenant roles with agent
allow-lists, revocable sessions, sign-in throttling with back-off. Every change and sign-in is audited."""

from __future__ import annotations

import functools
import ipaddress
import secrets
from dataclasses import dataclass
from datetime import timedelta

from passlib.hash import argon2
from sqlalchemy.exc import IntegrityError

from app.core.access import ROLES, agent_allowed, normalise_agents
from app.core.ids import new_id
from app.core.timefmt import utcnow
from app.db.models import User, UserRole
from app.errors import Conflict, Forbidden, NotFound, RateLimited, ValidationFailed
from app.repos.audit import audit_alarms as alarms_repo
from app.repos.audit import state_check as state_repo
from app.repos.tenancy import login_throttle as throttle_repo
from app.repos.tenancy import users as users_repo
from app.services.runtime.context import AppContext

ROLE_POWERS = {
    "viewer": {"read"},
    "reviewer": {"read", "decide"},
    "auditor": {"read", "audit"},
    "admin": {"read", "decide", "audit", "admin"},
}
SESSION_IDLE = timedelta(hours=12)
MIN_PASSWORD = 10
# argon2 via passlib refuses secrets over 4,096 bytes; 1,024 characters stay under it in any script.
MAX_PASSWORD = 1024
MAX_SIGN_IN_NAME = 64 + 1 + 64  # `<tenant name>/<username>`

# passlib loads a hash's backend lazily, on its first use, and that loader is not thread-safe: two
# first sign-ins at once after a start raised AssertionError ("failed to replace lazy loader") in
# one of them, a 500 that also told an unknown name from a known one. Loaded here, at import, under
# the import lock, no request ever meets the lazy loader.
argon2.set_backend()


@dataclass(frozen=True)
class TenantRole:
    tenant_id: str
    tenant_name: str
    role: str
    agents: tuple[str, ...]

    def can(self, power: str) -> bool:
        return power in ROLE_POWERS[self.role]

    def sees_agent(self, agent_id: str) -> bool:
        return agent_allowed(agent_id, self.agents)


@dataclass(frozen=True)
class Reviewer:
    """A signed-in person and what they may do in each tenant."""

    user_id: str
    username: str
    session_id: str
    roles: tuple[TenantRole, ...]
    alarms: tuple[dict, ...] = ()
    """Open audit chain alarms of the tenants where this person has the audit power (a banner on every page)."""
    integrity_alarms: tuple[dict, ...] = ()
    """Open integrity alarms (memories that differ from their audited state) of those tenants (a banner too)."""

    @property
    def actor(self) -> dict[str, str]:
        return {"kind": "user", "id": self.user_id, "name": self.username}

    def role_in(self, tenant_id: str) -> TenantRole | None:
        return next((r for r in self.roles if r.tenant_id == tenant_id), None)

    def tenants_with(self, power: str) -> list[TenantRole]:
        return [r for r in self.roles if r.can(power)]

    def may(self, power: str, tenant_id: str, agent_id: str | None = None) -> bool:
        role = self.role_in(tenant_id)
        return bool(role and role.can(power) and (agent_id is None or role.sees_agent(agent_id)))


def hash_password(password: str) -> str:
    return argon2.hash(password)


@functools.cache
def _stand_in_hash() -> str:
    """An argon2 hash no password matches, verified in place of a real one when there is no usable
    account, so a refusal costs the same time whether the account is unknown, disabled or real.
    Made at start-up (`warm_up`), so the first refusal after a start does not cost a hash more."""
    return argon2.hash(secrets.token_urlsafe(32))


def warm_up(ctx: AppContext) -> None:
    """Prepare password sign-in before the first request: the stand-in hash (see above)."""
    if ctx.settings.password_sign_in:
        _stand_in_hash()


def create_user(ctx: AppContext, *, username: str, password: str, tenant_id: str, role: str,
                agents: str | list[str] | None = None, actor: dict, homed: bool = False) -> User:
    """Create a user with one tenant role; the password is stored only as an argon2 hash.

    `homed`: the account belongs to the tenant's own username namespace (accounts a tenant's admin
    creates) and signs in as `<tenant name>/<username>`; otherwise it is an operator's account,
    named in the operator's namespace, that may hold roles in several tenants."""
    if role not in ROLES:
        raise ValidationFailed.at("/role", f"role must be one of {', '.join(ROLES)}")
    if len(password) < MIN_PASSWORD:
        raise ValidationFailed.at("/password", f"password must be at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise ValidationFailed.at("/password", f"password must be at most {MAX_PASSWORD} characters")
    try:
        agent_list = normalise_agents(agents)
    except ValueError as exc:
        raise ValidationFailed.at("/agents", str(exc)) from None
    user = User(id=new_id("usr"), username=username, password_hash=hash_password(password),
                home_tenant_id=tenant_id if homed else None)
    try:
        with ctx.db.sessions.begin() as session:
            users_repo.insert_user(session, user, UserRole(user_id=user.id, tenant_id=tenant_id, role=role,
                                                           agents=agent_list))
            ctx.audit.append(session, tenant_id=tenant_id, event_type="user.created", actor=actor,
                             subject={"type": "user", "id": user.id},
                             data={"username": username, "role": role, "agents": agent_list})
    except IntegrityError:
        where = "in this tenant" if homed else "among operator accounts"
        raise Conflict(f"user {username!r} already exists {where}, or the tenant is unknown") from None
    return user


def set_role(ctx: AppContext, *, user_id: str, tenant_id: str, role: str | None,
             agents: str | list[str] | None = None, actor: dict) -> None:
    """Grant, change (role and agent allow-list) or, with role None, remove a user's tenant role."""
    if role is not None and role not in ROLES:
        raise ValidationFailed.at("/role", f"role must be one of {', '.join(ROLES)}")
    agent_list = normalise_agents(agents)
    with ctx.db.sessions.begin() as session:
        if users_repo.get_user(session, user_id=user_id) is None:
            raise NotFound("user not found")
        existing = users_repo.get_role(session, user_id=user_id, tenant_id=tenant_id)
        if role is None:
            if existing is None:
                raise NotFound("no such role")
            users_repo.delete_role(session, existing)
        elif existing is None:
            users_repo.add_role(session, UserRole(user_id=user_id, tenant_id=tenant_id, role=role, agents=agent_list))
        else:
            existing.role, existing.agents = role, agent_list
        ctx.audit.append(session, tenant_id=tenant_id, event_type="user.role_changed", actor=actor,
                         subject={"type": "user", "id": user_id}, data={"role": role, "agents": agent_list})


def list_users(ctx: AppContext, tenant_id: str) -> list[tuple[User, UserRole]]:
    with ctx.db.sessions() as session:
        rows = users_repo.members(session, tenant_id=tenant_id)
        return [(r[0], r[1]) for r in rows]


def find_user(ctx: AppContext, username: str, home_tenant_id: str | None = None) -> User | None:
    """An account by username in the operator's namespace, or in a tenant's (`home_tenant_id`)."""
    with ctx.db.sessions() as session:
        return users_repo.find_by_username(session, username=username, home_tenant_id=home_tenant_id)


# --- sign-in -------------------------------------------------------------------------------------
# Throttling lives in PostgreSQL (table login_throttle), so every serving process sees the same
# counts. Two levels, both back-off rather than lock-out:
# - per (client, username): after PAIR_FREE_FAILURES failures, 1 s, 2 s, 4 s … up to PAIR_MAX_DELAY;
#   an attacker's address slows only itself, and a success resets that client's count.
# - per username, all clients together: a much looser ceiling (GLOBAL_FREE_FAILURES) whose delay is
#   capped at GLOBAL_MAX_DELAY, so a distributed guesser is slowed to one guess per ~30 s while the
#   real user at worst waits that long; clients that signed in to the account recently skip it.
# Failures older than FAILURE_MEMORY are forgotten; rows idle for KNOWN_CLIENT are pruned.

PAIR_FREE_FAILURES = 5
PAIR_MAX_DELAY = 300
GLOBAL_FREE_FAILURES = 50
GLOBAL_MAX_DELAY = 30
FAILURE_MEMORY = timedelta(hours=1)
KNOWN_CLIENT = timedelta(days=30)
ANY_CLIENT = "*"


def backoff_delay(failures: int, free: int, cap: int) -> int:
    """Seconds to wait after `failures` recent failures: 0 up to `free`, then 1, 2, 4 … capped."""
    if failures < free:
        return 0
    return min(cap, 2 ** min(failures - free, 30))


def client_key(address: str | None) -> str:
    """How throttling names a client: its IP address; IPv6 by its /64, one subscriber's usual share."""
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:  # not an IP (a test client, a unix socket): never the same as ANY_CLIENT
        return "name:" + (address or "unknown")[:64]
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def _blocking_row(session, username: str, client: str):
    """The throttle row that makes this client wait before trying `username` again (its `wait`
    in seconds, `client`, `refusal_audited`), or None: go ahead."""
    rows = throttle_repo.read(session, username=username, clients=(client, ANY_CLIENT), known_within=KNOWN_CLIENT)
    pair, everyone = rows.get(client), rows.get(ANY_CLIENT)
    if pair is not None and (pair.wait or 0) > 0:
        return pair
    if everyone is not None and (everyone.wait or 0) > 0 and not (pair is not None and pair.known):
        return everyone
    return None


def _record_failure(session, username: str, client: str, free: int, cap: int) -> None:
    failures = throttle_repo.add_failure(session, username=username, client=client, memory=FAILURE_MEMORY)
    delay = backoff_delay(failures, free, cap)
    if delay:
        throttle_repo.block(session, username=username, client=client, seconds=delay)


def _count_attempt(session, username: str, client: str) -> None:
    """Count an attempt as a failure before its password is checked, so concurrent guesses cannot
    outrun the limit; `_record_success` takes it back. Also prunes rows idle for KNOWN_CLIENT."""
    _record_failure(session, username, client, PAIR_FREE_FAILURES, PAIR_MAX_DELAY)
    _record_failure(session, username, ANY_CLIENT, GLOBAL_FREE_FAILURES, GLOBAL_MAX_DELAY)
    throttle_repo.prune(session, idle=KNOWN_CLIENT)


def _record_success(session, username: str, client: str) -> None:
    """A right password: the client's count starts again; the username's count forgets this attempt."""
    throttle_repo.record_success(session, username=username, client=client)
    throttle_repo.forget_one_failure(session, username=username, client=ANY_CLIENT)


def audit_sign_in(ctx: AppContext, session, user_id: str | None, username: str, event: str, reason: str,
                   client: str) -> None:
    tenant_ids = [] if user_id is None else users_repo.tenant_ids_of(session, user_id=user_id)
    subject = {"type": "user", "id": user_id}
    actor = {"kind": "user", "id": user_id or "unknown", "name": username[:64]}
    for tenant_id in tenant_ids or [None]:
        ctx.audit.append_access(session, tenant_id=tenant_id, event_type=event, actor=actor, subject=subject,
                                data={"reason": reason, "client": client})


def sign_in(ctx: AppContext, username: str, password: str, *, client: str | None = None) -> str:
    """Check a password and open a session; returns the session id. `username` is the sign-in name:
    `<tenant name>/<username>` for an account a tenant's admin created, the bare username for an
    operator's account (`users_repo.find_by_sign_in_name`). `client` is the caller's IP
    address, the throttling key together with the username (see the back-off rules above); while
    throttled the password is not even checked (429 with the seconds to wait), and only the first
    refusal under each block is audited.

    The slow password hash runs between two short transactions, holding neither a database
    connection nor the username's lock, so a flood of sign-ins cannot starve the pool."""
    if not ctx.settings.password_sign_in:
        raise Forbidden("password sign-in is turned off here; sign in through your identity provider")
    username = username.strip()[:MAX_SIGN_IN_NAME]
    if "\x00" in username or "\x00" in password:  # no account has one; PostgreSQL text cannot hold it
        raise ValidationFailed("wrong username or password")
    client = client_key(client)
    with ctx.db.sessions.begin() as session:
        users_repo.lock_username(session, username=username)
        user = users_repo.find_by_sign_in_name(session, sign_in_name=username)
        user_id = user.id if user is not None else None
        blocked = _blocking_row(session, username, client)
        if blocked is None:
            _count_attempt(session, username, client)
        elif not blocked.refusal_audited:  # once per block: refusals are free to send, entries are not
            audit_sign_in(ctx, session, user_id, username, "auth.sign_in_throttled", "throttled", client)
            throttle_repo.mark_refusal_audited(session, username=username, client=blocked.client)
    if blocked is not None:
        raise RateLimited(f"too many failed sign-ins; try again in {blocked.wait} s",
                          headers={"retry-after": str(blocked.wait)})

    # Always one argon2 verification, so the answer's timing says nothing about the account: unknown,
    # disabled, or a password too long to be anyone's (checked against a stand-in hash).
    usable = (user is not None and user.disabled_at is None and user.oidc_subject is None
              and len(password) <= MAX_PASSWORD)
    matched = argon2.verify(password if len(password) <= MAX_PASSWORD else "",
                            user.password_hash if usable else _stand_in_hash())
    ok = usable and matched
    with ctx.db.sessions.begin() as session:
        if ok:
            _record_success(session, username, client)
            session_id = secrets.token_urlsafe(32)
            users_repo.insert_web_session(session, session_id=session_id, user_id=user_id)
        event, reason = ("auth.signed_in", "password") if ok else ("auth.sign_in_failed", "refused")
        audit_sign_in(ctx, session, user_id, username, event, reason, client)
    if not ok:
        raise ValidationFailed("wrong username or password")
    return session_id


def load_reviewer(ctx: AppContext, session_id: str) -> Reviewer | None:
    """The reviewer behind a live session, or None (revoked, expired, signed out everywhere)."""
    with ctx.db.sessions.begin() as session:
        row = users_repo.live_web_session(session, session_id=session_id, idle=SESSION_IDLE)
        if row is None:
            return None
        web_session, user = row
        users_repo.touch_web_session(session, session_id=session_id, every=timedelta(minutes=1))
        roles = users_repo.roles_with_tenant_names(session, user_id=user.id)
        tenant_roles = tuple(TenantRole(r[0].tenant_id, r[1], r[0].role, tuple(r[0].agents)) for r in roles)
        names = {r.tenant_id: r.tenant_name for r in tenant_roles if r.can("audit")}
        alarms = tuple({"tenant_name": names[a.tenant_id], "first_bad_seq": a.first_bad_seq, "reason": a.reason,
                        "detected_at": a.detected_at} for a in alarms_repo.open_alarms_of(session, list(names)))
        integrity = tuple({"tenant_name": names[a.tenant_id], "memory_id": a.memory_id, "expected_seq": a.expected_seq,
                           "reason": a.reason, "mismatches": a.mismatches, "detected_at": a.detected_at}
                          for a in state_repo.open_alarms_of(session, list(names)))
        return Reviewer(user.id, user.username, session_id, tenant_roles, alarms, integrity)


def role_if_signed_in(ctx: AppContext, session_id: str, tenant_id: str) -> TenantRole | None:
    """The session's user's current role in `tenant_id`, or None once the session is signed out,
    revoked or idle. Unlike `load_reviewer` it does not touch the session: an open page's live
    stream asking is not the reviewer being active."""
    with ctx.db.sessions() as session:
        row = users_repo.live_web_session(session, session_id=session_id, idle=SESSION_IDLE)
        if row is None:
            return None
        roles = users_repo.roles_with_tenant_names(session, user_id=row[1].id)
    return next((TenantRole(r[0].tenant_id, r[1], r[0].role, tuple(r[0].agents)) for r in roles
                 if r[0].tenant_id == tenant_id), None)


def sign_out(ctx: AppContext, reviewer: Reviewer, *, everywhere: bool = False) -> None:
    with ctx.db.sessions.begin() as session:
        now = utcnow()
        if everywhere:
            users_repo.revoke_all_web_sessions(session, user_id=reviewer.user_id, at=now)
        else:
            users_repo.revoke_web_session(session, session_id=reviewer.session_id, at=now)
        for role in reviewer.roles:
            ctx.audit.append_access(session, tenant_id=role.tenant_id, event_type="auth.signed_out",
                                    actor=reviewer.actor, subject={"type": "user", "id": reviewer.user_id},
                                    data={"everywhere": everywhere})
