"""`/v1/audit` over HTTP against a live `memwarden serve` (contract §6).

The export signs a checkpoint and reads under REPEATABLE READ in its own transactions, so these
tests use the live server and committed tenants rather than the rolled-back test client.

Each tenant's chain here: seq 1 `tenant.created`, `apikey.created` for its keys, then test events
up to size 20 with signed checkpoints at 8 and 16.
"""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from sqlalchemy import select

from app.core import auditchain as chain
from app.db.models import AuditEntry
from app.services.tenancy.apikeys import create_key
from app.services.audit.audit import chain_for
from app.services.tenancy.tenants import create_tenant
from tests.harness import bearer, unique
from tests.schema_check import assert_error, assert_schema

ACTOR = {"kind": "test", "id": "audit-api"}
SIZE = 20
CHECKPOINTS = (8, 16)


def _grow(ctx, tenant_id: str) -> None:
    chain_id = chain_for(tenant_id)
    with ctx.db.sessions() as session:
        size = len(session.scalars(select(AuditEntry.seq).where(AuditEntry.chain_id == chain_id)).all())
    for n in range(size + 1, SIZE + 1):
        with ctx.db.sessions.begin() as session:
            ctx.audit.append(session, tenant_id=tenant_id, event_type="test.event", actor=ACTOR,
                             subject={"type": "memory", "id": f"mem_{tenant_id}_{n}"}, data={"n": n})
        if n in CHECKPOINTS:
            with ctx.db.sessions.begin() as session:
                ctx.audit.checkpoint(session, chain_id)


@pytest.fixture
def auditor(committed_ctx):
    """A fresh tenant with a grown chain, and an `audit:read` key for it."""
    def make():
        tenant = create_tenant(committed_ctx, name=unique("audit"), actor=ACTOR)
        token = create_key(committed_ctx, tenant_id=tenant.id, scopes="audit:read", actor=ACTOR).token
        _grow(committed_ctx, tenant.id)
        return tenant, token

    return make


def published_key(live_server: str) -> str:
    response = httpx.get(f"{live_server}/v1/audit/public-key")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    as_json = httpx.get(f"{live_server}/v1/audit/public-key", headers={"Accept": "application/json"}).json()
    assert as_json["vkey"] == response.text.strip() and as_json["algorithm"] == "Ed25519"
    chain.parse_vkey(as_json["vkey"])
    return as_json["vkey"]


def export(live_server: str, token: str, **params) -> list[str]:
    response = httpx.get(f"{live_server}/v1/audit/export", params=params, headers=bearer(token), timeout=60)
    assert response.status_code == 200, response.text[:500]
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert response.headers["content-disposition"].startswith("attachment")
    return response.text.splitlines()


def chain_hash_at(ctx, chain_id: str, seq: int) -> bytes:
    with ctx.db.sessions() as session:
        return session.scalar(select(AuditEntry.chain_hash).where(AuditEntry.chain_id == chain_id,
                                                                  AuditEntry.seq == seq))


def test_the_export_is_jsonl_that_verifies_with_the_published_key(live_server, auditor):
    tenant, token = auditor()
    vkey = published_key(live_server)
    lines = export(live_server, token)
    manifest = json.loads(lines[0])
    assert manifest["kind"] == "manifest" and manifest["chain_id"] == chain_for(tenant.id)
    assert (manifest["from_seq"], manifest["to_seq"]) == (1, SIZE) and manifest["vkey"] == vkey
    kinds = [json.loads(line)["kind"] for line in lines]
    assert kinds.count("entry") == SIZE and kinds.count("checkpoint") == len(CHECKPOINTS) + 1
    report = chain.verify_export(lines, vkeys=[vkey])
    assert report.ok, report.detail
    assert (report.entries, report.verified_through, report.checkpoints_verified) == (SIZE, SIZE, 3)


@pytest.mark.parametrize("params, first, last", [
    ({"from_seq": 5}, 5, SIZE),
    ({"from_seq": 5, "to_seq": 16}, 5, 16),
    ({"to_seq": 8}, 1, 8),
    ({"to_seq": 10}, 1, 16),  # extended to the next signed checkpoint, so it ends covered
    ({"from_seq": 10, "to_seq": 11}, 10, 16),  # no checkpoint inside the range
    ({"from_seq": 9, "to_seq": 1000}, 9, SIZE),
])
def test_a_range_export_verifies_and_covers_the_range_asked_for(live_server, committed_ctx, auditor, params, first,
                                                                 last):
    tenant, token = auditor()
    vkey = published_key(live_server)
    lines = export(live_server, token, **params)
    manifest = json.loads(lines[0])
    assert (manifest["from_seq"], manifest["to_seq"]) == (first, last)
    assert bytes.fromhex(manifest["prev_chain_hash"]) == (
        chain_hash_at(committed_ctx, chain_for(tenant.id), first - 1) if first > 1 else chain.GENESIS)
    seqs = [json.loads(line)["seq"] for line in lines if json.loads(line)["kind"] == "entry"]
    assert seqs == list(range(first, last + 1))
    report = chain.verify_export(lines, vkeys=[vkey])
    assert report.ok and report.entries == last - first + 1 and report.verified_through == last, report.detail


