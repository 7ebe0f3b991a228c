"""`GET /.well-known/openwop`: the OpenWOP discovery document — only what Memwarden honours.

One resource, two representations chosen by the `OpenWOP-Version` request header, as OpenWOP's
discovery rules have it: no header (or `1.x`) gets the v1 document, which `openwop-client` 1.x
parses (root `protocolVersion`, `supportedEnvelopes`, `schemaVersions`, `limits`; plus the v2
`protocolVersions`/`preferredVersion`, and our `capabilities` wrapper kept for existing readers);
`2.x` gets the closed v2 root that `openwop-client` 2.x parses (`protocolVersions`,
`preferredVersion`, one capability record `{status, since, witness, …facets}` per family). Any
other major is 406 `protocol_version_unsupported`.

Families advertised: `memory` (with attribution, host-managed compaction and consolidation) and `workspace`.
Runs are not: Memwarden starts no workflows, so OpenWOP's run operations are not served. It runs
no LLM turns either, so every envelope limit is 0 and no envelope kind is listed. What has no
OpenWOP family (snapshots, redaction, review, the two-person rule) is the extension
`memwarden.governance`. Every representation carries a strong `ETag` and honours `If-None-Match`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app import __version__
from app.api.jsonio import JSON
from app.config import Settings
from app.contracts import default_contracts
from app.errors import ProtocolVersionUnsupported, ValidationFailed

VERSION_HEADER = "openwop-version"
PROTOCOL_VERSIONS = ["1.0", "2.0"]
PREFERRED_VERSION = "1.0"  # what a request without `OpenWOP-Version` gets
SINCE = "1.0"  # the minor of our own contract at which each family was first served
VERSION = re.compile(r"^\s*([0-9]{1,3})(?:\.([0-9]{1,3}))?\s*$")


CONSOLIDATION = {"trigger": "host-managed", "idempotent": True, "event": "agent.memory.consolidated",
                 "operations": ["remember", "expire"], "infersCommitments": False}
"""Short-term to long-term consolidation (OpenWOP RFC 0068): run by the host (schedule, CLI, `POST
/v1/consolidate`), idempotent, announced by a content-free event, done through `remember` and
`expire`; it infers no standing commitments (no `commitment.fired`)."""


def _governance() -> dict[str, Any]:
    return {"snapshots": True, "redaction": {"modes": ["redact", "reject"]},
            "approvals": True, "twoPersonRule": True}


def _common(settings: Settings) -> dict[str, Any]:
    return {"protocolVersions": PROTOCOL_VERSIONS, "preferredVersion": PREFERRED_VERSION,
            "implementation": {"name": "memwarden", "version": __version__},
            "extensions": {"memwarden.governance": _governance()}}


def _v1_memory(settings: Settings) -> dict[str, Any]:
    return {"supported": True, "maxEntrySizeBytes": settings.max_entry_size_bytes, "ttlSupported": True,
            "compaction": {"supported": True, "trigger": "host-managed"},
            "consolidation": {"supported": True, **CONSOLIDATION},
            "attribution": {"supported": True, "emitsWriteEvents": True}}


def _v1_workspace(settings: Settings) -> dict[str, Any]:
    return {"supported": True, "versioned": True, "maxFileBytes": settings.workspace_max_file_bytes,
            "maxFiles": settings.workspace_max_files, "maxVersions": settings.workspace_max_versions}


def capabilities_v1(settings: Settings) -> dict[str, Any]:
    """The v1 document (validated against `schemas/openwop-capabilities.json`)."""
    memory, workspace = _v1_memory(settings), _v1_workspace(settings)
    doc = {
        "protocolVersion": PREFERRED_VERSION,
        **_common(settings),
        "supportedEnvelopes": [],
        "schemaVersions": {},
        "limits": {"clarificationRounds": 0, "schemaRounds": 0, "envelopesPerTurn": 0,
                   "maxRequestBodyBytes": settings.max_body_bytes},
        "memory": memory,
        "workspace": workspace,
        # The wrapper readers of our first document use; OpenWOP keeps it in v1 until v1's end of support.
        "capabilities": {"agents": {"memoryBackends": ["memwarden"]}, "memory": memory, "workspace": workspace},
    }
    return default_contracts().validate("openwop-capabilities", doc)


def _record(**facets: Any) -> dict[str, Any]:
    return {"status": "stable", "since": SINCE, "witness": "witnessable-gated", **facets}


def capabilities_v2(settings: Settings) -> dict[str, Any]:
    """The closed v2 root (validated against `schemas/openwop-capabilities-v2.json`)."""
    doc = {
        **_common(settings),
        "memory": _record(maxEntrySizeBytes=settings.max_entry_size_bytes, ttlSupported=True,
                          compaction={"trigger": "host-managed"}, consolidation=dict(CONSOLIDATION),
                          attribution={"emitsWriteEvents": True},
                          search={"modes": ["semantic", "filter"]}, retention={"ttl": True, "forget": True}),
        "workspace": _record(versioned=True, maxFileBytes=settings.workspace_max_file_bytes,
                             maxFiles=settings.workspace_max_files, maxVersions=settings.workspace_max_versions),
    }
    return default_contracts().validate("openwop-capabilities-v2", doc)


def capabilities(settings: Settings, major: int = 1) -> dict[str, Any]:
    """The discovery document for protocol `major` (1 or 2)."""
    return capabilities_v2(settings) if major == 2 else capabilities_v1(settings)


def requested_major(request: Request) -> int:
    """The major the client speaks, from `OpenWOP-Version` (absent: 1)."""
    raw = request.headers.get(VERSION_HEADER)
    if raw is None:
        return 1
    match = VERSION.match(raw)
    if not match:
        raise ValidationFailed.at("/OpenWOP-Version", "not a <major>.<minor> protocol version")
    major = int(match.group(1))
    if major not in (1, 2):
        raise ProtocolVersionUnsupported(f"this host serves OpenWOP {', '.join(PROTOCOL_VERSIONS)}",
                                         details={"protocolVersions": PROTOCOL_VERSIONS})
    return major


def _etag_matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    return header.strip() == "*" or etag in {tag.strip().removeprefix("W/") for tag in header.split(",")}


async def openwop(request: Request) -> Response:
    major = requested_major(request)
    response = JSON(capabilities(request.app.state.settings, major))
    etag = '"' + hashlib.sha256(response.body).hexdigest()[:32] + '"'
    headers = {"ETag": etag, "Vary": "OpenWOP-Version"}
    if _etag_matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers=headers)
    response.headers.update(headers)
    return response


routes = [Route("/.well-known/openwop", openwop, methods=["GET"])]
