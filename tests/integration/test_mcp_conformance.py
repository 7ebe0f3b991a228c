"""The MCP conformance suite (`@modelcontextprotocol/conformance`, from the npm registry, run by
Node) against `/mcp` of a real `memwarden serve`.

Only the scenarios that apply to a server of memory tools run: initialization, ping, the tool
listing, a failing tool call's error result, the resource listing and DNS-rebinding protection.
The others test fixture tools, prompts, resources and features a conformance test server defines
(`test_simple_text`, `test://template/{id}/data`, logging, completion, sampling…), which Memwarden
neither has nor should grow. The runner takes only a URL, so it talks to a loopback proxy that adds
the API key (tests/auth_proxy.py) and forwards every other header as sent.

Every check's status is pinned in EXPECTED, failures included with their reason, so a change in
either direction fails the test until EXPECTED and the table in docs/agents/mcp.md agree.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.auth_proxy import start_auth_proxy
from tests.upstream import npm_package

# 0.1.14 and later import `globSync` from `fs`, which needs Node 22; the machine's Node is 20.
PACKAGE = "@modelcontextprotocol/conformance@0.1.13"

EXPECTED = {
    "server-initialize": {"server-initialize": "SUCCESS"},
    "ping": {"ping": "SUCCESS"},
    "tools-list": {"tools-list": "SUCCESS"},
    "tools-call-error": {"tools-call-error": "SUCCESS"},  # an unknown tool: isError with the envelope as text
    "resources-list": {"resources-list": "SUCCESS"},
    "dns-rebinding-protection": {"localhost-host-valid-accepted": "SUCCESS",
                                 "localhost-host-rebinding-rejected": "SUCCESS"},
}


@pytest.fixture(scope="module")
def runner() -> Path:
    """The conformance runner, installed once with npm into a cache directory."""
    return npm_package(PACKAGE, "node_modules/.bin/conformance") / "node_modules" / ".bin" / "conformance"


@pytest.fixture(scope="module")
def proxied_mcp(live_server, committed_ctx):
    """`/mcp` behind the key-adding proxy, for a fresh tenant's read/write key."""
    from app.services.tenancy.apikeys import create_key
    from app.services.tenancy.tenants import create_tenant
    from tests.harness import unique

    actor = {"kind": "test", "id": "pytest"}
    tenant = create_tenant(committed_ctx, name=unique("conformance"), actor=actor)
    key = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", agents="*", actor=actor)
    server, url = start_auth_proxy(live_server, key.token)
    yield f"{url}/mcp"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_conformance_scenario(runner, proxied_mcp, scenario, tmp_path):
    done = subprocess.run([str(runner), "server", "--url", proxied_mcp, "--scenario", scenario, "-o", str(tmp_path)],
                          capture_output=True, text=True, timeout=180)
    found = list(tmp_path.glob("*/checks.json"))
    assert len(found) == 1, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    statuses = {check["id"]: check["status"] for check in json.loads(found[0].read_text())}
    assert statuses == EXPECTED[scenario], done.stdout[-3000:]