@pytest.mark.parametrize("query", ["from_seq=0", "to_seq=-1", "from_seq=abc", "limit=5", "from_seq=9&to_seq=3"])
def test_a_bad_range_is_422(live_server, auditor, query):
    _, token = auditor()
    response = httpx.get(f"{live_server}/v1/audit/export?{query}", headers=bearer(token))
    assert_error(response, 422, "validation_error")


def test_a_key_without_audit_read_is_403_and_the_public_key_needs_no_key(live_server, committed_ctx, auditor):
    tenant, _ = auditor()
    token = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read,memory:write,review:decide",
                       actor=ACTOR).token
    for path in ("/v1/audit/export", "/v1/audit/checkpoints"):
        assert_error(httpx.get(f"{live_server}{path}", headers=bearer(token)), 403, "forbidden")
        assert_error(httpx.get(f"{live_server}{path}"), 401, "unauthorized")
    assert httpx.get(f"{live_server}/v1/audit/public-key").status_code == 200


def test_a_key_exports_and_lists_only_its_own_tenants_chain(live_server, auditor):
    (mine, my_token), (theirs, their_token) = auditor(), auditor()
    vkey = published_key(live_server)
    for tenant, token, other in ((mine, my_token, theirs), (theirs, their_token, mine)):
        lines = export(live_server, token)
        assert json.loads(lines[0])["chain_id"] == chain_for(tenant.id)
        for line in lines[1:]:
            obj = json.loads(line)
            if obj["kind"] == "entry":
                assert chain.parse_entry(base64.b64decode(obj["entry"], validate=True))["chain"] == chain_for(tenant.id)
            else:
                assert chain.parse_checkpoint(obj["note"]).origin.endswith("/" + chain_for(tenant.id))
        assert other.id not in "\n".join(lines)
        assert chain.verify_export(lines, vkeys=[vkey]).ok
        listed = httpx.get(f"{live_server}/v1/audit/checkpoints", headers=bearer(token)).json()
        assert listed["chain_id"] == chain_for(tenant.id)
        assert all(c["note"].startswith(f"memwarden.local/{chain_for(tenant.id)}\n") for c in listed["checkpoints"])


def test_checkpoints_are_signed_notes_that_verify_against_the_chain(live_server, committed_ctx, auditor):
    tenant, token = auditor()
    vkey = published_key(live_server)
    response = httpx.get(f"{live_server}/v1/audit/checkpoints", headers=bearer(token))
    assert response.status_code == 200
    body = assert_schema("audit-checkpoints.response", response.json())
    assert body["chain_id"] == chain_for(tenant.id) and body["vkey"] == vkey
    sizes = [c["size"] for c in body["checkpoints"]]
    assert sizes == list(CHECKPOINTS)
    origin = f"{committed_ctx.settings.audit_origin}/{chain_for(tenant.id)}"
    for listed in body["checkpoints"]:
        checkpoint = chain.verify_checkpoint(listed["note"], [vkey])  # raises unless signed by the key
        assert checkpoint.origin == origin and checkpoint.size == listed["size"]
        assert checkpoint.chain_head == chain_hash_at(committed_ctx, chain_for(tenant.id), checkpoint.size)
        assert listed["created_at"].endswith("Z")
    export(live_server, token)  # an export signs the chain's current state, which is then listed
    after = httpx.get(f"{live_server}/v1/audit/checkpoints", headers=bearer(token)).json()["checkpoints"]
    assert [c["size"] for c in after] == [*CHECKPOINTS, SIZE]


def test_openapi_describes_the_exports_409_for_a_broken_chain(live_server):
    doc = httpx.get(f"{live_server}/openapi.json").json()
    conflict = doc["paths"]["/v1/audit/export"]["get"]["responses"]["409"]
    schema = conflict["content"]["application/json"]["schema"]
    assert schema["$ref"].endswith("error.json") or schema["$ref"].endswith("/error"), schema
    codes = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]["properties"]["error"]["properties"]
    assert "audit_chain_broken" in codes["code"]["enum"]


def test_an_entry_whose_actor_names_no_kind_still_exports_and_verifies(live_server, committed_ctx, auditor):
    """Entries the router once wrote with `{"type": "system"}` for an actor: the row's column says
    "?:…" and the hashed entry has no kind; the export must still verify, not fail on the column."""
    tenant, token = auditor()
    with committed_ctx.db.sessions.begin() as session:
        committed_ctx.audit.append(session, tenant_id=tenant.id, event_type="backend.delivered",
                                   actor={"type": "system", "id": "backend-delivery"},
                                   subject={"type": "memory_delivery", "id": "mem_old"}, data={})
    with committed_ctx.db.sessions.begin() as session:
        committed_ctx.audit.checkpoint(session, chain_for(tenant.id))
    lines = export(live_server, token)
    report = chain.verify_export(lines, vkeys=[published_key(live_server)])
    assert report.ok, report.detail
    assert report.entries == SIZE + 1
