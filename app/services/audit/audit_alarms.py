"""Audit chain alarms: what happens once a chain is found not to verify, and how it ends.

A refusal (`app.services.audit.audit`) or a failed full verification opens the chain's alarm; from
then on every write to that tenant is refused (409 `audit_chain_broken`) while reads keep
working. This module announces each alarm as an `audit.chain_broken` event (and so to webhooks),
runs the periodic full verification that catches breaks below the last checkpoint, and clears an
alarm once the repaired chain verifies again.

The event is written by a background round rather than where the break is found: the finder
often holds the chain's lock (an append's commit, a checkpoint), and the event log is written
under that same lock.
"""

from __future__ import annotations

import logging
from typing import Any

from app.core.auditchain import VerifyReport
from app.repos.audit import audit_alarms as alarms_repo
from app.services.events import events
from app.services.audit.audit import actor_label, chain_for, chain_work
from app.services.audit.audit_commit import lock_chain
from app.services.runtime.context import AppContext

log = logging.getLogger(__name__)


def announce(ctx: AppContext) -> int:
    """Write the `audit.chain_broken` event of every open alarm not yet announced (tenant chains;
    the system chain has no event log). Returns how many alarms were announced."""
    with ctx.db.reader() as conn:  # in autocommit: no ROLLBACK (see `state_check.announce`)
        pending = alarms_repo.unannounced(conn)
    done = 0
    for alarm in pending:
        with ctx.db.sessions.begin() as session:
            lock_chain(session, alarm.chain_id)  # before the alarm row: see `clear`
            if not alarms_repo.mark_announced(session, alarm.id):
                continue
            if alarm.tenant_id is not None:
                chain_work(session, alarm.tenant_id).despite_alarm = True  # the one write a closed chain takes
                events.emit(session, alarm.tenant_id, "audit.chain_broken", event_payload(alarm))
        done += 1
    return done


def event_payload(alarm: Any) -> dict[str, Any]:
    """The `audit.chain_broken` payload: where the chain broke and who found it (no content)."""
    return {"chainId": alarm.chain_id, "firstBadSeq": alarm.first_bad_seq, "reason": alarm.reason,
            "detectedBy": alarm.detected_by}


def verify_chains(ctx: AppContext) -> int:
    """Fully verify every chain without an open alarm, opening the alarm of each that does not
    verify (the periodic job: a checkpoint only reads rows from its last anchor on, so an edit
    below it shows only here). Returns how many chains were found broken."""
    with ctx.db.sessions() as session:
        chain_ids = alarms_repo.chains_without_alarm(session)
    broken = 0
    for chain_id in chain_ids:
        report = ctx.audit.verify_and_alarm(ctx.db.sessions, chain_id, "verification")
        broken += report.status == "tampered"
    return broken


def clear(ctx: AppContext, tenant_id: str | None, *, actor: dict[str, Any]) -> tuple[bool, VerifyReport | None]:
    """Clear the chain's open alarm if the whole chain verifies now (the repair is done): returns
    (cleared, the verification report); (False, None) when no alarm is open. The clearing is
    recorded in the chain itself, as its first entry after the repair."""
    chain_id = chain_for(tenant_id)
    with ctx.db.sessions() as session:
        alarm = alarms_repo.open_alarm(session, chain_id)
    if alarm is None:
        return False, None
    report = ctx.audit.verify_and_alarm(ctx.db.sessions, chain_id, "clear-alarm")
    if not report.ok:
        return False, report
    with ctx.db.sessions.begin() as session:
        # The chain's lock first, then the alarm row, as a writer that finds a break holds the lock
        # while it records the alarm: the other order could wait on each other forever.
        lock_chain(session, chain_id)
        alarms_repo.clear(session, alarm.id, cleared_by=actor_label(actor))
        # Same transaction: the commit's lock call sees the alarm cleared, so this entry is taken.
        ctx.audit.append(session, tenant_id=tenant_id, event_type="audit.alarm_cleared", actor=actor,
                         subject={"type": "audit_chain", "id": chain_id},
                         data={"first_bad_seq": alarm.first_bad_seq, "reason": alarm.reason,
                               "detected_at": alarm.detected_at.isoformat(), "entries": report.entries})
    log.warning("audit chain %s: alarm cleared after the chain verified again (%s entries)", chain_id,
                report.entries)
    return True, report
