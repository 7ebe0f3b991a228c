"""Periodic jobs: the audit checkpoint cadence, the full audit verification, the memory state
check and the events of audit chain and integrity alarms, webhook deliveries, review-SLA breach announcements,
reviewer canaries, memory compaction and consolidation, and purging
expired idempotency keys and idle rate-limit buckets.

Every serving process (and every `--workers` worker) starts the same timers, but a round only runs
in the job's leader (`app.services.runtime.leader`): across all processes sharing the database, each job
runs once per cadence. When the leader dies another process takes over at its next round."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import AsyncIterator

from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool

from app.repos.audit import audit_reads
from app.services.audit import audit_alarms, state_check, read_budgets
from app.services.router import backends
from app.services.review import canaries, review_sla
from app.services.runtime import idempotency
from app.services.tenancy import rate_limits
from app.services.events import webhooks
from app.services.runtime.context import AppContext
from app.services.runtime.leader import Leadership

log = logging.getLogger(__name__)
WEBHOOK_POLL_SECONDS = 1.0
IDEMPOTENCY_PURGE_SECONDS = 600.0
REVIEW_SLA_SECONDS = 30.0  # a breach is announced within this much of passing the SLA

def checkpoint_unsigned(ctx: AppContext) -> int:
    """Sign a checkpoint of every chain that grew since its last one, whichever process appended
    to it (the time-based cadence; the count-based one runs inside `append`). Returns how many."""
    with ctx.db.reader() as conn:
        chains = audit_reads.unsigned_chains(conn)
    return ctx.audit.checkpoint_chains(ctx.db.sessions, chains)


def _announce_and_deliver(ctx: AppContext) -> None:
    """Write the `audit.chain_broken` event of each new audit chain alarm and the `state_check.mismatch`
    event of each new integrity alarm, then deliver due webhooks (theirs among them): an alarm
    reaches the event log and webhooks within a round."""
    audit_alarms.announce(ctx)
    state_check.announce(ctx)
    webhooks.deliver_due(ctx)


def _purge_expired(ctx: AppContext) -> None:
    idempotency.purge_expired(ctx)
    rate_limits.purge_idle(ctx)
    read_budgets.purge_ended(ctx)


async def _every(seconds: float, job, name: str, leadership: Leadership) -> None:
    try:
        await _rounds(seconds, job, name, leadership)
    finally:
        await run_in_threadpool(leadership.release)  # step down at once; another process takes over


async def _rounds(seconds: float, job, name: str, leadership: Leadership) -> None:
    while True:
        await asyncio.sleep(seconds)
        try:
            await run_in_threadpool(_if_leader, leadership, job)
        except OperationalError as exc:  # database down or restarting: say so once per round, briefly
            log.warning("background job %s skipped: database unavailable (%s)", name, str(exc).splitlines()[0][:200])
        except Exception:  # a failed round is retried next time; the server keeps serving
            log.exception("background job %s failed", name)


def _if_leader(leadership: Leadership, job) -> None:
    if leadership.is_leader():
        job()


@contextlib.asynccontextmanager
async def start_background_jobs(ctx: AppContext) -> AsyncIterator[None]:
    """Run the jobs for the lifetime of the app (a job's rounds run only while this process leads
    it); on shutdown step down and sign a final checkpoint of the chains this process appended to."""
    jobs = [(max(1, ctx.settings.checkpoint_interval_seconds), lambda: checkpoint_unsigned(ctx), "audit-checkpoints"),
            (WEBHOOK_POLL_SECONDS, lambda: _announce_and_deliver(ctx), "webhook-deliveries"),
            (IDEMPOTENCY_PURGE_SECONDS, lambda: _purge_expired(ctx), "expired-key-purge"),
            (REVIEW_SLA_SECONDS, lambda: review_sla.announce(ctx), "review-sla"),
            (ctx.settings.backend_poll_seconds, lambda: backends.deliver_due(ctx), "backend-deliveries")]
    if ctx.settings.audit_verify_interval_seconds > 0:
        jobs.append((ctx.settings.audit_verify_interval_seconds, lambda: audit_alarms.verify_chains(ctx),
                     "audit-verification"))
    if ctx.settings.state_check_interval_seconds > 0:
        jobs.append((ctx.settings.state_check_interval_seconds, lambda: state_check.check_all(ctx), "state-check"))
    if ctx.settings.canary_poll_seconds > 0:
        jobs.append((ctx.settings.canary_poll_seconds, lambda: canaries.tick(ctx), "reviewer-canaries"))
    if ctx.settings.compaction_interval_seconds > 0:
        from app.services.memory import compaction

        jobs.append((ctx.settings.compaction_interval_seconds, lambda: compaction.run_scheduled(ctx),
                     "memory-compaction"))
    if ctx.settings.consolidation_poll_seconds > 0:
        from app.services.memory import consolidation

        jobs.append((ctx.settings.consolidation_poll_seconds, lambda: consolidation.run_scheduled(ctx),
                     "memory-consolidation"))
    tasks = [asyncio.create_task(_every(seconds, job, name, Leadership(ctx.db.engine, name)))
             for seconds, job, name in jobs]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        with contextlib.suppress(Exception):
            await run_in_threadpool(ctx.audit.checkpoint_touched, ctx.db.sessions)
