"""SQL for memories. Every query is scoped by tenant (and agent where the API is agent-scoped);
visibility (live, not expired, `as_of` snapshots) is decided here, in SQL, never after a top-k."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterator, Sequence

from psycopg.types.json import Jsonb
from sqlalchemy import Select, and_, func, or_, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.db.models import Memory
from app.db.vectors import vector_param

# Time is `statement_timestamp()`, not `now()`: now() is frozen at transaction start, which
# would let a long transaction (or a test's outer one) see an expired row as live.

# Statuses an `as_of` snapshot may still show: they were live at some point.
ONCE_LIVE = ("live", "forgotten", "archived", "merged", "superseded")


@dataclass(frozen=True)
class Scope:
    """Which memories a read may see: always a tenant; usually one agent; optionally a user."""

    tenant_id: str
    agent_id: str | None = None
    user_id: str | None = None
    as_of: datetime | None = None


def visible(scope: Scope):
    """The SQL predicate for 'this caller may see this row now (or as of `scope.as_of`)'."""
    conds = [Memory.tenant_id == scope.tenant_id,
             or_(Memory.expires_at.is_(None), Memory.expires_at > func.statement_timestamp())]
    if scope.agent_id is not None:
        conds.append(Memory.agent_id == scope.agent_id)
    if scope.user_id is not None:
        conds.append(Memory.user_id == scope.user_id)
    if scope.as_of is None:
        conds.append(Memory.status == "live")
    else:
        conds += [Memory.status.in_(ONCE_LIVE), Memory.hard_deleted.is_(False),
                  Memory.live_from <= scope.as_of,
                  or_(Memory.ended_at.is_(None), Memory.ended_at > scope.as_of)]
    return and_(*conds)


def apply_filters(stmt: Select, *, types: Sequence[str] | None = None, tags: Sequence[str] | None = None,
                  metadata: dict[str, Any] | None = None, fresher_than_days: float | None = None,
                  source: str | None = None) -> Select:
    if types:
        stmt = stmt.where(Memory.type.in_(list(types)))
    if tags:
        stmt = stmt.where(Memory.tags.contains(list(tags)))
    if metadata:
        stmt = stmt.where(Memory.metadata_.contains(metadata))
    if fresher_than_days is not None:
        stmt = stmt.where(Memory.created_at >= func.statement_timestamp() - func.make_interval(0, 0, 0, 0, 0, 0,
                                                                              fresher_than_days * 86400))
    if source is not None:
        stmt = stmt.where(Memory.source == source)
    return stmt


def insert(session: Session, memory: Memory) -> Memory:
    session.add(memory)
    session.flush()
    return memory


def insert_all(session: Session, memories: Sequence[Memory]) -> None:
    session.add_all(memories)
    session.flush()


# The columns a new row is written with (`prepare_remember` sets each; the rest take their server
# defaults), as the psycopg text `insert_rows` returns: sent by the driver in one pipeline with the
# transaction's COMMIT, past the ORM's unit of work (`app.services.audit.audit_commit.insert_with_commit`).
_NEW_ROW_COLUMNS = ("id", "tenant_id", "agent_id", "user_id", "type", "content", "metadata_", "tags", "confidence",
                    "source", "embedding", "status", "created_at", "updated_at", "live_from", "ended_at",
                    "expires_at", "merged_into", "superseded_by", "change_id", "run_id", "node_id", "digest_key",
                    "written_by", "score_multiplier", "hard_deleted")
_CASTS = {"embedding": "::vector", "tags": "::text[]"}
_COLUMN_NAMES = [Memory.__mapper__.get_property(a).columns[0].name for a in _NEW_ROW_COLUMNS]  # metadata_ → metadata
NEW_ROWS_SQL = (f"INSERT INTO memories ({', '.join(_COLUMN_NAMES)}) "
                f"VALUES ({', '.join('%(' + a + ')s' + _CASTS.get(a, '') for a in _NEW_ROW_COLUMNS)})")


def insert_rows(memories: Sequence[Memory]) -> tuple[str, list[dict[str, Any]]]:
    """New rows (transient `Memory` objects, never added to a session) as an INSERT's psycopg text
    and its parameter rows, for `insert_with_commit`. The embedding goes in pgvector's binary form (a
    `SqlVector` packed it once already, `app.db.vectors`); metadata as JSONB."""
    rows = []
    for memory in memories:
        row = {name: getattr(memory, name) for name in _NEW_ROW_COLUMNS}
        row["metadata_"] = Jsonb(row["metadata_"])
        if row["embedding"] is not None:
            row["embedding"] = vector_param(row["embedding"])
        rows.append(row)
    return NEW_ROWS_SQL, rows


def tenants_holding(session: Session, *, ids: Sequence[str]) -> dict[str, str]:
    """id -> tenant of each of `ids` stored in any tenant, any status. Deliberately not tenant-scoped:
    memory ids are global, and an import must not reuse one another tenant holds (it learns only
    that the id is taken)."""
    return {row.id: row.tenant_id for row in session.execute(
        select(Memory.id, Memory.tenant_id).where(Memory.id.in_(list(ids))))}


def get_visible(session: Session, *, scope: Scope, memory_id: str) -> Memory | None:
    return session.scalars(select(Memory).where(Memory.id == memory_id, visible(scope))).first()


def get_in_tenant(session: Session, *, tenant_id: str, memory_id: str, lock: bool = False) -> Memory | None:
    stmt = select(Memory).where(Memory.id == memory_id, Memory.tenant_id == tenant_id)
    if lock:
        stmt = stmt.with_for_update()
    return session.scalars(stmt).first()


def lock_live(session: Session, *, scope: Scope, ids: Sequence[str]) -> list[Memory]:
    """Live rows among `ids` in scope, locked for update, in id order (no deadlocks)."""
    return list(session.scalars(
        select(Memory).where(Memory.id.in_(list(ids)), visible(Scope(scope.tenant_id, scope.agent_id)))
        .order_by(Memory.id).with_for_update()))


def page(session: Session, *, scope: Scope, limit: int, after: tuple[datetime, str] | None,
         type_: str | None, tag: str | None) -> list[Memory]:
    """Newest first, keyset-paginated on (created_at, id)."""
    stmt = select(Memory).where(visible(scope))
    stmt = apply_filters(stmt, types=[type_] if type_ else None, tags=[tag] if tag else None)
    if after is not None:
        created, mid = after
        stmt = stmt.where(or_(Memory.created_at < created, and_(Memory.created_at == created, Memory.id < mid)))
    return list(session.scalars(stmt.order_by(Memory.created_at.desc(), Memory.id.desc()).limit(limit)))


def matching(session: Session, *, scope: Scope, ids: Sequence[str] | None = None,
             metadata: dict[str, Any] | None = None, lock: bool = False, **filters: Any) -> list[Memory]:
    """Live rows in scope matching ids (if given) and filters; locked when asked."""
    stmt = select(Memory).where(visible(scope))
    if ids is not None:
        stmt = stmt.where(Memory.id.in_(list(ids)))
    stmt = apply_filters(stmt, metadata=metadata, **filters).order_by(Memory.id)
    if lock:
        stmt = stmt.with_for_update()
    return list(session.scalars(stmt))


def expire_candidates(session: Session, *, scope: Scope, older_than_days: float | None, type_: str | None,
                      confidence_below: float | None, no_recall_in_days: float | None,
                      lock: bool = False, ids: Sequence[str] | None = None) -> list[Memory]:
    """Live rows in scope matching every given predicate (ANDed); with `ids`, only those rows."""
    stmt = select(Memory).where(visible(scope))
    if ids is not None:
        stmt = stmt.where(Memory.id.in_(list(ids)))
    if older_than_days is not None:
        stmt = stmt.where(Memory.created_at < func.statement_timestamp() - func.make_interval(0, 0, 0, 0, 0, 0, older_than_days * 86400))
    if type_ is not None:
        stmt = stmt.where(Memory.type == type_)
    if confidence_below is not None:
        stmt = stmt.where(Memory.confidence < confidence_below)
    if no_recall_in_days is not None:
        stmt = stmt.where(func.coalesce(Memory.last_recalled_at, Memory.created_at)
                          < func.statement_timestamp() - func.make_interval(0, 0, 0, 0, 0, 0, no_recall_in_days * 86400))
    stmt = stmt.order_by(Memory.id)
    if lock:
        stmt = stmt.with_for_update()
    return list(session.scalars(stmt))


def end(session: Session, *, tenant_id: str, ids: Sequence[str], status: str, at: datetime, **extra: Any) -> None:
    """Move live rows of the tenant to a terminal status (forgotten, archived, merged, superseded)."""
    session.execute(update(Memory).where(Memory.tenant_id == tenant_id, Memory.id.in_(list(ids)))
                    .values(status=status, ended_at=at, updated_at=at, **extra))


def hard_delete(session: Session, *, tenant_id: str, ids: Sequence[str], at: datetime) -> None:
    """Remove content, embedding, tags, metadata and the digest key for good; keep a tombstone."""
    session.execute(update(Memory).where(Memory.tenant_id == tenant_id, Memory.id.in_(list(ids))).values(
        content=None, embedding=None, metadata_={}, tags=[], digest_key=None, hard_deleted=True,
        status="forgotten", ended_at=func.coalesce(Memory.ended_at, at), updated_at=at))


def record_recall(session: Session, *, tenant_id: str, ids: Sequence[str]) -> None:
    """Count one recall of each of the tenant's memories `ids`."""
    if ids:
        session.execute(text(
            "UPDATE memories SET recall_count = recall_count + 1, last_recalled_at = statement_timestamp() "
            "WHERE tenant_id = :tenant_id AND id = ANY(:ids)"), {"tenant_id": tenant_id, "ids": list(ids)})


