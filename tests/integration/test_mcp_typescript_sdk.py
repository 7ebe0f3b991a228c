"""`/mcp` driven by the MCP TypeScript SDK's own client (on Node 22), against a real `memwarden serve`.

The TypeScript client is the strictest SDK: it checks each tool result's structured content against
the tool's declared output schema, and throws (McpError -32602) on a mismatch, so a server whose
errors carried the error envelope as structured content failed every failing call there while the
lenient Python SDK accepted it. Here every call, successful or failing, must come back as a result
the SDK accepts: no call may throw.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from app.services.tenancy.apikeys import create_key
from app.services.tenancy.tenants import create_tenant
from tests.harness import PROJECT_ROOT, unique
from tests.upstream import node_22, npm_package

PACKAGE = "@modelcontextprotocol/sdk@1.32.2"
ACTOR = {"kind": "test", "id": "pytest"}
MISSING = "mem_" + "0" * 26


@pytest.fixture(scope="module")
def sdk_client():
    """The probe script, placed beside the SDK's node_modules so its imports resolve; and Node 22."""
    cache = npm_package(PACKAGE, "node_modules/@modelcontextprotocol/sdk/package.json")
    script = cache / "mcp_ts_client.mjs"
    shutil.copyfile(PROJECT_ROOT / "tests" / "mcp_ts_client.mjs", script)
    return node_22(), script


def run_calls(sdk_client, base_url: str, token: str, calls: list[dict]) -> dict:
    node, script = sdk_client
    done = subprocess.run([str(node), str(script), f"{base_url}/mcp", token, json.dumps(calls)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _envelope(outcome: dict) -> dict:
    assert "thrown" not in outcome, outcome
    result = outcome["result"]
    assert result["isError"] is True, result
    return json.loads(result["content"][0]["text"])["error"]


def test_typescript_sdk_accepts_every_success_and_every_tool_error(live_server, committed_ctx, sdk_client):
    tenant = create_tenant(committed_ctx, name=unique("ts-sdk"), actor=ACTOR)
    token = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", agents="ts-*",
                       actor=ACTOR).token
    read_only = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read", agents="ts-*",
                           actor=ACTOR).token
    calls = [
        {"tool": "remember", "arguments": {"agent_id": "ts-1", "type": "semantic", "content": "Ada prefers email."}},
        {"tool": "remember", "arguments": {"agent_id": "ts-1", "type": "semantic", "approval_required": True,
                                           "content": "Ada's desk moved to the third floor."}},
        {"tool": "recall", "arguments": {"agent_id": "ts-1", "query": "how to reach Ada", "k": 3}},
        {"tool": "get", "arguments": {"id": MISSING}},
        {"tool": "remember", "arguments": {"agent_id": "finance-1", "type": "semantic", "content": "x"}},
        {"tool": "recall", "arguments": {"agent_id": "ts-1", "query": "Ada", "k": 3, "not_a_field": 1}},
        {"tool": "no_such_tool", "arguments": {}},
    ]
    answer = run_calls(sdk_client, live_server, token, calls)
    assert {"remember", "recall", "forget", "get", "list"} <= set(answer["tools"])
    outcomes = answer["outcomes"]
    assert not [o for o in outcomes if "thrown" in o], outcomes

    live, staged, recalled = (o["result"] for o in outcomes[:3])
    assert not live.get("isError") and live["structuredContent"]["status"] == "live"
    assert not staged.get("isError") and staged["structuredContent"]["status"] == "pending"
    assert staged["structuredContent"]["change_id"].startswith("chg_")
    assert [hit["id"] for hit in recalled["structuredContent"]["hits"]] == [live["structuredContent"]["id"]]
    assert _envelope(outcomes[3])["code"] == "not_found"
    assert _envelope(outcomes[4])["code"] == "forbidden"  # an agent outside the key's allow-list
    assert _envelope(outcomes[5])["code"] == "validation_error"
    assert outcomes[6]["result"]["isError"] is True  # an unknown tool: an error result, not an exception

    denied = run_calls(sdk_client, live_server, read_only, calls[:1])["outcomes"]
    assert _envelope(denied[0])["code"] == "forbidden"  # a missing scope


INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
INSPECTOR_CLI = "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"


def inspector(base_url: str, token: str, *args: str) -> subprocess.CompletedProcess:
    """The MCP inspector's CLI (it needs Node >= 22.19, and `--header` to send the bearer key)."""
    cli = npm_package(INSPECTOR, INSPECTOR_CLI) / INSPECTOR_CLI
    return subprocess.run([str(node_22()), str(cli), "--cli", f"{base_url}/mcp", "--transport", "http",
                           "--header", f"Authorization: Bearer {token}", *args],
                          capture_output=True, text=True, timeout=120)


def test_the_inspector_lists_and_calls_tools_with_a_bearer_header(live_server, committed_ctx):
    tenant = create_tenant(committed_ctx, name=unique("inspector"), actor=ACTOR)
    token = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", agents="*",
                       actor=ACTOR).token
    listed = inspector(live_server, token, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert {"remember", "recall", "get"} <= {tool["name"] for tool in json.loads(listed.stdout)["tools"]}

    stored = inspector(live_server, token, "--method", "tools/call", "--tool-name", "remember", "--tool-arg",
                       "agent_id=inspector-1", "type=semantic", "content=Ada prefers email.")
    assert stored.returncode == 0, stored.stderr[-2000:]
    assert json.loads(stored.stdout)["structuredContent"]["status"] == "live"

    missing = inspector(live_server, token, "--method", "tools/call", "--tool-name", "get", "--tool-arg",
                        f"id={MISSING}")
    result = json.loads(missing.stdout)
    assert result["isError"] is True and json.loads(result["content"][0]["text"])["error"]["code"] == "not_found"

    refused = inspector(live_server, "mw_key_" + "0" * 26 + "_" + "A" * 43, "--method", "tools/list")
    # A wrong key is a 401 before any MCP message, which the inspector takes as "sign in first".
    assert refused.returncode != 0 and json.loads(refused.stderr)["error"]["code"] == "auth_required"
