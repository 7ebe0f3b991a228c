"""The read audit: every read that returns memory — recall, get, list, history,
over `/v1`, MCP and OpenWOP refs — is a `memory.read` entry in the tenant's chain naming who read,
for which agent, what came back and a keyed digest of the request, never content; `GET
/v1/memories/{id}/readers` and `GET /v1/audit/access` list them. (The crash bound of the batched
writer is `tests/integration/test_read_audit_live.py`.)"""

import json

from sqlalchemy import text

from app.services.audit.audit import chain_for
from tests.harness import bearer
from tests.schema_check import assert_error, assert_schema

SECRET = "Quentin's safe combination is 31-7-22."


def _remember(client, headers, content, agent_id="reader-a"):
    response = client.post("/v1/memories/remember", json={"agent_id": agent_id, "type": "semantic",
                                                           "content": content}, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _read_entries(ctx, tenant_id):
    with ctx.db.sessions() as session:
        rows = session.execute(text("SELECT entry FROM audit_entries WHERE chain_id = :c AND event_type = 'memory.read' "
                                    "ORDER BY seq"), {"c": chain_for(tenant_id)}).all()
    return [json.loads(r.entry) for r in rows]


def test_every_read_is_one_entry_with_ids_and_no_content(client, ctx, tenant, make_key):
    token = make_key(scopes="memory:read,memory:write")
    headers, key_id = bearer(token), token.split("_")[1] + "_" + token.split("_")[2]
    mid = _remember(client, headers, SECRET)
    other = _remember(client, headers, "Quentin likes sailing on Sundays.")
    assert client.post("/v1/memories/recall", json={"agent_id": "reader-a", "query": "Quentin safe combination",
                                                    "min_score": -1}, headers=headers).status_code == 200
    assert client.get(f"/v1/memories/{mid}", headers=headers).status_code == 200
    assert client.get("/v1/memories", params={"agent_id": "reader-a"}, headers=headers).status_code == 200
    assert client.get(f"/v1/memories/{mid}/history", headers=headers).status_code == 200
    entries = _read_entries(ctx, tenant.id)
    assert [e["data"]["operation"] for e in entries] == ["recall", "get", "list", "history"]
    assert sorted(entries[0]["data"]["memory_ids"]) == sorted([mid, other])
    assert entries[1]["data"]["memory_ids"] == [mid] and entries[3]["data"]["memory_ids"] == [mid]
    assert sorted(entries[2]["data"]["memory_ids"]) == sorted([mid, other])
    for entry in entries:
        assert entry["actor"] == {"kind": "api_key", "id": key_id}
        assert entry["data"]["agent_id"] == "reader-a" and entry["subject"]["type"] == "read"
        assert len(entry["data"]["query_digest"]) == 64
    raw = json.dumps(entries)
    assert "31-7-22" not in raw and "sailing" not in raw and "safe combination" not in raw


def test_equal_requests_digest_equal_and_a_read_with_no_hits_is_still_recorded(client, ctx, tenant, agent):
    _remember(client, agent, SECRET)
    for query in ("weather on Mars", "weather on Mars", "weather on Venus"):
        client.post("/v1/memories/recall", json={"agent_id": "reader-a", "query": query}, headers=agent)
    digests = [e["data"]["query_digest"] for e in _read_entries(ctx, tenant.id)]
    assert digests[0] == digests[1] != digests[2]


def test_reads_over_mcp_and_refs_are_recorded(client, ctx, tenant, agent):
    mid = _remember(client, agent, SECRET)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "get", "arguments": {"id": mid}}}
    response = client.post("/mcp", json=call, headers={**agent, "Accept": "application/json, text/event-stream"})
    assert response.status_code == 200, response.text
    ref = client.get("/v1/refs", params={"agent_id": "reader-a"}, headers=agent).json()["memoryRef"]
    assert client.get(f"/v1/refs/{ref}/entries", headers=agent).status_code == 200
    entries = _read_entries(ctx, tenant.id)
    assert [(e["data"]["operation"], e["data"]["memory_ids"]) for e in entries] == [("get", [mid]), ("list", [mid])]


