"""Periodic jobs of a serving process: the audit checkpoint cadence, webhook deliveries, memory
compaction, and purging expired idempotency keys."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import AsyncIterator

from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool

from app.services import idempotency, webhooks
from app.services.context import AppContext

log = logging.getLogger(__name__)
WEBHOOK_POLL_SECONDS = 1.0
IDEMPOTENCY_PURGE_SECONDS = 600.0


async def _every(seconds: float, job, name: str) -> None:
    while True:
        await asyncio.sleep(seconds)
        try:
            await run_in_threadpool(job)
        except OperationalError as exc:  # database down or restarting: say so once per round, briefly
            log.warning("background job %s skipped: database unavailable (%s)", name, str(exc).splitlines()[0][:200])
        except Exception:  # a failed round is retried next time; the server keeps serving
            log.exception("background job %s failed", name)


@contextlib.asynccontextmanager
async def start_background_jobs(ctx: AppContext) -> AsyncIterator[None]:
    """Run the jobs for the lifetime of the app; on shutdown sign a final checkpoint."""
    interval = max(1, ctx.settings.checkpoint_interval_seconds)
    tasks = [asyncio.create_task(_every(interval, lambda: ctx.audit.checkpoint_touched(ctx.db.sessions),
                                        "audit-checkpoints")),
             asyncio.create_task(_every(WEBHOOK_POLL_SECONDS, lambda: webhooks.deliver_due(ctx), "webhook-deliveries")),
             asyncio.create_task(_every(IDEMPOTENCY_PURGE_SECONDS, lambda: idempotency.purge_expired(ctx),
                                        "idempotency-key-purge"))]
    if ctx.settings.compaction_interval_seconds > 0:
        from app.services import compaction

        tasks.append(asyncio.create_task(_every(ctx.settings.compaction_interval_seconds,
                                                lambda: compaction.run_scheduled(ctx), "memory-compaction")))
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
