"""Reviewer accounts: argon2 passwords (passlib API via libpass), per-tenant roles with agent
allow-lists, revocable sessions, sign-in throttling. Every change and sign-in is audited."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from passlib.hash import argon2
from sqlalchemy import func, select, text, update
from sqlalchemy.exc import IntegrityError

from app.core.access import agent_allowed, normalise_agents
from app.core.ids import new_id
from app.core.timefmt import utcnow
from app.db.models import Tenant, User, UserRole, WebSession
from app.errors import Conflict, NotFound, RateLimited, ValidationFailed
from app.services.context import AppContext

ROLES = ("viewer", "reviewer", "auditor", "admin")
ROLE_POWERS = {
    "viewer": {"read"},
    "reviewer": {"read", "decide"},
    "auditor": {"read", "audit"},
    "admin": {"read", "decide", "audit", "admin"},
}
MAX_FAILURES = 5
FAILURE_WINDOW = timedelta(minutes=15)
SESSION_IDLE = timedelta(hours=12)
MIN_PASSWORD = 10


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


def create_user(ctx: AppContext, *, username: str, password: str, tenant_id: str, role: str,
                agents: str | list[str] | None = None, actor: dict) -> User:
    """Create a user with one tenant role; the password is stored only as an argon2 hash."""
    if role not in ROLES:
        raise ValidationFailed.at("/role", f"role must be one of {', '.join(ROLES)}")
    if len(password) < MIN_PASSWORD:
        raise ValidationFailed.at("/password", f"password must be at least {MIN_PASSWORD} characters")
    try:
        agent_list = normalise_agents(agents)
    except ValueError as exc:
        raise ValidationFailed.at("/agents", str(exc)) from None
    user = User(id=new_id("usr"), username=username, password_hash=hash_password(password))
    try:
        with ctx.db.sessions.begin() as session:
            session.add(user)
            session.flush()
            session.add(UserRole(user_id=user.id, tenant_id=tenant_id, role=role, agents=agent_list))
            ctx.audit.append(session, tenant_id=tenant_id, event_type="user.created", actor=actor,
                             subject={"type": "user", "id": user.id},
                             data={"username": username, "role": role, "agents": agent_list})
    except IntegrityError:
        raise Conflict(f"user {username!r} already exists or the tenant is unknown") from None
    return user


def set_role(ctx: AppContext, *, user_id: str, tenant_id: str, role: str | None,
             agents: str | list[str] | None = None, actor: dict) -> None:
    """Grant, change (role and agent allow-list) or, with role None, remove a user's tenant role."""
    if role is not None and role not in ROLES:
        raise ValidationFailed.at("/role", f"role must be one of {', '.join(ROLES)}")
    agent_list = normalise_agents(agents)
    with ctx.db.sessions.begin() as session:
        if session.get(User, user_id) is None:
            raise NotFound("user not found")
        existing = session.get(UserRole, (user_id, tenant_id))
        if role is None:
            if existing is None:
                raise NotFound("no such role")
            session.delete(existing)
        elif existing is None:
            session.add(UserRole(user_id=user_id, tenant_id=tenant_id, role=role, agents=agent_list))
        else:
            existing.role, existing.agents = role, agent_list
        ctx.audit.append(session, tenant_id=tenant_id, event_type="user.role_changed", actor=actor,
                         subject={"type": "user", "id": user_id}, data={"role": role, "agents": agent_list})


def list_users(ctx: AppContext, tenant_id: str) -> list[tuple[User, UserRole]]:
    with ctx.db.sessions() as session:
        rows = session.execute(select(User, UserRole).join(UserRole, UserRole.user_id == User.id)
                               .where(UserRole.tenant_id == tenant_id).order_by(User.username)).all()
        return [(r[0], r[1]) for r in rows]


def find_user(ctx: AppContext, username: str) -> User | None:
    with ctx.db.sessions() as session:
        return session.scalars(select(User).where(User.username == username)).first()


# --- sign-in -------------------------------------------------------------------------------------

def _recent_failures(session, username: str) -> int:
    return session.scalar(text(
        "SELECT count(*) FROM login_attempts WHERE username = :u AND NOT succeeded AND at > now() - :w"
    ), {"u": username, "w": FAILURE_WINDOW}) or 0


