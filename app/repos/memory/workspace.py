"""SQL for the shared workspace (RFC 0059): each file's head row (`workspace_files`) and its kept
versions (`workspace_versions`). Every query is scoped by tenant."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, delete, func, select
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.orm import Session, defer

from app.db.models import WorkspaceFile, WorkspaceVersion


def _heads(tenant_id: str):
    """Current live versions: each file's head joined to its version row."""
    return (select(WorkspaceVersion)
            .join(WorkspaceFile, and_(WorkspaceFile.tenant_id == WorkspaceVersion.tenant_id,
                                      WorkspaceFile.path == WorkspaceVersion.path,
                                      WorkspaceFile.version == WorkspaceVersion.version))
            .where(WorkspaceFile.tenant_id == tenant_id, WorkspaceFile.deleted.is_(False)))


def _as_of(tenant_id: str, instant: datetime):
    """Each path's latest version written at or before `instant` (tombstones included)."""
    return (select(WorkspaceVersion)
            .where(WorkspaceVersion.tenant_id == tenant_id, WorkspaceVersion.created_at <= instant)
            .ext(distinct_on(WorkspaceVersion.path)).order_by(WorkspaceVersion.path, WorkspaceVersion.version.desc()))


def list_versions(session: Session, *, tenant_id: str, instant: datetime | None,
                  prefix: str | None) -> list[WorkspaceVersion]:
    """Each file's current version (or its version as of `instant`, tombstones included), without
    bodies, by path; only paths starting with `prefix` when given."""
    stmt = _heads(tenant_id) if instant is None else _as_of(tenant_id, instant)
    if prefix:
        stmt = stmt.where(WorkspaceVersion.path.startswith(prefix, autoescape=True))
    return list(session.scalars(stmt.options(defer(WorkspaceVersion.content)).order_by(WorkspaceVersion.path)))


def find_version(session: Session, *, tenant_id: str, path: str, version: int | None = None,
                 instant: datetime | None = None) -> WorkspaceVersion | None:
    """One file's version: number `version` (if kept), as of `instant`, or else current; None if absent."""
    if version is not None:
        stmt = select(WorkspaceVersion).where(WorkspaceVersion.tenant_id == tenant_id,
                                              WorkspaceVersion.version == version)
    elif instant is not None:
        stmt = _as_of(tenant_id, instant)
    else:
        stmt = _heads(tenant_id)
    return session.scalars(stmt.where(WorkspaceVersion.path == path)).first()


def get_head(session: Session, *, tenant_id: str, path: str, lock: bool = False) -> WorkspaceFile | None:
    """The file's head row (its version counter, even when deleted), or None if never written."""
    return session.get(WorkspaceFile, (tenant_id, path), with_for_update=True if lock else None)


def count_live(session: Session, *, tenant_id: str) -> int:
    """How many files the tenant's workspace holds (tombstoned ones not counted)."""
    return session.scalar(select(func.count()).select_from(WorkspaceFile).where(
        WorkspaceFile.tenant_id == tenant_id, WorkspaceFile.deleted.is_(False))) or 0


def insert_head(session: Session, head: WorkspaceFile) -> None:
    session.add(head)


def insert_version(session: Session, version: WorkspaceVersion, *, keep: int) -> None:
    """Insert a version, then drop the file's versions older than the newest `keep`."""
    session.add(version)
    session.flush()
    session.execute(delete(WorkspaceVersion).where(
        WorkspaceVersion.tenant_id == version.tenant_id, WorkspaceVersion.path == version.path,
        WorkspaceVersion.version <= version.version - keep))


def content_of(session: Session, *, tenant_id: str, path: str, version: int) -> str | None:
    return session.scalar(select(WorkspaceVersion.content).where(
        WorkspaceVersion.tenant_id == tenant_id, WorkspaceVersion.path == path,
        WorkspaceVersion.version == version))
