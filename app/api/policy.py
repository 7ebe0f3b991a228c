"""`/v1/policy`: the tenant's review policy, read and replaced by an admin key, every change
backtested first (`/v1/policy/backtest` runs the same replay alone); `/v1/policy/suggestions`:
rules learned from the tenant's decisions, to accept (a learned rule with its provenance, also
backtested) or dismiss; `/v1/policy/canaries`: the tenant's reviewer canaries and catch rates."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.api.jsonio import json_response, read_json
from app.api.routes import ApiRoute, ctx_of, parse_query, path_id
from app.core.access import Principal
from app.services.review import canaries, policy_backtest, suggestions
from app.services.tenancy import tenant_config


def _suggestion_id(request: Request) -> str:
    return path_id(request, "suggestion_id", "sug", "suggestion")


async def list_suggestions(request: Request, principal: Principal):
    query = parse_query(request, "suggestions.query")
    ctx = ctx_of(request)
    items = await run_in_threadpool(suggestions.refresh, ctx, principal.tenant_id, query.get("status", "open"))
    return json_response({"items": items, "min_decisions": ctx.settings.suggest_min_decisions})


async def accept(request: Request, principal: Principal):
    body = await read_json(request, "suggestion-accept.request") if await request.body() else {}
    return json_response(await run_in_threadpool(
        suggestions.accept, ctx_of(request), tenant_id=principal.tenant_id, suggestion_id=_suggestion_id(request),
        actor=principal.actor, override_reason=body.get("override_reason")))


async def get_policy(request: Request, principal: Principal):
    policy = await run_in_threadpool(suggestions.policy_of, ctx_of(request), principal.tenant_id)
    return json_response({"policy": policy.to_doc()})


async def put_policy(request: Request, principal: Principal):
    body = await read_json(request, "policy-put.request")
    ctx = ctx_of(request)

    def change():
        report = tenant_config.set_policy(ctx, tenant_id=principal.tenant_id, doc=body["policy"],
                                          actor=principal.actor, override_reason=body.get("override_reason"))
        return {"policy": suggestions.policy_of(ctx, principal.tenant_id).to_doc(), "backtest": report}

    return json_response(await run_in_threadpool(change))


async def backtest(request: Request, principal: Principal):
    body = await read_json(request, "policy-backtest.request")
    ctx = ctx_of(request)

    def run():
        if "suggestion_id" in body:
            candidate = suggestions.candidate(ctx, tenant_id=principal.tenant_id, suggestion_id=body["suggestion_id"],
                                              actor=principal.actor)
        else:
            candidate = tenant_config.parse_policy(body["policy"])
        return policy_backtest.backtest(ctx, principal.tenant_id, candidate)

    return json_response(await run_in_threadpool(run))


def _canaries(ctx, tenant_id: str) -> dict:
    return {"config": canaries.get_config(ctx, tenant_id), "reviewers": canaries.catch_rates(ctx, tenant_id)}


async def get_canaries(request: Request, principal: Principal):
    return json_response(await run_in_threadpool(_canaries, ctx_of(request), principal.tenant_id))


async def put_canaries(request: Request, principal: Principal):
    body = await read_json(request, "canaries.request")
    ctx = ctx_of(request)

    def change():
        canaries.set_config(ctx, tenant_id=principal.tenant_id, doc=body, actor=principal.actor)
        return _canaries(ctx, principal.tenant_id)

    return json_response(await run_in_threadpool(change))


async def dismiss(request: Request, principal: Principal):
    return json_response(await run_in_threadpool(
        suggestions.dismiss, ctx_of(request), tenant_id=principal.tenant_id, suggestion_id=_suggestion_id(request),
        actor=principal.actor))


routes = [
    ApiRoute("/v1/policy", get_policy, method="GET", summary="The tenant's review policy as it is evaluated now",
             scope="admin", responses={200: "policy.response"}, tag="governance"),
    ApiRoute("/v1/policy", put_policy, method="PUT",
             summary="Replace the review policy; backtested first (409 backtest_failed unless override_reason)",
             scope="admin", request="policy-put.request", responses={200: "policy.response"}, tag="governance"),
    ApiRoute("/v1/policy/backtest", backtest, method="POST",
             summary="What a candidate policy or an open suggestion would have admitted with no one deciding: "
                     "the tenant's decided writes and the shipped known attacks replayed (changes nothing)",
             scope="admin", request="policy-backtest.request", responses={200: "backtest"}, tag="governance"),
    ApiRoute("/v1/policy/canaries", get_canaries, method="GET",
             summary="The tenant's reviewer canaries: settings and each reviewer's canaries caught and missed",
             scope="admin", responses={200: "canaries.response"}, tag="governance"),
    ApiRoute("/v1/policy/canaries", put_canaries, method="PUT",
             summary="Turn reviewer canaries on or off and tune them (synthetic poisoned writes in the queue)",
             scope="admin", request="canaries.request", responses={200: "canaries.response"}, tag="governance"),
    ApiRoute("/v1/policy/suggestions", list_suggestions, method="GET",
             summary="Policy rules suggested from consistent decisions, with their measured effect",
             scope="admin", request="suggestions.query", responses={200: "suggestions.response"}, tag="governance"),
    ApiRoute("/v1/policy/suggestions/{suggestion_id}/accept", accept, method="POST",
             summary="Accept a suggestion: it becomes a learned policy rule (never waiving high-risk screening); "
                     "backtested first (409 backtest_failed unless override_reason)",
             scope="admin", request="suggestion-accept.request", responses={200: "suggestion"}, tag="governance"),
    ApiRoute("/v1/policy/suggestions/{suggestion_id}/dismiss", dismiss, method="POST",
             summary="Dismiss a suggestion (it returns only when its evidence grows materially)",
             scope="admin", responses={200: "suggestion"}, tag="governance"),
]
