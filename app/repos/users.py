"""SQL for reviewers' accounts (`users`) and their tenant roles (`user_roles`)."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.db.models import User, UserRole


def member(session: Session, *, tenant_id: str, user_id: str):
    """(User, UserRole) of a user holding a role in this tenant, or None."""
    return session.execute(select(User, UserRole).join(UserRole, UserRole.user_id == User.id)
                           .where(UserRole.tenant_id == tenant_id, User.id == user_id)).first()


def set_password_hash(session: Session, *, user_id: str, password_hash: str) -> None:
    session.execute(update(User).where(User.id == user_id).values(password_hash=password_hash))
