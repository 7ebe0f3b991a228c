"""`POST /v1/consolidate`: one consolidation pass over the key's tenant now (scope `admin`;
app/services/memory/consolidation.py). The answer holds ids, counts and scores, never memory content."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.api.jsonio import json_response, read_json
from app.api.routes import ApiRoute, ctx_of
from app.core.access import Principal
from app.errors import Forbidden
from app.services.memory import consolidation
from app.services.memory.memories import require_agent


async def consolidate(request: Request, principal: Principal):
    body = await read_json(request, "consolidate.request")
    agent_id = body.get("agent_id")
    if agent_id is not None:
        require_agent(principal, agent_id)
    elif "*" not in principal.agents:  # a pass over every agent only for a key that may act for all
        raise Forbidden("this key may act for some agents only; name one in `agent_id`",
                        details=[{"path": "/agent_id", "message": "required for a key with an agent allow-list"}])
    result = await run_in_threadpool(consolidation.consolidate_tenant, ctx_of(request), principal.tenant_id,
                                     agent_id=agent_id, trigger="api", actor=principal.actor,
                                     dry_run=bool(body.get("dry_run")))
    return json_response(result)


routes = [
    ApiRoute("/v1/consolidate", consolidate, method="POST",
             summary="Consolidate short-term memory now: promote repeated episodic facts to semantic memories "
                     "and evict cold items, through screening and the tenant policy (`dry_run`: report only)",
             scope="admin", request="consolidate.request", responses={200: "consolidate.response"}, tag="governance"),
]
