"""`/v1/webhooks`: signed HTTP delivery of the tenant's events (see `app.services.events.webhooks`).

Managed with the `events:read` scope: a webhook receives exactly what that key could stream from
`GET /v1/events` (its tenant, its agents), so no wider permission is needed to set one up.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.api.jsonio import json_response, read_json
from app.api.routes import ApiRoute, ctx_of, parse_query
from app.core.access import Principal
from app.services.events import webhooks


async def webhook_create(request: Request, principal: Principal):
    body = await read_json(request, "webhook.request")
    return json_response(await run_in_threadpool(webhooks.create_webhook, ctx_of(request), principal, body), 201)


async def webhook_list(request: Request, principal: Principal):
    return json_response(await run_in_threadpool(webhooks.list_webhooks, ctx_of(request), principal))


async def webhook_delete(request: Request, principal: Principal):
    return json_response(await run_in_threadpool(webhooks.delete_webhook, ctx_of(request), principal,
                                                 request.path_params["webhook_id"]))


async def webhook_deliveries(request: Request, principal: Principal):
    query = parse_query(request, "webhook-deliveries.query")
    return json_response(await run_in_threadpool(webhooks.list_deliveries, ctx_of(request), principal,
                                                 request.path_params["webhook_id"], query.get("limit", 100)))


routes = [
    ApiRoute("/v1/webhooks", webhook_create, method="POST", tag="events", scope="events:read",
             request="webhook.request", summary="Register a webhook; the signing secret is shown only here",
             responses={201: "webhook.response"}),
    ApiRoute("/v1/webhooks", webhook_list, method="GET", tag="events", scope="events:read",
             summary="The tenant's webhooks (never their secrets)", responses={200: "webhooks.response"}),
    ApiRoute("/v1/webhooks/{webhook_id}", webhook_delete, method="DELETE", tag="events", scope="events:read",
             summary="Delete a webhook and its delivery log", responses={200: "webhook-delete.response"}),
    ApiRoute("/v1/webhooks/{webhook_id}/deliveries", webhook_deliveries, method="GET", tag="events",
             scope="events:read", request="webhook-deliveries.query",
             summary="A webhook's delivery log, newest event first", responses={200: "webhook-deliveries.response"}),
]
