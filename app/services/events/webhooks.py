"""Webhooks: signed HTTP delivery of a tenant's events, retried with exponential backoff.

Deliveries are an outbox: `events.emit` adds one row per matching webhook in the event's own
transaction, so only committed events are delivered, each at least once (receivers dedupe on the
event id). `deliver_due` — a background job of every serving process — claims due rows with a
lease (`FOR UPDATE SKIP LOCKED`, committed at once, so processes never share a row and a crash
only delays a delivery), POSTs outside any transaction, then records the outcome.

Body: the event envelope `{"id","type","createdAt","data"}` (schema `event`), or, for a webhook
created with `"format": "slack"`, a Slack incoming-webhook message `{"text": ...}`; either is signed
`X-Memwarden-Signature: sha256=<hex HMAC-SHA256(secret, raw body)>`. The secret is shown once at
creation and stored AES-GCM-encrypted under a key derived from the server secret key (rotating
that key orphans existing webhook secrets: recreate the webhooks).

SSRF (`app.services.runtime.outbound`): creation checks the URL's syntax only (no DNS look-up on the
request path); each delivery resolves the host, refuses non-public addresses unless
MEMWARDEN_WEBHOOK_ALLOW_PRIVATE is set, and connects to the very address it checked (Host header
and TLS name stay the URL's). Redirects are not followed. The delivery log records a failure as a
fixed word (`http_500`, `timeout`, `connect_failed`, `refused_address`), never the receiver's answer.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from datetime import datetime, timedelta
from typing import Any

import logging

import httpx
from sqlalchemy.orm import Session

from app.core.access import Principal, agent_allowed
from app.core.ids import has_prefix, new_id
from app.core.slack import slack_text
from app.core.timefmt import format_ts, utcnow
from app.db.models import Event, Webhook
from app.db.transaction_work import work_of
from app.errors import NotFound, ValidationFailed
from app.repos.events import webhooks as repo
from app.services.runtime.context import AppContext
from app.services.runtime.outbound import (OutboundRule, failure_reason, outbound_client, shown_reason, status_reason,
                                   url_refusal)
from app.services.tenancy.sealed import seal, unseal

BACKOFF_BASE_SECONDS = 5
BACKOFF_MAX_SECONDS = 3600
MAX_ATTEMPTS = 8
LEASE_SECONDS = 120
TIMEOUT_SECONDS = 10
BATCH = 50
SIGNATURE_HEADER = "X-Memwarden-Signature"
log = logging.getLogger(__name__)


def sign(secret: str, body: bytes) -> str:
    """The signature header value receivers recompute: `sha256=<hex>`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def backoff_seconds(attempts_made: int) -> int:
    """Delay before the next attempt: 5 s, 20 s, 80 s, … capped at an hour."""
    return min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 4 ** (attempts_made - 1))


_SEALED = b"memwarden/webhook-secrets"


def webhook_json(webhook: Webhook) -> dict[str, Any]:
    return {"id": webhook.id, "url": webhook.url, "events": list(webhook.event_types),
            "agents": list(webhook.agents), "active": webhook.active, "format": webhook.format or "json",
            "createdAt": format_ts(webhook.created_at)}


# --- management (API) ----------------------------------------------------------------------------

def create_webhook(ctx: AppContext, principal: Principal, body: dict[str, Any]) -> dict[str, Any]:
    """Register an endpoint; the response is the only place the signing secret ever appears.
    It receives events about the agents the creating key may act for."""
    host, refusal = url_refusal(body["url"], OutboundRule.for_webhooks(ctx.settings))
    if refusal:
        raise ValidationFailed.at("/url", refusal)
    secret = "whsec_" + secrets.token_urlsafe(32)
    webhook_id = new_id("whk")
    webhook = Webhook(id=webhook_id, tenant_id=principal.tenant_id, url=body["url"],
                      secret_enc=seal(ctx, _SEALED, webhook_id, secret), event_types=list(body.get("events", [])),
                      agents=list(principal.agents), active=True, created_at=utcnow(), created_by=principal.key_id,
                      format=body.get("format", "json"))
    with ctx.db.sessions.begin() as session:
        repo.insert(session, webhook)
        # The audit log gets the host only: paths and queries may carry receiver tokens.
        ctx.audit.append(session, tenant_id=principal.tenant_id, event_type="webhook.created", actor=principal.actor,
                         subject={"type": "webhook", "id": webhook_id},
                         data={"host": host, "events": webhook.event_types, "format": webhook.format})
    return {**webhook_json(webhook), "secret": secret}


