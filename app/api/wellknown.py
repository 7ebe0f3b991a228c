"""`GET /.well-known/openwop`: the OpenWOP capability document — only what Memwarden honours."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from app.api.jsonio import json_response
from app.config import Settings
from app.contracts import default_contracts


def capabilities(settings: Settings) -> dict:
    """The capability document for these settings (validated against `schemas/openwop-capabilities.json`)."""
    doc = {
        "capabilities": {
            "agents": {"memoryBackends": ["memwarden"]},
            "memory": {
                "supported": True,
                "maxEntrySizeBytes": settings.max_entry_size_bytes,
                "ttlSupported": True,
                "snapshots": True,
                "redaction": {"supported": True, "modes": ["redact", "reject"]},
                "compaction": {"supported": True, "trigger": "host-managed"},
                "attribution": {"supported": True, "emitsWriteEvents": True},
                "governance": {"approvals": True, "twoPersonRule": True},
            },
            "workspace": {
                "supported": True,
                "versioned": True,
                "maxFileBytes": settings.workspace_max_file_bytes,
                "maxFiles": settings.workspace_max_files,
                "maxVersions": settings.workspace_max_versions,
            },
        }
    }
    return default_contracts().validate("openwop-capabilities", doc)


async def openwop(request: Request):
    return json_response(capabilities(request.app.state.settings))


routes = [Route("/.well-known/openwop", openwop, methods=["GET"])]
