"""SQL for reviewers' accounts (`users`), their tenant roles (`user_roles`) and web sessions
(`web_sessions`). An account is not a tenant's: it holds roles in tenants, and reads for one
tenant (`member`, `members`) are scoped by the role's tenant."""

from __future__ import annotations

from typing import Any, Sequence
from datetime import datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.db.models import Tenant, User, UserRole, WebSession


def insert_user(session: Session, user: User, role: UserRole | None) -> None:
    """Add an account, with its first tenant role when given."""
    session.add(user)
    session.flush()
    if role is not None:
        session.add(role)


def find_by_oidc_identity(session: Session, *, issuer: str, subject: str) -> User | None:
    """The account provisioned for this OpenID provider identity, or None."""
    return session.scalars(select(User).where(User.oidc_issuer == issuer, User.oidc_subject == subject)).first()


def lock_oidc_identity(session: Session, *, issuer: str, subject: str) -> None:
    """Serialise sign-ins of one provider identity (first-sign-in provisioning) until the transaction ends."""
    session.execute(select(func.pg_advisory_xact_lock(func.hashtext(f"memwarden.oidc:{issuer} {subject}"))))


def get_user(session: Session, *, user_id: str) -> User | None:
    return session.get(User, user_id)


def find_by_username(session: Session, *, username: str, home_tenant_id: str | None = None) -> User | None:
    """The account named `username` in one namespace: a tenant's (`home_tenant_id`) or, with
    None, the operator's."""
    home = User.home_tenant_id.is_(None) if home_tenant_id is None else User.home_tenant_id == home_tenant_id
    return session.scalars(select(User).where(User.username == username, home)).first()


def find_by_sign_in_name(session: Session, *, sign_in_name: str) -> User | None:
    """The account a sign-in name names: `<tenant name>/<username>` for an account homed in a
    tenant, the bare username for an operator's account."""
    tenant_name, slash, username = sign_in_name.partition("/")
    if not slash:
        return find_by_username(session, username=sign_in_name)
    return session.scalars(select(User).join(Tenant, Tenant.id == User.home_tenant_id).where(
        Tenant.name == tenant_name, User.username == username)).first()


def lock_username(session: Session, *, username: str) -> None:
    """Serialise sign-ins of one sign-in name until the transaction ends (the throttle's counts)."""
    session.execute(select(func.pg_advisory_xact_lock(func.hashtext("memwarden.login:" + username))))


def set_password_hash(session: Session, *, user_id: str, password_hash: str) -> None:
    session.execute(update(User).where(User.id == user_id).values(password_hash=password_hash))


def get_role(session: Session, *, user_id: str, tenant_id: str) -> UserRole | None:
    return session.get(UserRole, (user_id, tenant_id))


def add_role(session: Session, role: UserRole) -> None:
    session.add(role)


def delete_role(session: Session, role: UserRole) -> None:
    session.delete(role)


def member(session: Session, *, tenant_id: str, user_id: str):
    """(User, UserRole) of a user holding a role in this tenant, or None."""
    return session.execute(select(User, UserRole).join(UserRole, UserRole.user_id == User.id)
                           .where(UserRole.tenant_id == tenant_id, User.id == user_id)).first()


def members(session: Session, *, tenant_id: str) -> Sequence[Any]:
    """(User, UserRole) of everyone holding a role in this tenant, by username."""
    return session.execute(select(User, UserRole).join(UserRole, UserRole.user_id == User.id)
                           .where(UserRole.tenant_id == tenant_id).order_by(User.username)).all()


def members_named(session: Session, *, tenant_id: str, name_or_id: str) -> list[User]:
    """The users holding a role in this tenant whose id or username is `name_or_id` (an operator's
    account and a tenant's own may share a username: then both)."""
    return list(session.scalars(select(User).join(UserRole, UserRole.user_id == User.id).where(
        UserRole.tenant_id == tenant_id, (User.id == name_or_id) | (User.username == name_or_id))
        .order_by(User.id)))


def tenant_ids_of(session: Session, *, user_id: str) -> list[str]:
    """The tenants the user holds a role in."""
    return list(session.scalars(select(UserRole.tenant_id).where(UserRole.user_id == user_id)))


def roles_with_tenant_names(session: Session, *, user_id: str) -> Sequence[Any]:
    """(UserRole, tenant name) of each of the user's roles, by tenant name."""
    return session.execute(select(UserRole, Tenant.name).join(Tenant, Tenant.id == UserRole.tenant_id)
                           .where(UserRole.user_id == user_id).order_by(Tenant.name)).all()


def insert_web_session(session: Session, *, session_id: str, user_id: str) -> None:
    session.add(WebSession(id=session_id, user_id=user_id))


def live_web_session(session: Session, *, session_id: str, idle: timedelta):
    """(WebSession, User) when the session is neither revoked nor idle for `idle`, its user is
    enabled and has not signed out everywhere since; else None."""
    return session.execute(
        select(WebSession, User).join(User, User.id == WebSession.user_id).where(
            WebSession.id == session_id, WebSession.revoked_at.is_(None), User.disabled_at.is_(None),
            WebSession.created_at >= User.sessions_valid_after,
            WebSession.last_seen_at > func.now() - idle)).first()


def touch_web_session(session: Session, *, session_id: str, every: timedelta) -> None:
    """Record use, at most once per `every` (most requests only read)."""
    session.execute(update(WebSession).where(
        WebSession.id == session_id, WebSession.last_seen_at < func.now() - every
    ).values(last_seen_at=func.now()))


def revoke_web_session(session: Session, *, session_id: str, at: datetime) -> None:
    session.execute(update(WebSession).where(WebSession.id == session_id).values(revoked_at=at))


def revoke_all_web_sessions(session: Session, *, user_id: str, at: datetime) -> None:
    """End every session of the user, and refuse any opened before `at`."""
    session.execute(update(User).where(User.id == user_id).values(sessions_valid_after=at))
    session.execute(update(WebSession).where(WebSession.user_id == user_id,
                                             WebSession.revoked_at.is_(None)).values(revoked_at=at))
