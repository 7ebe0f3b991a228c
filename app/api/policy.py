"""`/v1/policy/suggestions`: policy rules learned from the tenant's decisions, for an admin key to
accept (it becomes a learned rule with its provenance) or dismiss."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.api.jsonio import json_response
from app.api.routing import ApiRoute, ctx_of, parse_query, path_id
from app.core.access import Principal
from app.services import suggestions


def _suggestion_id(request: Request) -> str:
    return path_id(request, "suggestion_id", "sug", "suggestion")


async def list_suggestions(request: Request, principal: Principal):
    query = parse_query(request, "suggestions.query")
    ctx = ctx_of(request)
    items = await run_in_threadpool(suggestions.refresh, ctx, principal.tenant_id, query.get("status", "open"))
    return json_response({"items": items, "min_decisions": ctx.settings.suggest_min_decisions})


async def accept(request: Request, principal: Principal):
    return json_response(await run_in_threadpool(
        suggestions.accept, ctx_of(request), tenant_id=principal.tenant_id, suggestion_id=_suggestion_id(request),
        actor=principal.actor))


async def dismiss(request: Request, principal: Principal):
    return json_response(await run_in_threadpool(
        suggestions.dismiss, ctx_of(request), tenant_id=principal.tenant_id, suggestion_id=_suggestion_id(request),
        actor=principal.actor))


routes = [
    ApiRoute("/v1/policy/suggestions", list_suggestions, method="GET",
             summary="Policy rules suggested from consistent decisions, with their measured effect",
             scope="admin", request="suggestions.query", responses={200: "suggestions.response"}, tag="governance"),
    ApiRoute("/v1/policy/suggestions/{suggestion_id}/accept", accept, method="POST",
             summary="Accept a suggestion: it becomes a learned policy rule (never waiving high-risk screening)",
             scope="admin", responses={200: "suggestion"}, tag="governance"),
    ApiRoute("/v1/policy/suggestions/{suggestion_id}/dismiss", dismiss, method="POST",
             summary="Dismiss a suggestion (it returns only when its evidence grows materially)",
             scope="admin", responses={200: "suggestion"}, tag="governance"),
]
