"""`/v1/host/workspace/files`: the tenant's workspace files (OpenWOP RFC 0059; contract §7).

PUT takes JSON `{content, contentType?, runId?}`. Writes honour `If-Match` (`"v<version>"`) and may
name the writing agent in `X-Agent-Id` (checked against the key's allow-list; default: the key id);
policies match that agent and the path. Reads take `?version=N`, or `?snapshot=<RFC 3339>` /
`?run_id=` for the workspace as it was at that instant (a run's start).
"""

from __future__ import annotations

import re
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.api.jsonio import json_response, read_json
from app.api.routes import ApiRoute, ctx_of, parse_query
from app.core.access import Principal
from app.errors import ValidationFailed
from app.services.memory import workspace
from app.services.memory.memories import require_agent

AGENT_HEADER = "x-agent-id"
AGENT_ID = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")


def _agent(request: Request, principal: Principal) -> str:
    agent_id = request.headers.get(AGENT_HEADER)
    if agent_id is None:
        return principal.key_id
    if not AGENT_ID.match(agent_id):
        raise ValidationFailed.at("/X-Agent-Id", "not a valid agent id")
    require_agent(principal, agent_id)
    return agent_id


def _with_etag(body: dict[str, Any], status: int = 200):
    return json_response(body, status, headers={"ETag": body["etag"]} if "etag" in body else None)


async def list_files(request: Request, principal: Principal):
    query = parse_query(request, "workspace-list.query")
    return json_response(await run_in_threadpool(workspace.list_files, ctx_of(request), principal, query))


async def get_file(request: Request, principal: Principal):
    query = parse_query(request, "workspace-get.query")
    return _with_etag(await run_in_threadpool(workspace.get_file, ctx_of(request), principal,
                                              request.path_params["path"], query))


async def put_file(request: Request, principal: Principal):
    body = await read_json(request, "workspace-put.request")
    outcome = await run_in_threadpool(workspace.put_file, ctx_of(request), principal, request.path_params["path"],
                                      body, if_match=request.headers.get("if-match"),
                                      agent_id=_agent(request, principal))
    return _with_etag(outcome.body, outcome.status)


async def delete_file(request: Request, principal: Principal):
    outcome = await run_in_threadpool(workspace.delete_file, ctx_of(request), principal, request.path_params["path"],
                                      if_match=request.headers.get("if-match"), agent_id=_agent(request, principal))
    return json_response(outcome.body, outcome.status)


FILE = "/v1/host/workspace/files/{path:path}"
routes = [
    ApiRoute("/v1/host/workspace/files", list_files, method="GET", summary="List workspace files (metadata only)",
             scope="workspace:read", request="workspace-list.query", responses={200: "workspace-list.response"},
             tag="workspace"),
    ApiRoute(FILE, get_file, method="GET", summary="Read a workspace file (current, a version, or a snapshot)",
             scope="workspace:read", request="workspace-get.query", responses={200: "workspace-file"},
             tag="workspace", reads_memory=True),
    ApiRoute(FILE, put_file, method="PUT", summary="Create (201) or replace (200) a file, or stage it (202)",
             scope="workspace:write", request="workspace-put.request",
             responses={200: "workspace-file", 201: "workspace-file", 202: "workspace-pending.response"},
             headers=("If-Match", "X-Agent-Id"), tag="workspace"),
    ApiRoute(FILE, delete_file, method="DELETE", summary="Delete a file (tombstone version), or stage it (202)",
             scope="workspace:write", responses={200: "workspace-delete.response", 202: "workspace-pending.response"},
             headers=("If-Match", "X-Agent-Id"), tag="workspace"),
]
