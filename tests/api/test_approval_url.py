"""A staged write's review link has one form on every surface: `/v1` (`review_url`), MCP (the same
body), memorywire (`approval_url`) and the workspace (`reviewUrl`). Absolute under
MEMWARDEN_PUBLIC_URL when the operator set it; otherwise the path, never built from the request's
Host header (which is the caller's word)."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from starlette.testclient import TestClient

from app.main import create_app
from app.services.runtime.context import AppContext
from app.services.tenancy.tenant_config import set_policy
from tests.harness import bearer

PUBLIC = "https://memwarden.example.com"
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def _mcp_body(response) -> dict:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return response.json()


def _links(client: TestClient, headers: dict[str, str]) -> dict[str, str]:
    """The review link of a staged write on each surface."""
    staged = {"agent_id": "agent-a", "type": "semantic", "approval_required": True}
    v1 = client.post("/v1/memories/remember", json={**staged, "content": "Olga's desk is 4B."}, headers=headers)
    assert v1.status_code == 202, v1.text
    wire = client.post("/memorywire/v0/remember", json={**staged, "content": "Olga's desk is 5C."}, headers=headers)
    assert wire.status_code == 200 and wire.json()["pending_approval"] is True, wire.text
    mcp = client.post("/mcp", headers={**headers, **MCP_HEADERS, "Host": "attacker.example"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                            "params": {"name": "remember", "arguments": {**staged, "content": "Olga's desk is 6D."}}})
    assert mcp.status_code == 200, mcp.text
    result = _mcp_body(mcp)["result"]
    assert not result.get("isError"), result
    files = client.put("/v1/host/workspace/files/DIRECTIVES.md", json={"content": "Be brief."}, headers=headers)
    assert files.status_code == 202, files.text
    return {"v1": v1.json()["review_url"], "memorywire": wire.json()["approval_url"],
            "mcp": result["structuredContent"]["review_url"], "workspace": files.json()["reviewUrl"]}


@pytest.fixture
def staged_everywhere(ctx, tenant, make_key):
    set_policy(ctx, tenant_id=tenant.id, actor={"kind": "test", "id": "t"}, doc={"rules": [
        {"id": "review-directives", "match": {"operations": ["workspace_write"], "paths": ["DIRECTIVES*"]},
         "action": "require_approval"}]})
    return bearer(make_key(scopes="memory:read,memory:write,workspace:read,workspace:write"))


def test_without_a_public_url_every_surface_answers_the_path(ctx, staged_everywhere):
    with TestClient(create_app(ctx.settings, ctx=ctx), base_url="http://testserver") as client:
        links = _links(client, staged_everywhere)
    assert all(re.fullmatch(r"/review/chg_[0-9a-z]+", link) for link in links.values()), links


def test_with_a_public_url_every_surface_answers_it_absolute(ctx, staged_everywhere):
    public = AppContext(dataclasses.replace(ctx.settings, public_url=PUBLIC + "/"), ctx.db)
    with TestClient(create_app(public.settings, ctx=public), base_url="http://testserver") as client:
        links = _links(client, staged_everywhere)
    assert all(re.fullmatch(re.escape(PUBLIC) + r"/review/chg_[0-9a-z]+", link) for link in links.values()), links
