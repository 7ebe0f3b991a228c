"""SQL for webhooks (`webhooks`) and their delivery outbox (`webhook_deliveries`). Reads and writes
for a caller are scoped by tenant; the delivery worker claims due rows across tenants (a job over
all of them) and reads back exactly the webhooks and events those rows name."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.db.models import Event, Webhook, WebhookDelivery


def insert(session: Session, webhook: Webhook) -> None:
    session.add(webhook)
    session.flush()


def get(session: Session, *, tenant_id: str, webhook_id: str) -> Webhook | None:
    return session.scalars(select(Webhook).where(Webhook.id == webhook_id, Webhook.tenant_id == tenant_id)).first()


def list_for_tenant(session: Session, *, tenant_id: str) -> list[Webhook]:
    return list(session.scalars(select(Webhook).where(Webhook.tenant_id == tenant_id)
                                .order_by(Webhook.created_at, Webhook.id)))


def delete(session: Session, webhook: Webhook) -> None:
    """Remove a webhook (its deliveries go with it: ON DELETE CASCADE)."""
    session.delete(webhook)


def deliveries(session: Session, *, tenant_id: str, webhook_id: str, limit: int) -> list:
    """(WebhookDelivery, event type) of the webhook's deliveries, newest event first."""
    return session.execute(
        select(WebhookDelivery, Event.type).join(Event, (Event.tenant_id == WebhookDelivery.tenant_id)
                                                 & (Event.id == WebhookDelivery.event_id))
        .where(WebhookDelivery.webhook_id == webhook_id, WebhookDelivery.tenant_id == tenant_id)
        .order_by(WebhookDelivery.event_id.desc()).limit(limit)).all()


def active_for_tenant(session: Session, *, tenant_id: str) -> list:
    """(id, event_types, agents) of the tenant's active webhooks."""
    return session.execute(select(Webhook.id, Webhook.event_types, Webhook.agents).where(
        Webhook.tenant_id == tenant_id, Webhook.active.is_(True))).all()


def owe(session: Session, *, tenant_id: str, webhook_id: str, event_id: int, at: datetime) -> None:
    """Queue the event for delivery to the webhook, due at `at`."""
    session.add(WebhookDelivery(webhook_id=webhook_id, tenant_id=tenant_id, event_id=event_id, next_attempt_at=at))


def claim_due(session: Session, *, now: datetime, lease_until: datetime, limit: int) -> list:
    """Lease up to `limit` pending deliveries due at `now` (oldest due first, skipping rows another
    worker holds) until `lease_until`; returns (id, webhook_id, tenant_id, event_id, attempt) of each."""
    due = select(WebhookDelivery.id).where(
        WebhookDelivery.status == "pending", WebhookDelivery.next_attempt_at <= now,
    ).order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.id).limit(limit).with_for_update(skip_locked=True)
    return session.execute(
        update(WebhookDelivery).where(WebhookDelivery.id.in_(due.scalar_subquery()))
        .values(next_attempt_at=lease_until)
        .returning(WebhookDelivery.id, WebhookDelivery.webhook_id, WebhookDelivery.tenant_id,
                   WebhookDelivery.event_id, WebhookDelivery.attempt)).all()


def by_ids(session: Session, *, webhook_ids: set[str]) -> dict[str, Webhook]:
    """The webhooks claimed deliveries name, by id (ids are unique across tenants)."""
    return {w.id: w for w in session.scalars(select(Webhook).where(Webhook.id.in_(webhook_ids)))}


def events_by_key(session: Session, *, tenant_ids: Sequence[str], event_ids: Sequence[int]) -> dict:
    """The events claimed deliveries name, by (tenant_id, id)."""
    return {(e.tenant_id, e.id): e for e in session.scalars(select(Event).where(
        Event.tenant_id.in_(set(tenant_ids)), Event.id.in_(set(event_ids))))}


def record_attempt(session: Session, *, delivery_id: int, values: dict[str, Any]) -> None:
    session.execute(update(WebhookDelivery).where(WebhookDelivery.id == delivery_id).values(**values))