def get_by_key(session: Session, *, tenant_id: str, memory_id: str, lock: bool = False) -> Memory | None:
    """The tenant's memory by primary key, whatever its status (the session's copy when it holds one
    and no lock is asked; a locked read reloads it)."""
    return session.get(Memory, {"id": memory_id, "tenant_id": tenant_id},
                       with_for_update=True if lock else None, populate_existing=lock)


def embedding_of(session: Session, *, tenant_id: str, memory_id: str):
    """The stored embedding of the tenant's memory (deferred on the model, so read on its own)."""
    return session.scalar(select(Memory.embedding).where(Memory.id == memory_id, Memory.tenant_id == tenant_id))


def embeddings_of(session: Session, *, tenant_id: str, ids: Sequence[str]) -> dict[str, Any]:
    """The stored embeddings of the tenant's memories `ids` (those that have one), by id."""
    if not ids:
        return {}
    rows = session.execute(select(Memory.id, Memory.embedding).where(Memory.tenant_id == tenant_id,
                                                                     Memory.id.in_(list(ids)))).all()
    return {r[0]: r[1] for r in rows if r[1] is not None}


def update_returning(session: Session, *, tenant_id: str, memory_id: str, **values: Any) -> Memory:
    """Set columns of the tenant's memory in one statement and return the row as it now is."""
    return session.scalars(update(Memory).where(Memory.id == memory_id, Memory.tenant_id == tenant_id)
                           .values(**values).returning(Memory)
                           .execution_options(synchronize_session=False, populate_existing=True)).one()