def _load(session: Session, principal: Principal, webhook_id: str) -> Webhook:
    if not has_prefix(webhook_id, "whk"):
        raise NotFound("webhook not found")
    webhook = repo.get(session, tenant_id=principal.tenant_id, webhook_id=webhook_id)
    if webhook is None:
        raise NotFound("webhook not found")
    return webhook


def list_webhooks(ctx: AppContext, principal: Principal) -> dict[str, Any]:
    with ctx.db.sessions() as session:
        rows = repo.list_for_tenant(session, tenant_id=principal.tenant_id)
        return {"items": [webhook_json(w) for w in rows]}


def delete_webhook(ctx: AppContext, principal: Principal, webhook_id: str) -> dict[str, Any]:
    """Remove a webhook and its delivery log; pending deliveries are dropped."""
    with ctx.db.sessions.begin() as session:
        webhook = _load(session, principal, webhook_id)
        repo.delete(session, webhook)
        ctx.audit.append(session, tenant_id=principal.tenant_id, event_type="webhook.deleted", actor=principal.actor,
                         subject={"type": "webhook", "id": webhook_id}, data={})
    return {"deleted": True, "id": webhook_id}


def list_deliveries(ctx: AppContext, principal: Principal, webhook_id: str, limit: int = 100) -> dict[str, Any]:
    """The delivery log of one webhook, newest event first."""
    with ctx.db.sessions() as session:
        _load(session, principal, webhook_id)
        rows = repo.deliveries(session, tenant_id=principal.tenant_id, webhook_id=webhook_id, limit=limit)
    return {"items": [{
        "eventId": d.event_id, "eventType": event_type, "status": d.status, "attempts": d.attempt,
        "statusCode": d.status_code, "error": shown_reason(d.error), "nextAttemptAt": format_ts(d.next_attempt_at),
        "lastAttemptAt": format_ts(d.last_attempt_at), "deliveredAt": format_ts(d.delivered_at),
    } for d, event_type in rows]}


# --- outbox and delivery -------------------------------------------------------------------------

def enqueue(session: Session, tenant_id: str, event_id: int, type: str, payload: dict[str, Any]) -> None:
    """Owe the event to every active webhook that wants it (called by `events.emit`)."""
    cached = work_of(session).webhooks  # one look-up per transaction and tenant
    hooks = cached.get(tenant_id)
    if hooks is None:
        hooks = cached[tenant_id] = repo.active_for_tenant(session, tenant_id=tenant_id)
    agent = payload.get("agentId")
    now = utcnow()
    for hook in hooks:
        if hook.event_types and type not in hook.event_types:
            continue
        if agent is not None and not agent_allowed(agent, hook.agents):
            continue
        repo.owe(session, tenant_id=tenant_id, webhook_id=hook.id, event_id=event_id, at=now)


def event_body(event: Event, format: str = "json", public_url: str | None = None) -> bytes:
    """The exact bytes POSTed (and signed) for an event: the envelope, or for a `slack` webhook a
    Slack incoming-webhook message `{"text": ...}` built from the payload's ids and ages."""
    if format == "slack":
        return json.dumps({"text": slack_text(event.type, event.payload, public_url)},
                          separators=(",", ":"), ensure_ascii=False).encode()
    return json.dumps({"id": event.id, "type": event.type, "createdAt": format_ts(event.created_at),
                       "data": event.payload}, separators=(",", ":"), ensure_ascii=False).encode()


