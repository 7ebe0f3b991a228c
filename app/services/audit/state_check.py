"""The memory state check: every stored memory held to its last audited state.

Each audit entry about a memory records the digest of the state it left the row in
(`memories.memory_event`, `app.core.state_digest`). The check recomputes each row's digest and
compares it with the latest entry about that memory, in one streamed pass over the tenant's rows
joined to the latest entry per memory (index `audit_entries_memory_state`). A mismatch names the
memory, the seq whose state it should hold, and a reason:

- `row_missing`: the log says the memory exists, the row is gone (rows are never deleted: a hard
  delete keeps a tombstone);
- `no_audit_event`: a row nothing ever wrote (inserted behind Memwarden's back);
- `no_state_recorded`: the latest entry predates state digests (see `baseline`);
- `status_changed`: the row's status is not the audited one (a pending, rejected or forgotten
  row made live, a live one hidden);
- `content_changed`: its content is not the audited content (an edit, or two rows' contents swapped);
- `state_changed`: anything else a state covers (metadata, tags, type, expiry, confidence…).

What it cannot prove (README, security model): a state forged by someone who holds the state key
and can append to the chain, a row changed and changed back between two checks, and a read served
before the first check unless reads fail closed (`MEMWARDEN_INTEGRITY_FAIL_CLOSED`: `served_mismatches`).
It trusts the chain's query columns; `memwarden audit verify --tenant T --state` verifies the chain too.

A tenant found mismatched gets one open integrity alarm (the first mismatch): announced as an
`integrity.mismatch` event (so to webhooks) by a background round and shown as a banner to the
tenant's admins and auditors until a check finds the tenant intact again.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from sqlalchemy.exc import SQLAlchemyError

from app.core import state_digest
from app.errors import IntegrityMismatch
from app.repos.audit import state_check as repo
from app.services.events import events
from app.services.audit.audit import chain_for, chain_work
from app.services.runtime.context import AppContext
from app.services.audit.state_digests import StateKeys

log = logging.getLogger(__name__)
REPORT_LIMIT = 1000  # mismatches listed in a report; all are counted
BASELINE_BATCH = 1000


@dataclass(frozen=True)
class Mismatch:
    """One memory that differs from its last audited state (identifiers only, never content)."""

    memory_id: str
    expected_seq: int | None
    """The seq of the latest audit entry about it (None: it has none)."""
    reason: str
    audited_status: str | None
    status: str | None
    """The row's status (None: the row is gone)."""

    def to_json(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id, "expected_seq": self.expected_seq, "reason": self.reason,
                "audited_status": self.audited_status, "status": self.status}


@dataclass
class StateReport:
    """The outcome of a tenant's state check."""

    tenant_id: str
    checked: int = 0
    """Memories (rows, and audited memories whose row is gone) compared."""
    mismatch_count: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.mismatch_count == 0

    def to_json(self) -> dict[str, Any]:
        return {"status": "intact" if self.ok else "mismatch", "checked": self.checked,
                "mismatch_count": self.mismatch_count, "mismatches": [m.to_json() for m in self.mismatches],
                "truncated": self.mismatch_count > len(self.mismatches),
                "rows_per_second": round(self.checked / self.seconds) if self.seconds > 0 else None}


def compare(keys: StateKeys, tenant_id: str, row: Any) -> Mismatch | None:
    """Hold one memory row (with its latest audit entry's `audited_id`, `seq`, `entry`) to the state
    that entry recorded; the mismatch, or None when they agree."""
    event_type, data = _entry(row.entry)
    state = data.get("state") if isinstance(data.get("state"), dict) else None
    if row.id is None:
        return Mismatch(row.audited_id, row.seq, "row_missing", state and state.get("status"), None)
    if row.audited_id is None:
        return Mismatch(row.id, None, "no_audit_event", None, row.status)
    if state is None:
        return Mismatch(row.id, row.seq, "no_state_recorded", None, row.status)
    if keys.digest(tenant_id, row) == state.get("digest"):
        return None
    if state.get("status") != row.status:
        reason = "status_changed"
    elif _content_differs(row, event_type, data):
        reason = "content_changed"
    else:
        reason = "state_changed"
    return Mismatch(row.id, row.seq, reason, state.get("status"), row.status)