def live_owner(session: Session, *, tenant_ids: Sequence[str], memory_id: str):
    """(tenant_id, agent_id) of a live, unexpired memory in one of `tenant_ids`, or None."""
    return session.execute(select(Memory.tenant_id, Memory.agent_id).where(
        Memory.tenant_id.in_(list(tenant_ids)), Memory.id == memory_id, Memory.status == "live",
        or_(Memory.expires_at.is_(None), Memory.expires_at > func.statement_timestamp()))).first()


def newest_procedural(session: Session, *, scope: Scope, containing: str | None, limit: int) -> list[str]:
    """Contents of the newest visible procedural memories in scope (those containing `containing`
    literally, when given), newest first."""
    stmt = select(Memory.content).where(visible(scope), Memory.type == "procedural")
    if containing is not None:
        stmt = stmt.where(Memory.content.contains(containing, autoescape=True))
    return list(session.scalars(stmt.order_by(Memory.created_at.desc()).limit(limit)))


def stream_for_export(session: Session, *, tenant_id: str, statuses: Sequence[str],
                      agent_id: str | None = None) -> Iterator[Memory]:
    """The tenant's memories in `statuses` that still hold content, oldest first, streamed in
    batches of 1000 (optionally one agent's)."""
    stmt = (select(Memory).where(Memory.tenant_id == tenant_id, Memory.status.in_(list(statuses)),
                                 Memory.hard_deleted.is_(False), Memory.content.is_not(None))
            .order_by(Memory.created_at, Memory.id).execution_options(yield_per=1000))
    if agent_id is not None:
        stmt = stmt.where(Memory.agent_id == agent_id)
    return iter(session.scalars(stmt))


_ADD_RECALLS = text("""
    UPDATE memories AS m
    SET recall_count = m.recall_count + v.n,
        last_recalled_at = greatest(m.last_recalled_at, v.at)
    FROM unnest(CAST(:tenants AS text[]), CAST(:ids AS text[]), CAST(:ns AS integer[]),
                CAST(:ats AS timestamptz[])) AS v(tenant_id, id, n, at)
    WHERE m.tenant_id = v.tenant_id AND m.id = v.id""")


def add_recalls(conn: Connection, *, tenant_ids: Sequence[str], ids: Sequence[str], counts: Sequence[int],
                last_at: Sequence[datetime]) -> int:
    """Add `counts[i]` recalls at `last_at[i]` to memory `ids[i]` of tenant `tenant_ids[i]`, in one
    statement of the caller's transaction, committed without waiting for the WAL flush (the counts
    are statistics). Returns how many memories were updated."""
    conn.execute(text("SET LOCAL synchronous_commit = off"))
    return conn.execute(_ADD_RECALLS, {"tenants": list(tenant_ids), "ids": list(ids), "ns": list(counts),
                                       "ats": list(last_at)}).rowcount


def links_touching(session: Session, *, tenant_id: str, ids: Sequence[str]) -> list[tuple[str, str]]:
    """The tenant's merge and supersede links (a row → the row it was merged into or superseded by)
    with either end in `ids`: the edges recall's graph hops walk, one step per call."""
    if not ids:
        return []
    ids = list(ids)
    rows = session.execute(
        select(Memory.id, Memory.merged_into, Memory.superseded_by).where(
            Memory.tenant_id == tenant_id,
            or_(Memory.id.in_(ids), Memory.merged_into.in_(ids), Memory.superseded_by.in_(ids)))).all()
    return [(row.id, target) for row in rows for target in (row.merged_into, row.superseded_by) if target]
