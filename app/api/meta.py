"""`GET /v1/whoami`: what the presented key may do (handy for the quickstart and for agents)."""

from __future__ import annotations

from starlette.requests import Request

from app.api.jsonio import json_response
from app.api.routes import ApiRoute
from app.core.access import Principal


async def whoami(request: Request, principal: Principal):
    return json_response({
        "tenant_id": principal.tenant_id,
        "key_id": principal.key_id,
        "scopes": sorted(principal.scopes),
        "agents": list(principal.agents),
    })


routes = [
    ApiRoute("/v1/whoami", whoami, method="GET", summary="The calling key's tenant, scopes and agents",
             scope=None, responses={200: "whoami.response"}, tag="meta"),
]


CAPABILITIES = ["semantic", "episodic", "procedural", "emotional", "vector", "fts", "hybrid", "recall_tracking",
                "ttl", "snapshots", "redaction", "governance", "audit"]


async def capabilities(request: Request, principal: Principal):
    """memorywire-style capability declaration of this backend."""
    settings = request.app.state.ctx.settings
    return json_response({
        "capabilities": CAPABILITIES,
        "fusion": ["rrf", "max", "weighted"],
        "memory_types": ["semantic", "episodic", "procedural", "emotional"],
        "limits": {"max_entry_size_bytes": settings.max_entry_size_bytes, "max_k": 1000},
    })


routes.append(ApiRoute("/v1/capabilities", capabilities, method="GET", summary="What this backend supports",
                       scope=None, responses={200: "capabilities.response"}, tag="meta"))