def _entry(entry: bytes | None) -> tuple[str | None, dict[str, Any]]:
    """(type, data) of stored entry bytes ({} when absent or unreadable: reported, never raised)."""
    if entry is None:
        return None, {}
    try:
        obj = json.loads(bytes(entry))
        data = obj["data"]
        return obj.get("type"), data if isinstance(data, dict) else {}
    except (TypeError, ValueError, KeyError):
        return None, {}


def _content_differs(row: Any, event_type: str | None, data: dict[str, Any]) -> bool:
    """Whether the row's content is not what the entry recorded (a hard delete's entry digests the
    content it destroyed: none is expected after it). Unknown when the entry recorded no digest."""
    if "content_digest" not in data:
        return False
    expected = None if event_type == "memory.hard_deleted" else data["content_digest"]
    return state_digest.content_hmac(row.digest_key, row.content) != expected


def _collect(report: StateReport, keys: StateKeys, rows: Iterable[Any]) -> None:
    for row in rows:
        report.checked += 1
        mismatch = compare(keys, report.tenant_id, row)
        if mismatch is not None:
            report.mismatch_count += 1
            if len(report.mismatches) < REPORT_LIMIT:
                report.mismatches.append(mismatch)


def check_tenant(ctx: AppContext, tenant_id: str, *, detected_by: str) -> StateReport:
    """Compare every stored memory of the tenant (and every memory its log speaks of) with its last
    audited state, in one streamed pass and one snapshot. A mismatch opens the tenant's integrity
    alarm; a clean check clears it."""
    report, started = StateReport(tenant_id), time.perf_counter()
    keys = ctx.state_keys
    with ctx.db.sessions() as session:
        with session.begin():
            rows = repo.all_with_latest_entry(session, tenant_id=tenant_id, chain_id=chain_for(tenant_id))
            _collect(report, keys, rows)
    report.seconds = time.perf_counter() - started
    record_outcome(ctx, tenant_id, report.mismatches[:1], report.mismatch_count, detected_by)
    return report


def run_check(ctx: AppContext, tenant_id: str, actor: dict[str, Any], detected_by: str) -> StateReport:
    """`check_tenant` asked for by a person or key (the API, the CLI), recorded in the tenant's
    chain as `audit.state_checked` (counts and the first ids, no content)."""
    report = check_tenant(ctx, tenant_id, detected_by=detected_by)
    with ctx.db.sessions.begin() as session:
        ctx.audit.append_access(session, tenant_id=tenant_id, event_type="audit.state_checked", actor=actor,
                                subject={"type": "audit_chain", "id": chain_for(tenant_id)},
                                data={"status": "intact" if report.ok else "mismatch", "checked": report.checked,
                                      "mismatch_count": report.mismatch_count,
                                      "first": [m.to_json() for m in report.mismatches[:10]]})
    return report


def check_rows(ctx: AppContext, conn, tenant_id: str, ids: Sequence[str]) -> list[Mismatch]:
    """The mismatches among the tenant's memories `ids`, read in one statement on `conn` (a session
    or connection: the read's own). An id with no row is not reported: the read did not serve it."""
    if not ids:
        return []
    keys = ctx.state_keys
    found = []
    for row in repo.some_with_latest_entry(conn, tenant_id=tenant_id, chain_id=chain_for(tenant_id), ids=ids):
        mismatch = compare(keys, tenant_id, row)
        if mismatch is not None:
            found.append(mismatch)
    return found


def served_mismatches(ctx: AppContext, conn, tenant_id: str, ids: Sequence[str]) -> list[Mismatch]:
    """With `MEMWARDEN_INTEGRITY_FAIL_CLOSED`, the mismatches among the memories a read is about
    to serve (checked in the read's own session: one statement); without it, none and no statement.
    The read then calls `refuse_mismatched` once its session is closed."""
    if not ctx.settings.integrity_fail_closed or not ids:
        return []
    return check_rows(ctx, conn, tenant_id, ids)


