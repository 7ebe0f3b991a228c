"""SQL for the scrape-time gauges of `/metrics`: each tenant's review queue (with the changes past
its review SLA, `settings["review_sla_seconds"]`) and audit chain lag.

One statement per scrape, a handful of index lookups per tenant (`changes_queue`, the primary keys
of `audit_entries` and `audit_checkpoints`), so a scrape costs the same however large the data."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.engine import Connection

from app.repos.review.changes import SLA_SECONDS_SQL

_STATE = text(f"""
    SELECT t.id AS tenant_id, t.name AS tenant_name,
           q.pending, q.oldest_submitted_at, q.overdue,
           COALESCE(h.head_seq, 0) AS head_seq,
           COALESCE(cp.size, 0) AS signed_size, cp.created_at AS signed_at,
           (SELECT e.ts FROM audit_entries e
             WHERE e.chain_id = 'tenant:' || t.id AND e.seq = COALESCE(cp.size, 0) + 1) AS oldest_unsigned_at
    FROM tenants t
    LEFT JOIN LATERAL (SELECT count(*) AS pending, min(c.submitted_at) AS oldest_submitted_at,
                              count(*) FILTER (WHERE c.submitted_at < now() - make_interval(
                                  secs => {SLA_SECONDS_SQL})) AS overdue
                       FROM changes c WHERE c.tenant_id = t.id AND c.status = 'pending') q ON true
    LEFT JOIN LATERAL (SELECT max(e.seq) AS head_seq FROM audit_entries e
                       WHERE e.chain_id = 'tenant:' || t.id) h ON true
    LEFT JOIN LATERAL (SELECT k.size, k.created_at FROM audit_checkpoints k
                       WHERE k.chain_id = 'tenant:' || t.id ORDER BY k.size DESC LIMIT 1) cp ON true
    ORDER BY t.id""")


@dataclass(frozen=True)
class TenantState:
    """One tenant's review queue and audit chain, as `/metrics` reports them."""

    tenant_id: str
    tenant_name: str
    pending: int
    oldest_submitted_at: datetime | None
    overdue: int
    """Pending changes older than the tenant's review SLA (0 without one: the FILTER is NULL)."""
    head_seq: int
    signed_size: int
    signed_at: datetime | None
    oldest_unsigned_at: datetime | None


def tenant_states(conn: Connection) -> list[TenantState]:
    """Every tenant's pending changes (count, oldest) and audit head against its last checkpoint."""
    return [TenantState(**row._mapping) for row in conn.execute(_STATE)]


_BACKLOG = text("""
    SELECT b.tenant_id, b.name AS backend,
           count(d.id) FILTER (WHERE d.status = 'pending') AS pending,
           count(d.id) FILTER (WHERE d.status = 'failed') AS failed,
           min(d.created_at) FILTER (WHERE d.status = 'pending') AS oldest_pending_at
    FROM memory_backends b LEFT JOIN backend_deliveries d ON d.backend_id = b.id AND d.status <> 'delivered'
    GROUP BY b.tenant_id, b.name""")


@dataclass(frozen=True)
class BackendBacklog:
    tenant_id: str
    backend: str
    pending: int
    failed: int
    oldest_pending_at: datetime | None


def backend_backlogs(conn: Connection) -> list[BackendBacklog]:
    """Each memory backend's owed and given-up deliveries (the router's outbox), for the gauges."""
    return [BackendBacklog(**row._mapping) for row in conn.execute(_BACKLOG)]
