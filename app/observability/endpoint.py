"""`GET /metrics`: the Prometheus exposition, for a scraper holding `MEMWARDEN_METRICS_TOKEN`.

Disabled (404, as if absent) unless the token is set: metrics say how busy each tenant's review
queue is, which is not for anyone who can reach the port. With it, the request needs
`Authorization: Bearer <token>` (401 otherwise).

The counters and histograms come from this process, or from every worker's files under
`memwarden serve --workers N`. The review-queue and audit gauges are read from the database at
scrape time (one statement, `app.repos.runtime.ops_state`), so every worker answers the same.
"""

from __future__ import annotations

import hmac
import logging
from datetime import datetime, timezone
from typing import Iterator

from prometheus_client import REGISTRY, CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.errors import NotFound, Unauthorized
from app.observability import metrics
from app.repos.review import canaries as canaries_repo
from app.repos.runtime import ops_state

log = logging.getLogger(__name__)
PATH = "/metrics"


class DatabaseStateCollector:
    """Gauges computed when scraped: pending changes, the oldest one's age and those past the review
    SLA per tenant, each tenant's audit chain against its last checkpoint and its last witnessed
    checkpoint, each memory backend's outbox (owed, given up, oldest owed), and each reviewer's
    canaries caught and missed (`app.services.review.canaries`)."""

    def __init__(self, ctx):
        self.ctx = ctx

    @staticmethod
    def families() -> dict[str, GaugeMetricFamily]:
        """The (empty) families this collector reports, by short name."""
        return {
            "info": GaugeMetricFamily("memwarden_tenant_info", "Tenant id to name (always 1).",
                                      labels=["tenant", "tenant_name"]),
            "pending": GaugeMetricFamily("memwarden_review_pending_changes", "Changes waiting for review.",
                                         labels=["tenant"]),
            "oldest": GaugeMetricFamily("memwarden_review_oldest_pending_age_seconds",
                                        "Age of the oldest change waiting for review (0 when none).",
                                        labels=["tenant"]),
            "overdue": GaugeMetricFamily("memwarden_review_sla_overdue_changes",
                                         "Changes waiting longer than the tenant's review SLA (0 without one).",
                                         labels=["tenant"]),
            "unsigned": GaugeMetricFamily("memwarden_audit_unsigned_entries",
                                          "Audit entries not yet covered by a signed checkpoint.", labels=["tenant"]),
            "unsigned_age": GaugeMetricFamily("memwarden_audit_checkpoint_lag_seconds",
                                              "Age of the oldest audit entry no checkpoint covers yet (0 when none).",
                                              labels=["tenant"]),
            "outbox": GaugeMetricFamily("memwarden_backend_deliveries_pending",
                                        "Deliveries owed to a memory backend (the router's outbox).",
                                        labels=["tenant", "backend"]),
            "outbox_failed": GaugeMetricFamily("memwarden_backend_deliveries_failed",
                                               "Deliveries to a memory backend that gave up (retry them).",
                                               labels=["tenant", "backend"]),
            "outbox_age": GaugeMetricFamily("memwarden_backend_delivery_lag_seconds",
                                            "Age of the oldest delivery still owed to a backend (0 when none).",
                                            labels=["tenant", "backend"]),
            "canary_caught": GaugeMetricFamily("memwarden_reviewer_canaries_caught",
                                               "Reviewer canaries (synthetic poisoned writes) a reviewer rejected.",
                                               labels=["tenant", "reviewer"]),
            "canary_missed": GaugeMetricFamily("memwarden_reviewer_canaries_missed",
                                               "Reviewer canaries a reviewer approved (nothing of them became memory).",
                                               labels=["tenant", "reviewer"]),
            "canary_rate": GaugeMetricFamily("memwarden_reviewer_canary_catch_rate",
                                             "A reviewer's canaries caught over canaries decided.",
                                             labels=["tenant", "reviewer"]),
            "witness": GaugeMetricFamily(
                "memwarden_audit_witness_lag_entries",
                "Entries signed but not yet in the witness file (only with MEMWARDEN_AUDIT_WITNESS_FILE).",
                labels=["tenant"]),
        }

    def describe(self) -> list[GaugeMetricFamily]:
        return list(self.families().values())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = datetime.now(timezone.utc)
        f = self.families()
        with self.ctx.db.reader() as conn:
            states = ops_state.tenant_states(conn)
            backlogs = ops_state.backend_backlogs(conn)
            tallies = canaries_repo.tallies(conn)
        audit = self.ctx.audit
        for s in states:
            f["info"].add_metric([s.tenant_id, s.tenant_name], 1)
            f["pending"].add_metric([s.tenant_id], s.pending)
            f["oldest"].add_metric([s.tenant_id], _age(now, s.oldest_submitted_at))
            f["overdue"].add_metric([s.tenant_id], s.overdue)
            f["unsigned"].add_metric([s.tenant_id], max(0, s.head_seq - s.signed_size))
            f["unsigned_age"].add_metric([s.tenant_id], _age(now, s.oldest_unsigned_at))
            if audit.witness.file is not None:
                record = audit.witness.latest(audit.checkpoint_origin(f"tenant:{s.tenant_id}"), audit.vkey)
                witnessed = record.checkpoint.size if record is not None else 0
                f["witness"].add_metric([s.tenant_id], max(0, s.signed_size - witnessed))
        for b in backlogs:
            f["outbox"].add_metric([b.tenant_id, b.backend], b.pending)
            f["outbox_failed"].add_metric([b.tenant_id, b.backend], b.failed)
            f["outbox_age"].add_metric([b.tenant_id, b.backend], _age(now, b.oldest_pending_at))
        for t in tallies:
            f["canary_caught"].add_metric([t.tenant_id, t.reviewer], t.caught)
            f["canary_missed"].add_metric([t.tenant_id, t.reviewer], t.missed)
            f["canary_rate"].add_metric([t.tenant_id, t.reviewer], t.catch_rate)
        if audit.witness.file is None:
            del f["witness"]
        yield from f.values()


def _age(now: datetime, then: datetime | None) -> float:
    if then is None:
        return 0.0
    if then.tzinfo is None:
        then = then.replace(tzinfo=timezone.utc)
    return max(0.0, (now - then).total_seconds())


class _ProcessMetrics:
    """This process's own metrics (single-process serving), handed on to a scrape registry."""

    def collect(self):
        return REGISTRY.collect()


def scrape_registry(ctx) -> CollectorRegistry:
    """A registry holding everything one scrape reports (built per scrape: the workers' files change)."""
    registry = CollectorRegistry(auto_describe=False)
    if metrics.is_multiprocess():
        metrics.forget_dead_workers()
        MultiProcessCollector(registry)
    else:
        registry.register(_ProcessMetrics())
    registry.register(DatabaseStateCollector(ctx))
    return registry


def exposition(ctx) -> bytes:
    """The scrape's text (the database gauges need a thread: the caller runs this in the pool)."""
    return generate_latest(scrape_registry(ctx))


def authorised(request: Request, token: str) -> bool:
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


async def metrics_endpoint(request: Request) -> Response:
    token = request.app.state.settings.metrics_token
    if not token:
        raise NotFound("no such resource")
    if not authorised(request, token):
        raise Unauthorized("metrics need the scrape token (Authorization: Bearer <MEMWARDEN_METRICS_TOKEN>)",
                           headers={"www-authenticate": 'Bearer realm="memwarden-metrics"'})
    body = await run_in_threadpool(exposition, request.app.state.ctx)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


routes = [Route(PATH, metrics_endpoint, methods=["GET"], name="metrics")]