def refuse_mismatched(ctx: AppContext, tenant_id: str, found: list[Mismatch]) -> None:
    """Refuse a read that would serve a memory whose row differs from its last audited state: 409
    `integrity_mismatch` for the whole read (an agent learns its memory was tampered with instead
    of quietly getting less), after opening the tenant's alarm. Nothing when `found` is empty."""
    if not found:
        return
    record_outcome(ctx, tenant_id, found[:1], len(found), "read")
    first = found[0]
    raise IntegrityMismatch(
        f"memory {first.memory_id} differs from its audited state (seq {first.expected_seq}): not served",
        details={"memory_id": first.memory_id, "expected_seq": first.expected_seq, "reason": first.reason,
                 "mismatches": [m.to_json() for m in found]})


def record_outcome(ctx: AppContext, tenant_id: str, first: list[Mismatch], count: int, detected_by: str) -> None:
    """Open the tenant's integrity alarm on a mismatch (its first), or clear it after a full check
    found none. In a transaction of its own (a refused read's outlives it); a failure to record is
    logged, never raised."""
    try:
        with ctx.db.sessions.begin() as session:
            conn = session.connection()
            if first:
                m = first[0]
                if repo.raise_alarm(conn, tenant_id=tenant_id, memory_id=m.memory_id, expected_seq=m.expected_seq,
                                    reason=m.reason, mismatches=count, detected_by=detected_by):
                    log.critical("tenant %s: %d memory row(s) differ from their audited state; first %s "
                                 "(expected seq %s): %s", tenant_id, count, m.memory_id, m.expected_seq, m.reason)
            elif detected_by != "read" and repo.clear_alarm(conn, tenant_id=tenant_id):
                log.warning("tenant %s: every memory matches its audited state again; integrity alarm cleared",
                            tenant_id)
    except SQLAlchemyError:
        log.exception("tenant %s: the integrity alarm could not be recorded", tenant_id)


def announce(ctx: AppContext) -> int:
    """Write the `integrity.mismatch` event of every open alarm not yet announced (and so its
    webhooks). Returns how many."""
    # In autocommit: a read-only transaction would end in a ROLLBACK, and psycopg forgets every
    # statement it prepared on a connection that sees one, so the hot paths' next statements there
    # would each pay a round trip to prepare again (this runs every second).
    with ctx.db.reader() as conn:
        pending = repo.unannounced(conn)
    done = 0
    for alarm in pending:
        with ctx.db.sessions.begin() as session:
            events.lock_tenant(session, alarm.tenant_id)
            if not repo.mark_announced(session, tenant_id=alarm.tenant_id, alarm_id=alarm.id):
                continue
            chain_work(session, alarm.tenant_id).despite_alarm = True  # also when the chain is closed
            events.emit(session, alarm.tenant_id, "integrity.mismatch", event_payload(alarm))
        done += 1
    return done


def event_payload(alarm: Any) -> dict[str, Any]:
    """The `integrity.mismatch` payload: the first mismatched memory, how many, who found it."""
    return {"memoryId": alarm.memory_id, "expectedSeq": alarm.expected_seq, "reason": alarm.reason,
            "mismatches": alarm.mismatches, "detectedBy": alarm.detected_by}


def check_all(ctx: AppContext) -> int:
    """The periodic job: check every tenant; returns how many mismatched."""
    with ctx.db.sessions() as session:
        tenants = repo.tenant_ids(session)
    return sum(not check_tenant(ctx, tenant_id, detected_by="periodic").ok for tenant_id in tenants)


def baseline(ctx: AppContext, tenant_id: str, *, actor: dict[str, Any]) -> int:
    """Vouch for the current state of every memory whose latest audit entry records none (memories
    written before state digests existed): one `memory.state_baseline` entry each, recording the
    row's state as it is now. Trust on first use: run it once after upgrading, before an attacker
    could have touched the rows. Memories with no audit entry at all are left reported. Returns
    how many were baselined."""
    chain_id, done = chain_for(tenant_id), 0
    with ctx.db.sessions() as session:
        rows = repo.memories_without_state(session, tenant_id=tenant_id, chain_id=chain_id)
    keys = ctx.state_keys
    for start in range(0, len(rows), BASELINE_BATCH):
        with ctx.db.sessions.begin() as session:
            for row in rows[start:start + BASELINE_BATCH]:
                ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.state_baseline", actor=actor,
                                 subject={"type": "memory", "id": row.id},
                                 data={"previous_seq": row.seq, "content_digest": state_digest.content_hmac(
                                     row.digest_key, row.content), "state": keys.record(tenant_id, row)})
                done += 1
    return done
