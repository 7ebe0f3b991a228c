"""The OpenWOP discovery document advertises exactly what is honoured, with the live limits, in the
representation the client's `OpenWOP-Version` asks for."""

from app.api.wellknown import capabilities
from tests.schema_check import assert_error, assert_schema

V2 = {"OpenWOP-Version": "2.0"}


def test_workspace_capability_shape(client, ctx):
    """OpenWOP workspace-capability-shape (v1, with the wrapper of our first document)."""
    body = assert_schema("openwop-capabilities", client.get("/.well-known/openwop").json())
    workspace = {"supported": True, "versioned": True,
                 "maxFileBytes": ctx.settings.workspace_max_file_bytes,
                 "maxFiles": ctx.settings.workspace_max_files,
                 "maxVersions": ctx.settings.workspace_max_versions}
    assert body["workspace"] == body["capabilities"]["workspace"] == workspace


def test_v1_document_carries_what_openwop_client_1_reads(client, ctx):
    body = client.get("/.well-known/openwop").json()
    assert body["protocolVersion"] == body["preferredVersion"] == "1.0"
    assert body["protocolVersions"] == ["1.0", "2.0"]
    assert body["supportedEnvelopes"] == [] and body["schemaVersions"] == {}
    assert body["limits"] == {"clarificationRounds": 0, "schemaRounds": 0, "envelopesPerTurn": 0,
                              "maxRequestBodyBytes": ctx.settings.max_body_bytes}
    assert "runs" not in body and "runs" not in body["capabilities"]


def test_memory_capability_shape_follows_settings(client, ctx):
    memory = client.get("/.well-known/openwop").json()["capabilities"]["memory"]
    assert memory["supported"] and memory["ttlSupported"]
    assert memory["maxEntrySizeBytes"] == ctx.settings.max_entry_size_bytes
    assert memory["attribution"] == {"supported": True, "emitsWriteEvents": True}
    smaller = capabilities(ctx.settings.with_changes(max_entry_size_bytes=1024))
    assert smaller["memory"]["maxEntrySizeBytes"] == smaller["capabilities"]["memory"]["maxEntrySizeBytes"] == 1024
    assert capabilities(ctx.settings.with_changes(max_entry_size_bytes=1024), 2)["memory"]["maxEntrySizeBytes"] == 1024


def test_v2_document_is_the_closed_root_of_capability_records(client, ctx):
    response = client.get("/.well-known/openwop", headers=V2)
    body = assert_schema("openwop-capabilities-v2", response.json())
    assert set(body) == {"protocolVersions", "preferredVersion", "implementation", "extensions", "memory",
                         "workspace"}
    assert body["protocolVersions"] == ["1.0", "2.0"] and body["preferredVersion"] == "1.0"
    for family in ("memory", "workspace"):
        assert {k: body[family][k] for k in ("status", "since", "witness")} == {
            "status": "stable", "since": "1.0", "witness": "witnessable-gated"}
        assert "supported" not in body[family]
    assert body["memory"]["compaction"] == {"trigger": "host-managed"}
    assert body["memory"]["attribution"] == {"emitsWriteEvents": True}
    assert body["workspace"]["maxFileBytes"] == ctx.settings.workspace_max_file_bytes
    assert body["extensions"]["memwarden.governance"]["twoPersonRule"] is True


def test_the_header_picks_the_representation_and_bad_majors_are_refused(client):
    assert "limits" in client.get("/.well-known/openwop", headers={"OpenWOP-Version": "1.3"}).json()
    assert "limits" not in client.get("/.well-known/openwop", headers={"OpenWOP-Version": "2"}).json()
    refused = assert_error(client.get("/.well-known/openwop", headers={"OpenWOP-Version": "3.0"}), 406,
                           "protocol_version_unsupported")
    assert refused["details"] == {"protocolVersions": ["1.0", "2.0"]}
    assert_error(client.get("/.well-known/openwop", headers={"OpenWOP-Version": "two"}), 422, "validation_error")


def test_etag_and_if_none_match(client):
    first = client.get("/.well-known/openwop")
    second = client.get("/.well-known/openwop", headers=V2)
    assert first.headers["etag"] != second.headers["etag"]
    assert "OpenWOP-Version" in first.headers["vary"]
    again = client.get("/.well-known/openwop", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == first.headers["etag"]
    other = client.get("/.well-known/openwop", headers={**V2, "If-None-Match": first.headers["etag"]})
    assert other.status_code == 200 and other.headers["etag"] == second.headers["etag"]


def test_capability_document_is_public_json_with_security_headers(client):
    response = client.get("/.well-known/openwop")
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    assert response.headers["x-content-type-options"] == "nosniff"


def test_compaction_capability_is_host_managed(client):
    compaction = client.get("/.well-known/openwop").json()["capabilities"]["memory"]["compaction"]
    assert compaction == {"supported": True, "trigger": "host-managed"}
