"""OpenWOP's own Python SDK, `openwop-client`, against a real `memwarden serve`.

The current line (2.x, a test dependency) runs in this process; 1.8, the last line with workspace
file methods, cannot share the package name, so it is installed with `pip install --target` into a
temporary directory and driven in a subprocess (marked slow: it downloads from the registry).

What each line can reach through its public API:
- 2.x: discovery (`discovery_capabilities`), its error registry (`is_error_code`,
  `ERROR_CODE_HTTP_STATUS`) and `WopError` for our answers, its `memory.written` event predicates.
  Its v2 operations (`/runs`, …) are not served: runs are not advertised, and a 404 reads as
  OpenWOP's `not_found` (`runs_list()` → None).
- 1.8: discovery, the workspace file methods with `If-Match`, its `memory.written` predicates.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from openwop_client import (ERROR_CODE_HTTP_STATUS, CreateRunRequest, OpenwopClient, RunEventDoc, WopError,
                            is_error_code, is_memory_written, is_vendor_error_code, memory_written_payload)

from app.services.tenancy.apikeys import create_key
from app.services.tenancy.tenants import create_tenant
from tests.harness import bearer, unique
from tests.schema_check import assert_schema

ACTOR = {"kind": "test", "id": "pytest"}
SCOPES = "memory:read,memory:write,workspace:read,workspace:write,events:read"
FILES = "/v1/host/workspace/files"


@pytest.fixture(scope="module")
def tokens(committed_ctx) -> dict[str, str]:
    """Keys of one fresh tenant: everything, and memory only (no workspace scope)."""
    tenant = create_tenant(committed_ctx, name=unique("openwop-sdk"), actor=ACTOR)
    return {scopes: create_key(committed_ctx, tenant_id=tenant.id, scopes=scopes, agents="*", actor=ACTOR).token
            for scopes in (SCOPES, "memory:read")}


def memory_written_events(base_url: str, token: str) -> list[RunEventDoc]:
    """The tenant's `memory.written` events so far (`/v1/events?once=1`), as the SDK's event documents."""
    response = httpx.get(f"{base_url}/v1/events", params={"once": "1"}, headers=bearer(token), timeout=30)
    assert response.status_code == 200, response.text
    docs = []
    for frame in response.text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in frame.splitlines() if not line.startswith(":"))
        if fields.get("event") == "memory.written":
            docs.append(RunEventDoc(eventId=fields["id"], runId="", type=fields["event"],
                                    payload=json.loads(fields["data"]), timestamp="", sequence=int(fields["id"]),
                                    schemaVersion=1))
    return docs


def write_through_ref(base_url: str, token: str, agent_id: str, content: str) -> tuple[str, dict[str, Any]]:
    """(memoryRef, entry) of one entry written through the MemoryAdapter routes."""
    ref = httpx.get(f"{base_url}/v1/refs", params={"agent_id": agent_id}, headers=bearer(token), timeout=30)
    memory_ref = ref.json()["memoryRef"]
    entry = httpx.post(f"{base_url}/v1/refs/{memory_ref}/entries", json={"content": content, "tags": ["sdk"]},
                       headers=bearer(token), timeout=60)
    assert entry.status_code == 201, entry.text
    return memory_ref, entry.json()


# --- openwop-client 2.x, in process --------------------------------------------------------------

def test_v2_discovery_parses_the_families_we_honour(live_server, tokens, settings):
    caps = OpenwopClient(live_server, tokens[SCOPES]).discovery_capabilities()
    assert caps.protocolVersions == ["1.0", "2.0"] and caps.preferredVersion == "1.0"
    assert_schema("openwop-capabilities-v2", caps.raw)
    assert set(caps.families) == {"memory", "workspace"}
    memory, workspace = caps.family("memory"), caps.family("workspace")
    assert (memory.status, memory.since, memory.witness, memory.until) == ("stable", "1.0", "witnessable-gated", None)
    assert memory.facets["maxEntrySizeBytes"] == settings.max_entry_size_bytes
    assert memory.facets["attribution"] == {"emitsWriteEvents": True}
    assert memory.facets["compaction"] == {"trigger": "host-managed"}
    assert workspace.facets == {"versioned": True, "maxFileBytes": settings.workspace_max_file_bytes,
                                "maxFiles": settings.workspace_max_files,
                                "maxVersions": settings.workspace_max_versions}
    assert caps.family("runList") is None and caps.implementation["name"] == "memwarden"


def test_v2_operations_we_do_not_serve_read_as_openwop_not_found(live_server, tokens):
    client = OpenwopClient(live_server, tokens[SCOPES])
    assert client.runs_list() is None  # the SDK's answer for a host without the runList family
    with pytest.raises(WopError) as raised:
        client.runs_get("run_" + "0" * 26)
    assert raised.value.status == 404 and raised.value.envelope.error == "not_found"
    with pytest.raises(WopError) as raised:  # not a CSRF refusal: an SDK call carries no cookie
        client.runs_create(CreateRunRequest(workflowId="wf"))
    assert raised.value.status == 404 and raised.value.envelope.error == "not_found"


def _openwop_error(response: httpx.Response) -> str:
    """The code of an OpenWOP error answer, checked against the SDK's own registry."""
    body = response.json()
    assert set(body) <= {"error", "message", "details"} and body["message"], body
    code = body["error"]
    assert is_error_code(code) or is_vendor_error_code(code), code
    if is_error_code(code):
        assert ERROR_CODE_HTTP_STATUS[code] == response.status_code, (code, response.status_code)
    return code