def test_readers_and_access_list_the_reads(client, tenant, make_key):
    writer_token = make_key(scopes="memory:read,memory:write")
    writer = bearer(writer_token)
    other_token = make_key(scopes="memory:read", agents="reader-*")
    other = bearer(other_token)
    other_key = "_".join(other_token.split("_")[1:3])
    auditor = bearer(make_key(scopes="audit:read"))
    mid = _remember(client, writer, SECRET)
    never_read = _remember(client, writer, "Quentin owns a red kayak.", agent_id="reader-b")
    client.get(f"/v1/memories/{mid}", headers=writer)
    client.get(f"/v1/memories/{mid}", headers=other)
    client.get("/v1/memories", params={"agent_id": "reader-a"}, headers=other)

    response = client.get(f"/v1/memories/{mid}/readers", headers=auditor)
    body = assert_schema("readers.response", response.json())
    assert [(i["key_id"], i["operation"]) for i in body["items"]] == [
        (other_key, "list"), (other_key, "get"), ("_".join(writer_token.split("_")[1:3]), "get")]
    assert all(isinstance(i["audit_seq"], int) for i in body["items"]) and body["next_cursor"] is None
    assert SECRET not in response.text
    first = client.get(f"/v1/memories/{mid}/readers", params={"limit": 2}, headers=auditor).json()
    rest = client.get(f"/v1/memories/{mid}/readers", params={"limit": 2, "cursor": first["next_cursor"]},
                      headers=auditor).json()
    assert [i["read_id"] for i in first["items"] + rest["items"]] == [i["read_id"] for i in body["items"]]
    assert client.get(f"/v1/memories/{never_read}/readers", headers=auditor).json()["items"] == []

    access = assert_schema("access.response", client.get("/v1/audit/access", params={"key_id": other_key},
                                                         headers=auditor).json())
    assert [(i["operation"], i["memory_ids"]) for i in access["items"]] == [("list", [mid]), ("get", [mid])]
    assert client.get("/v1/audit/access", params={"agent_id": "reader-b"}, headers=auditor).json()["items"] == []
    late = client.get("/v1/audit/access", params={"from": "2999-01-01T00:00:00Z"}, headers=auditor).json()
    assert late["items"] == []
    early = client.get("/v1/audit/access", params={"to": "2000-01-01T00:00:00Z"}, headers=auditor).json()
    assert early["items"] == []


def test_read_audit_endpoints_need_audit_read_and_refuse_bad_input(client, agent, make_key, make_tenant):
    auditor = bearer(make_key(scopes="audit:read"))
    mid = _remember(client, agent, SECRET)
    assert_error(client.get(f"/v1/memories/{mid}/readers", headers=agent), 403, "forbidden")
    assert_error(client.get("/v1/audit/access", headers=agent), 403, "forbidden")
    assert_error(client.get("/v1/memories/mem_00000000000000000000000000/readers", headers=auditor), 404, "not_found")
    assert_error(client.get("/v1/audit/access", params={"cursor": "nope"}, headers=auditor), 422, "validation_error")
    assert_error(client.get("/v1/audit/access", params={"from": "yesterday"}, headers=auditor), 422,
                 "validation_error")
    assert_error(client.get("/v1/audit/access", params={"from": "2030-01-01T00:00:00Z",
                                                        "to": "2020-01-01T00:00:00Z"}, headers=auditor),
                 422, "validation_error")
    # Another tenant's auditor sees neither the memory nor its reads.
    stranger = bearer(make_key(scopes="audit:read", tenant_id=make_tenant().id))
    client.get(f"/v1/memories/{mid}", headers=agent)
    assert_error(client.get(f"/v1/memories/{mid}/readers", headers=stranger), 404, "not_found")
    assert client.get("/v1/audit/access", headers=stranger).json()["items"] == []


def test_a_workspace_file_read_is_recorded_by_path(client, ctx, tenant, make_key):
    headers = bearer(make_key(scopes="workspace:read,workspace:write"))
    put = client.put("/v1/host/workspace/files/NOTES.md", json={"content": "Nothing secret here."},
                     headers={**headers, "X-Agent-Id": "ws-agent"})
    assert put.status_code in (200, 201), put.text
    assert client.get("/v1/host/workspace/files/NOTES.md", headers=headers).status_code == 200
    entries = _read_entries(ctx, tenant.id)
    assert [(e["data"]["operation"], e["data"]["memory_ids"]) for e in entries] == [
        ("workspace.get", ["workspace:NOTES.md"])]
    assert "Nothing secret" not in json.dumps(entries)


def test_the_cli_lists_access_and_readers_and_sets_budgets(client, ctx, tenant, make_key, monkeypatch, capsys):
    import app.cli
    import app.cli.common
    from app.services.tenancy.tenant_config import read_budget_of
    from app.repos.tenancy import tenants as tenant_repo

    monkeypatch.setattr(app.cli.common, "open_context", lambda settings: ctx)
    token = make_key()
    key_id = "_".join(token.split("_")[1:3])
    mid = _remember(client, bearer(token), SECRET)
    client.get(f"/v1/memories/{mid}", headers=bearer(token))
    capsys.readouterr()
    assert app.cli.main(["audit", "access", "--tenant", tenant.name, "--key", key_id, "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["memory_ids"] == [mid] and json.loads(line)["operation"] == "get"
    assert app.cli.main(["audit", "readers", "--tenant", tenant.name, mid]) == 0
    out = capsys.readouterr().out
    assert f"api_key:{key_id}" in out and "31-7-22" not in out
    assert app.cli.main(["audit", "access", "--tenant", tenant.name, "--from", "soon"]) == 2
    assert app.cli.main(["audit", "readers", "--tenant", tenant.name, "mem_00000000000000000000000000"]) == 2
    assert app.cli.main(["tenant", "set", "--tenant", tenant.name, "--read-budget-per-key", "300"]) == 0
    with ctx.db.sessions() as session:
        assert read_budget_of(tenant_repo.settings_of(session, tenant_id=tenant.id)) == {"per_key": 300}