def deliver_due(ctx: AppContext, *, now: datetime | None = None, transport: httpx.BaseTransport | None = None) -> int:
    """Attempt every delivery due at `now` (default: the current time); returns how many were tried.
    `transport` stands in for the network (tests); the outbound rule applies in front of it.

    A webhook's deliveries go in event order; after its first failure in a round, the rest of
    its claimed rows are put back untried (one dead endpoint cannot stall the others for long).
    """
    now = now or utcnow()
    with ctx.db.sessions.begin() as session:
        claimed = repo.claim_due(session, now=now, lease_until=now + timedelta(seconds=LEASE_SECONDS), limit=BATCH)
        if not claimed:
            return 0
        hooks = repo.by_ids(session, webhook_ids={c.webhook_id for c in claimed})
        events = repo.events_by_key(session, tenant_ids=[c.tenant_id for c in claimed],
                                    event_ids=[c.event_id for c in claimed])
    client = outbound_client(OutboundRule.for_webhooks(ctx.settings), timeout=TIMEOUT_SECONDS, inner=transport)
    failed_hooks: dict[str, datetime] = {}
    tried = 0
    try:
        for row in sorted(claimed, key=lambda c: (c.webhook_id, c.event_id)):
            if row.webhook_id in failed_hooks:
                _record(ctx, row.id, next_attempt_at=failed_hooks[row.webhook_id])
                continue
            hook, event = hooks[row.webhook_id], events[(row.tenant_id, row.event_id)]
            code, error = _post(ctx, client, hook, event)
            tried += 1
            attempts = row.attempt + 1
            attempted = utcnow()
            if error is None:
                _record(ctx, row.id, status="delivered", attempt=attempts, status_code=code, error=None,
                        last_attempt_at=attempted, delivered_at=attempted, next_attempt_at=None)
            elif attempts >= MAX_ATTEMPTS or not hook.active:
                _record(ctx, row.id, status="failed", attempt=attempts, status_code=code, error=error,
                        last_attempt_at=attempted, next_attempt_at=None)
            else:
                retry_at = attempted + timedelta(seconds=backoff_seconds(attempts))
                failed_hooks[row.webhook_id] = retry_at
                _record(ctx, row.id, attempt=attempts, status_code=code, error=error, last_attempt_at=attempted,
                        next_attempt_at=retry_at)
    finally:
        client.close()
    return tried


def _post(ctx: AppContext, client: httpx.Client, hook: Webhook, event: Event) -> tuple[int | None, str | None]:
    """POST one event; (status code, None) on 2xx, else (status code or None, the failure's fixed word).
    The client's transport resolves and checks the host at each delivery, never at creation: DNS
    may change at any time."""
    if not hook.active:
        return None, "webhook_inactive"
    body = event_body(event, hook.format, ctx.settings.public_url)
    headers = {"Content-Type": "application/json", "User-Agent": "Memwarden-Webhooks/1",
               SIGNATURE_HEADER: sign(unseal(ctx, _SEALED, hook.id, hook.secret_enc), body),
               "X-Memwarden-Event": event.type, "X-Memwarden-Event-Id": str(event.id)}
    try:
        response = client.post(hook.url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        # The detail (which may name the address refused, or how the connection failed) is the
        # operator's; the tenant's delivery log gets the fixed word.
        log.info("webhook %s: delivery of event %s failed: %s: %s", hook.id, event.id, type(exc).__name__, exc)
        return None, failure_reason(exc)
    if 200 <= response.status_code < 300:
        return response.status_code, None
    return response.status_code, status_reason(response.status_code)


def _record(ctx: AppContext, delivery_id: int, **values: Any) -> None:
    with ctx.db.sessions.begin() as session:
        repo.record_attempt(session, delivery_id=delivery_id, values=values)