def test_workspace_errors_use_registered_codes_a_client_branches_on(live_server, tokens):
    key = bearer(tokens[SCOPES])
    url = f"{live_server}{FILES}/sdk/conflict.md"
    first = httpx.put(url, json={"content": "one"}, headers=key, timeout=60)
    assert first.status_code == 201, first.text
    assert httpx.put(url, json={"content": "two"}, headers={**key, "If-Match": first.headers["etag"]},
                     timeout=60).status_code == 200
    stale = httpx.put(url, json={"content": "three"}, headers={**key, "If-Match": first.headers["etag"]}, timeout=60)
    assert _openwop_error(stale) == "workspace_conflict" and stale.json()["details"] == {"currentVersion": 2}
    cases = [
        (httpx.get(f"{live_server}{FILES}/sdk/absent.md", headers=key, timeout=30), "not_found"),
        (httpx.put(url, json={"content": 1}, headers=key, timeout=30), "validation_error"),
        (httpx.get(f"{live_server}{FILES}", timeout=30), "unauthenticated"),
        (httpx.get(f"{live_server}{FILES}", headers=bearer(tokens["memory:read"]), timeout=30), "forbidden"),
        (httpx.get(f"{live_server}/v1/refs/ref_{'0' * 26}/entries", headers=key, timeout=30), "not_found"),
        (httpx.get(f"{live_server}/.well-known/openwop", headers={"OpenWOP-Version": "9.0"}, timeout=30),
         "protocol_version_unsupported"),
    ]
    assert [_openwop_error(response) for response, _ in cases] == [code for _, code in cases]
    # The /v1 memory API keeps Memwarden's envelope.
    ours = httpx.post(f"{live_server}/v1/memories/recall", json={}, headers=key, timeout=30)
    assert ours.status_code == 422 and ours.json()["error"]["code"] == "validation_error"


def test_memory_refs_follow_the_sdks_memory_written_events(live_server, tokens):
    token = tokens[SCOPES]
    memory_ref, entry = write_through_ref(live_server, token, "sdk-agent", "Ada prefers tea over coffee.")
    written = [e for e in memory_written_events(live_server, token) if is_memory_written(e)]
    payload = next(memory_written_payload(e) for e in written if e.payload["memoryId"] == entry["id"])
    assert payload["memoryRef"] == memory_ref and "content" not in payload
    back = httpx.get(f"{live_server}/v1/refs/{payload['memoryRef']}/entries/{payload['memoryId']}",
                     headers=bearer(token), timeout=30)
    assert back.status_code == 200 and back.json()["content"] == "Ada prefers tea over coffee."


# --- openwop-client 1.8, in a subprocess ---------------------------------------------------------

