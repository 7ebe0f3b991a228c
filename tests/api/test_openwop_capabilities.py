"""The OpenWOP capability document advertises exactly what is honoured, with the live limits."""

from app.api.wellknown import capabilities
from tests.schema_check import assert_schema


def test_workspace_capability_shape(client, ctx):
    """OpenWOP workspace-capability-shape."""
    body = assert_schema("openwop-capabilities", client.get("/.well-known/openwop").json())
    workspace = body["capabilities"]["workspace"]
    assert workspace == {"supported": True, "versioned": True,
                         "maxFileBytes": ctx.settings.workspace_max_file_bytes,
                         "maxFiles": ctx.settings.workspace_max_files,
                         "maxVersions": ctx.settings.workspace_max_versions}


def test_memory_capability_shape_follows_settings(client, ctx):
    memory = client.get("/.well-known/openwop").json()["capabilities"]["memory"]
    assert memory["supported"] and memory["ttlSupported"]
    assert memory["maxEntrySizeBytes"] == ctx.settings.max_entry_size_bytes
    assert memory["attribution"] == {"supported": True, "emitsWriteEvents": True}
    smaller = capabilities(ctx.settings.with_changes(max_entry_size_bytes=1024))
    assert smaller["capabilities"]["memory"]["maxEntrySizeBytes"] == 1024


def test_capability_document_is_public_json_with_security_headers(client):
    response = client.get("/.well-known/openwop")
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    assert response.headers["x-content-type-options"] == "nosniff"


def test_compaction_capability_is_host_managed(client):
    compaction = client.get("/.well-known/openwop").json()["capabilities"]["memory"]["compaction"]
    assert compaction == {"supported": True, "trigger": "host-managed"}