def _audit_sign_in(ctx: AppContext, session, user: User | None, username: str, event: str, reason: str) -> None:
    tenant_ids = [] if user is None else list(session.scalars(
        select(UserRole.tenant_id).where(UserRole.user_id == user.id)))
    subject = {"type": "user", "id": user.id if user else None}
    actor = {"kind": "user", "id": user.id if user else "unknown", "name": username[:64]}
    for tenant_id in tenant_ids or [None]:
        ctx.audit.append(session, tenant_id=tenant_id, event_type=event, actor=actor, subject=subject,
                         data={"reason": reason})


def sign_in(ctx: AppContext, username: str, password: str) -> str:
    """Check a password and open a session; returns the session id. Throttled per username:
    after MAX_FAILURES failures within FAILURE_WINDOW, even the right password is refused."""
    username = username.strip()[:64]
    failure: Exception | None = None
    with ctx.db.sessions.begin() as session:
        session.execute(select(func.pg_advisory_xact_lock(func.hashtext("memwarden.login:" + username))))
        user = session.scalars(select(User).where(User.username == username)).first()
        if _recent_failures(session, username) >= MAX_FAILURES:
            ok, event = False, "auth.sign_in_throttled"
            failure = RateLimited("too many failed sign-ins; wait 15 minutes and try again",
                                  headers={"retry-after": str(int(FAILURE_WINDOW.total_seconds()))})
        else:
            ok = bool(user and user.disabled_at is None and argon2.verify(password, user.password_hash))
            if user is None:
                argon2.hash(password)  # equalise timing for unknown users
            event = "auth.signed_in" if ok else "auth.sign_in_failed"
            if not ok:
                failure = ValidationFailed("wrong username or password")
        session.execute(text("INSERT INTO login_attempts (username, succeeded) VALUES (:u, :ok)"),
                        {"u": username, "ok": ok})
        _audit_sign_in(ctx, session, user, username, event, "password" if ok else "refused")
        if ok:
            session_id = secrets.token_urlsafe(32)
            session.add(WebSession(id=session_id, user_id=user.id))
    if failure is not None:
        raise failure
    return session_id


def load_reviewer(ctx: AppContext, session_id: str) -> Reviewer | None:
    """The reviewer behind a live session, or None (revoked, expired, signed out everywhere)."""
    with ctx.db.sessions.begin() as session:
        row = session.execute(
            select(WebSession, User).join(User, User.id == WebSession.user_id).where(
                WebSession.id == session_id, WebSession.revoked_at.is_(None), User.disabled_at.is_(None),
                WebSession.created_at >= User.sessions_valid_after,
                WebSession.last_seen_at > func.now() - SESSION_IDLE)).first()
        if row is None:
            return None
        web_session, user = row
        session.execute(update(WebSession).where(
            WebSession.id == session_id, WebSession.last_seen_at < func.now() - timedelta(minutes=1)
        ).values(last_seen_at=func.now()))
        roles = session.execute(select(UserRole, Tenant.name).join(Tenant, Tenant.id == UserRole.tenant_id)
                                .where(UserRole.user_id == user.id).order_by(Tenant.name)).all()
        return Reviewer(user.id, user.username, session_id,
                        tuple(TenantRole(r[0].tenant_id, r[1], r[0].role, tuple(r[0].agents)) for r in roles))


def sign_out(ctx: AppContext, reviewer: Reviewer, *, everywhere: bool = False) -> None:
    with ctx.db.sessions.begin() as session:
        now = utcnow()
        if everywhere:
            session.execute(update(User).where(User.id == reviewer.user_id).values(sessions_valid_after=now))
            session.execute(update(WebSession).where(WebSession.user_id == reviewer.user_id,
                                                     WebSession.revoked_at.is_(None)).values(revoked_at=now))
        else:
            session.execute(update(WebSession).where(WebSession.id == reviewer.session_id).values(revoked_at=now))
        for role in reviewer.roles:
            ctx.audit.append(session, tenant_id=role.tenant_id, event_type="auth.signed_out", actor=reviewer.actor,
                             subject={"type": "user", "id": reviewer.user_id}, data={"everywhere": everywhere})