SDK_18_SCRIPT = textwrap.dedent('''
    import json, sys
    import openwop_client
    from openwop_client import OpenwopClient, PutWorkspaceFileRequest, RunEventDoc, WopError
    from openwop_client import is_memory_written, memory_written_payload

    base, token = sys.argv[1], sys.argv[2]
    events = json.loads(sys.argv[3])
    client = OpenwopClient(base, token)
    out = {"version": openwop_client.__version__}
    caps = client.discovery_capabilities()
    out["discovery"] = {"protocolVersion": caps.protocolVersion, "supportedEnvelopes": caps.supportedEnvelopes,
                        "clarificationRounds": caps.limits.clarificationRounds,
                        "maxRequestBodyBytes": caps.limits.maxRequestBodyBytes, "memory": caps.memory is not None}

    created = client.put_workspace_file("notes/plan.md", PutWorkspaceFileRequest(content="step one"))
    replaced = client.put_workspace_file("notes/plan.md", PutWorkspaceFileRequest(content="step two"),
                                         if_match=created.etag)
    try:
        client.put_workspace_file("notes/plan.md", PutWorkspaceFileRequest(content="lost update"),
                                  if_match=created.etag)
        out["conflict"] = None
    except WopError as error:  # branch on the code, as the SDK documents
        out["conflict"] = {"status": error.status, "code": error.envelope.error, "details": error.envelope.details}
    listing = client.list_workspace_files(prefix="notes/")
    out["files"] = [(f.path, f.version) for f in listing]
    out["current"] = client.get_workspace_file("notes/plan.md").content
    out["first"] = client.get_workspace_file("notes/plan.md", version=created.version).content
    out["versions"] = [created.version, replaced.version]
    out["deleted"] = client.delete_workspace_file("notes/plan.md")
    out["after_delete"] = client.get_workspace_file("notes/plan.md")
    out["delete_absent"] = client.delete_workspace_file("notes/never.md")

    docs = [RunEventDoc(eventId=e["id"], runId="", type=e["type"], payload=e["payload"], timestamp="",
                        sequence=int(e["id"])) for e in events]
    out["memory_written"] = [memory_written_payload(d) for d in docs if is_memory_written(d)]
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def sdk_18(tmp_path_factory) -> Path:
    """openwop-client 1.8.0 installed alone into its own directory (the 2.x line stays in the venv)."""
    target = tmp_path_factory.mktemp("openwop-client-1.8")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                           "openwop-client==1.8.0"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return target


@pytest.mark.slow
def test_openwop_client_1_8_discovery_workspace_and_memory_refs(live_server, sdk_18, committed_ctx, settings):
    tenant = create_tenant(committed_ctx, name=unique("openwop-sdk-18"), actor=ACTOR)
    token = create_key(committed_ctx, tenant_id=tenant.id, scopes=SCOPES, agents="*", actor=ACTOR).token
    memory_ref, entry = write_through_ref(live_server, token, "sdk18-agent", "Bo takes the 7:40 train.")
    events = [{"id": e.eventId, "type": e.type, "payload": e.payload} for e in memory_written_events(live_server, token)]
    env = {**os.environ, "PYTHONPATH": str(sdk_18)}  # ahead of site-packages, so 1.8 shadows the venv's 2.x
    done = subprocess.run([sys.executable, "-c", SDK_18_SCRIPT, live_server, token, json.dumps(events)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["version"] == "1.8.0"
    assert out["discovery"] == {"protocolVersion": "1.0", "supportedEnvelopes": [], "clarificationRounds": 0,
                                "maxRequestBodyBytes": settings.max_body_bytes, "memory": True}
    assert out["versions"] == [1, 2]
    assert out["conflict"] == {"status": 409, "code": "workspace_conflict", "details": {"currentVersion": 2}}
    assert out["files"] == [["notes/plan.md", 2]]
    assert (out["current"], out["first"]) == ("step two", "step one")
    assert out["deleted"] is True and out["after_delete"] is None and out["delete_absent"] is False
    assert out["memory_written"] == [{"memoryRef": memory_ref, "memoryId": entry["id"], "agentId": "sdk18-agent",
                                      "tags": ["sdk"]}]
