"""The read audit: every read that returns memory is recorded in the tenant's audit chain.

A read (recall, get, list, history — over `/v1`, MCP or OpenWOP refs) is noted here with who read
(key or user), for which agent, the operation, the memory ids returned, a keyed digest of what was
asked (HMAC-SHA256 under a key derived from the server secret, per tenant: equal queries compare
equal, the text cannot be recovered) and when — never content. Each becomes one `memory.read`
entry whose subject is the read's id (`read_…`), written with its rows in `read_records` and
`memory_reads` (the indexes behind `GET /v1/memories/{id}/readers` and `GET /v1/audit/access`)
in one transaction.

Off the request path: reads are buffered per process and a daemon thread writes them every
`read_audit_flush_ms`, or as soon as `read_audit_flush_records` wait, one transaction per tenant.
The bound on a crash (`kill -9`, power loss): the reads noted in the last flush interval, plus
those of a flush still in flight. A failed flush (the database away) keeps its reads for the next
one, up to `MAX_PENDING`; closing the app context and process exit flush what is left. Inside an
outer transaction (a request's unit of work, the tests' rolled-back one) the record is written in
it, so it shares that transaction's fate.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Sequence

from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from app.core.cursor import encode_cursor
from app.core.ids import new_id
from app.core.timefmt import format_ts, parse_ts, utcnow
from app.errors import AppError, AuditChainBroken, NotFound, ValidationFailed
from app.repos.memory import memories as memories_repo
from app.repos.audit import reads as repo
from app.services.audit.audit import chain_for
from app.services.audit.audit_commit import insert_with_commit, sends_with_commit
from app.services.runtime.cursors import decode_cursor
from app.services.runtime.flusher import Flusher, PerDatabase

if TYPE_CHECKING:
    from app.services.runtime.context import AppContext

log = logging.getLogger(__name__)

EVENT_TYPE = "memory.read"
MAX_PENDING = 100_000
"""Reads kept while the database is away; beyond it the oldest are dropped (and logged)."""


@dataclass(frozen=True)
class ReadRecord:
    """One read that returned memory: identifiers and a digest, never content."""

    tenant_id: str
    id: str
    read_at: datetime
    actor: dict[str, str]
    key_id: str | None
    agent_id: str | None
    operation: str
    query_digest: str | None
    memory_ids: tuple[str, ...]
    run_id: str | None = None
    """The agent run the read served, when the reader named one (`POST /v1/runs`)."""

    def audit_data(self) -> dict[str, Any]:
        data = {"operation": self.operation, "agent_id": self.agent_id, "memory_ids": list(self.memory_ids),
                "query_digest": self.query_digest, "read_at": format_ts(self.read_at)}
        if self.run_id is not None:  # entries of reads that name no run keep their shape
            data["run_id"] = self.run_id
        return data

    def row(self) -> dict[str, Any]:
        return {"tenant_id": self.tenant_id, "id": self.id, "read_at": self.read_at,
                "actor": f"{self.actor['kind']}:{self.actor['id']}", "key_id": self.key_id,
                "agent_id": self.agent_id, "operation": self.operation, "query_digest": self.query_digest,
                "memory_ids": list(self.memory_ids), "run_id": self.run_id}


_digest_roots: dict[str, bytes] = {}


def query_digest(ctx: AppContext, tenant_id: str, query: dict[str, Any] | None) -> str | None:
    """HMAC-SHA256 of the canonical JSON of what a read asked, under a per-tenant key derived from
    the server secret (never stored): the same query digests the same, the text stays secret."""
    if query is None:
        return None
    secret = ctx.settings.secret_key or str(ctx.settings.data_path)
    root = _digest_roots.get(secret)
    if root is None:  # the secret file is read once per process, not per read
        root = _digest_roots[secret] = hmac.new(ctx.settings.resolved_secret_key().encode(),
                                                b"memwarden/read-query", hashlib.sha256).digest()
    key = hmac.new(root, tenant_id.encode(), hashlib.sha256).digest()
    canonical = json.dumps(query, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hmac.new(key, canonical.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def new_record(ctx: AppContext, *, tenant_id: str, actor: dict[str, str], key_id: str | None,
               agent_id: str | None, operation: str, memory_ids: Sequence[str],
               query: dict[str, Any] | None = None, run_id: str | None = None) -> ReadRecord:
    """The record of one read made now (not yet written: `note_read` or `write_tenant`)."""
    return ReadRecord(tenant_id, new_id("read"), utcnow(), dict(actor), key_id, agent_id, operation,
                      query_digest(ctx, tenant_id, query), tuple(dict.fromkeys(memory_ids)), run_id)


def note_read(ctx: AppContext, *, tenant_id: str, actor: dict[str, str], key_id: str | None,
              agent_id: str | None, operation: str, memory_ids: Sequence[str],
              query: dict[str, Any] | None = None, session: Session | None = None,
              run_id: str | None = None) -> ReadRecord:
    """Record one read (see the module docstring for when it reaches the chain). `session`: the
    caller's own, open on the same outer transaction, which then writes it (rather than one more
    session) when there is one; otherwise ignored. `run_id`: the agent run the read served."""
    record = new_record(ctx, tenant_id=tenant_id, actor=actor, key_id=key_id, agent_id=agent_id,
                        operation=operation, memory_ids=memory_ids, query=query, run_id=run_id)
    if isinstance(ctx.db.sessions.kw.get("bind"), Connection):
        if session is not None:
            _write_in(session, ctx, tenant_id, [record], ctx.audit.append)
        else:
            write_tenant(ctx, tenant_id, [record])  # inside an outer transaction: written in it
    else:
        recorder(ctx).note(record)
    return record


def write_tenant(ctx: AppContext, tenant_id: str, records: Sequence[ReadRecord]) -> None:
    """Append one tenant's `records` to its chain and its indexes, in one transaction. If the
    chain is closed by an open alarm (the commit refuses), they go to the system chain instead
    (`AuditLog.append_access`): a tenant under investigation is still read, and its reads recorded."""
    try:
        _write(ctx, tenant_id, records, ctx.audit.append)
    except AuditChainBroken:
        _write(ctx, tenant_id, records, ctx.audit.append_access)


def _write(ctx: AppContext, tenant_id: str, records: Sequence[ReadRecord], append) -> None:
    with ctx.db.sessions.begin() as session:
        _write_in(session, ctx, tenant_id, records, append)


def _write_in(session: Session, ctx: AppContext, tenant_id: str, records: Sequence[ReadRecord], append) -> None:
    for record in records:
        append(session, tenant_id=tenant_id, event_type=EVENT_TYPE, actor=record.actor,
               subject={"type": "read", "id": record.id}, data=record.audit_data())
    rows = [r.row() for r in records]
    if sends_with_commit(session):  # nothing reads them back: they go out with the COMMIT
        for sql, params in repo.records_at_commit(rows):
            insert_with_commit(session, sql, params)
    else:
        repo.insert_records(session, rows)


def write_batch(ctx: AppContext, records: Sequence[ReadRecord]) -> list[ReadRecord]:
    """Write `records` of any tenants, one transaction per tenant; returns those of the tenants
    whose transaction failed (logged), for the next round."""
    by_tenant: dict[str, list[ReadRecord]] = {}
    for record in records:
        by_tenant.setdefault(record.tenant_id, []).append(record)
    failed: list[ReadRecord] = []
    for tenant_id, batch in sorted(by_tenant.items()):
        try:
            write_tenant(ctx, tenant_id, batch)
        except IntegrityError:  # a retry of a batch whose commit went through unacknowledged: written
            log.info("read audit: %d records were already written", len(batch))
        except (SQLAlchemyError, AppError) as exc:  # the database away; the next round retries
            log.warning("read audit: %d records not written yet (%s)", len(batch), type(exc).__name__)
            failed.extend(batch)
    return failed


class ReadRecorder(Flusher[list[ReadRecord]]):
    """Pending read records of one database; a failed write is kept for the next round (logged,
    never raised: the reads were already answered), up to MAX_PENDING."""

    thread_name = "read-audit"

    def __init__(self, ctx: AppContext):
        self.ctx = ctx
        self.flush_records = max(ctx.settings.read_audit_flush_records, 1)
        super().__init__(max(ctx.settings.read_audit_flush_ms, 1) / 1000)

    def _empty(self) -> list[ReadRecord]:
        return []

    def note(self, record: ReadRecord) -> None:
        with self.pending() as pending:
            pending.append(record)
            if len(pending) >= self.flush_records:
                self.wake()

    def _write(self, batch: list[ReadRecord]) -> tuple[int, list[ReadRecord] | None]:
        failed = write_batch(self.ctx, batch)
        return len(batch) - len(failed), failed

    def _put_back(self, failed: list[ReadRecord]) -> None:
        self._pending[:0] = failed
        dropped = len(self._pending) - MAX_PENDING
        if dropped > 0:
            del self._pending[:dropped]
            log.error("read audit: %d records dropped: the database has been away too long", dropped)


_recorders: PerDatabase[ReadRecorder] = PerDatabase()


def recorder(ctx: AppContext) -> ReadRecorder:
    """The process's recorder for the context's database."""
    return _recorders.get(ctx.db.engine, lambda: ReadRecorder(ctx))


def flush(ctx: AppContext) -> None:
    """Write this process's pending read records for the context's database now."""
    _recorders.flush(ctx.db.engine)


# --- listings (audit:read) -------------------------------------------------------------------------

DEFAULT_LIMIT = 100


def _read_json(row, *, with_ids: bool) -> dict[str, Any]:
    body = {"read_id": row.id, "read_at": format_ts(row.read_at), "actor": row.actor, "key_id": row.key_id,
            "agent_id": row.agent_id, "operation": row.operation, "query_digest": row.query_digest,
            "run_id": row.run_id, "audit_seq": row.seq}
    if with_ids:
        body["memory_ids"] = list(row.memory_ids)
    else:
        body["returned"] = row.returned
    return body


def readers(ctx: AppContext, tenant_id: str, memory_id: str, limit: int = DEFAULT_LIMIT,
            cursor: str | None = None) -> dict[str, Any]:
    """Who was returned `memory_id` (a memory of the tenant, in any status), newest read first:
    `{memory_id, items, next_cursor}`; 404 for a memory the tenant never had."""

    after = decode_cursor(cursor) if cursor else None
    flush(ctx)  # this process's reads so far are listed too
    with ctx.db.sessions() as session:
        if memories_repo.get_in_tenant(session, tenant_id=tenant_id, memory_id=memory_id) is None:
            raise NotFound("memory not found")
        rows = repo.readers_page(session, tenant_id=tenant_id, chain_id=chain_for(tenant_id), memory_id=memory_id,
                                 limit=limit + 1, after=after)
    return {"memory_id": memory_id, **_page(rows, limit, with_ids=False)}


def access_filter(spec: dict[str, Any]) -> repo.AccessFilter:
    """The filter a validated query (`access.query`, or the CLI's options) asks for; 422 for bad dates."""
    read_from, read_to = _timestamp(spec, "from"), _timestamp(spec, "to")
    if read_from and read_to and read_from > read_to:
        raise ValidationFailed.at("/from", "from must not be later than to")
    return repo.AccessFilter(key_id=spec.get("key_id") or None, agent_id=spec.get("agent_id") or None,
                             read_from=read_from, read_to=read_to, run_id=spec.get("run_id") or None)


def _timestamp(spec: dict[str, Any], name: str) -> datetime | None:
    value = spec.get(name)
    if value in (None, ""):
        return None
    try:
        return parse_ts(value)
    except (ValueError, TypeError) as exc:
        raise ValidationFailed.at(f"/{name}", f"not an RFC 3339 timestamp: {exc}") from None


def access(ctx: AppContext, tenant_id: str, flt: repo.AccessFilter, limit: int = DEFAULT_LIMIT,
           cursor: str | None = None) -> dict[str, Any]:
    """The tenant's reads that `flt` selects, newest first, each with the memory ids it returned:
    `{items, next_cursor}`."""

    after = decode_cursor(cursor) if cursor else None
    flush(ctx)
    with ctx.db.sessions() as session:
        rows = repo.access_page(session, tenant_id=tenant_id, chain_id=chain_for(tenant_id), flt=flt,
                                limit=limit + 1, after=after)
    return _page(rows, limit, with_ids=True)


def _page(rows: list, limit: int, *, with_ids: bool) -> dict[str, Any]:
    more, rows = len(rows) > limit, rows[:limit]
    return {"items": [_read_json(r, with_ids=with_ids) for r in rows],
            "next_cursor": encode_cursor(rows[-1].read_at, rows[-1].id) if more else None}
