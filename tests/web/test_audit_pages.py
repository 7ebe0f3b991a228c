"""/audit: chain status for auditors and admins only, verify (intact → `verified`, tampered →
`broken`), JSONL export; both uses are themselves audited.

Verification and export read in their own REPEATABLE READ transactions, which cannot run inside
the rolled-back `ctx` fixture's outer transaction, so those tests use `committed_ctx` (real commits)
and fresh tenants and users."""

import json
import re

import pytest
from sqlalchemy import text
from starlette.testclient import TestClient

from app.core import auditchain
from app.db.database import make_engine
from app.main import create_app
from app.services.tenancy.apikeys import create_key
from app.services.tenancy.tenants import create_tenant
from app.services.tenancy.users import create_user
from tests.harness import csrf_token_in, unique, web_sign_in

PASSWORD = "correct horse battery"
ACTOR = {"kind": "test", "id": "t"}


_csrf = csrf_token_in


def _sign_in(client, username, password=PASSWORD):
    response = web_sign_in(client, username, password, "/audit")
    assert response.status_code == 303, response.text
    return response


def _status(html: str) -> str:
    return re.search(r'data-testid="audit-status" data-status="([a-z]+)">([^<]*)<', html).group(2)


@pytest.fixture
def committed_client(committed_ctx):
    with TestClient(create_app(committed_ctx.settings, ctx=committed_ctx), base_url="http://testserver") as client:
        yield client


@pytest.fixture
def chain(committed_ctx):
    """A fresh committed tenant with a few events and an auditor."""
    tenant = create_tenant(committed_ctx, name=unique("aud"), actor=ACTOR)
    auditor = create_user(committed_ctx, username=unique("auditor"), password=PASSWORD, tenant_id=tenant.id,
                          role="auditor", actor=ACTOR)
    for _ in range(3):
        create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read", actor=ACTOR)
    return tenant, auditor


def _events(ctx, tenant_id):
    with ctx.db.sessions() as session:
        return session.execute(text("SELECT event_type, actor FROM audit_entries WHERE chain_id = :c ORDER BY seq"),
                               {"c": f"tenant:{tenant_id}"}).all()


@pytest.mark.parametrize("role, allowed", [("viewer", False), ("reviewer", False), ("auditor", True), ("admin", True)])
def test_page_is_for_auditors_and_admins(client, ctx, tenant, role, allowed):
    create_user(ctx, username=f"{role}-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role=role, actor=ACTOR)
    _sign_in(client, f"{role}-{tenant.name}")
    page = client.get("/audit")
    assert page.status_code == (200 if allowed else 403)
    if allowed:
        for hook in ("audit-export", "audit-verify", "audit-status", "audit-vkey"):
            assert f'data-testid="{hook}"' in page.text
        assert _status(page.text) == "not checked yet"
        assert ctx.audit.vkey in page.text
        assert f'href="/audit/export?tenant={tenant.name}"' in page.text
    else:
        assert client.post("/audit/verify", data={"csrf_token": _csrf(client.get("/login").text)}).status_code == 403
        assert client.get("/audit/export").status_code == 403


def test_other_tenants_chain_is_refused(client, ctx, tenant, make_tenant):
    other = make_tenant()
    create_user(ctx, username=f"aud-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="auditor",
                actor=ACTOR)
    _sign_in(client, f"aud-{tenant.name}")
    assert client.get("/audit", params={"tenant": other.name}).status_code == 403
    assert client.get("/audit/export", params={"tenant": other.id}).status_code == 403


def test_signed_out_and_csrf_less_requests_are_refused(client, ctx, tenant):
    assert client.get("/audit", follow_redirects=False).status_code == 303
    create_user(ctx, username=f"aud-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="auditor",
                actor=ACTOR)
    _sign_in(client, f"aud-{tenant.name}")
    assert client.post("/audit/verify", data={}).status_code == 403
    assert client.post("/audit/verify", data={}, headers={"HX-Request": "true"}).status_code == 403


def test_status_shows_checkpoint_and_verify_says_verified(committed_client, committed_ctx, chain):
    tenant, auditor = chain
    _sign_in(committed_client, auditor.username)
    page = committed_client.get("/audit")
    assert re.search(r'data-testid="audit-entries">(\d+)<', page.text).group(1) == str(len(_events(committed_ctx, tenant.id)))

    fragment = committed_client.post("/audit/verify", data={"csrf_token": _csrf(page.text)},
                                     headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and "<html" not in fragment.text
    assert _status(fragment.text) == "verified"
    events = _events(committed_ctx, tenant.id)
    assert events[-1].event_type == "audit.verified" and events[-1].actor == f"user:{auditor.id}"

    # Without JavaScript the form posts and gets the whole page back; the export's fresh
    # checkpoint then shows as the latest one, note text and all.
    committed_client.get("/audit/export")
    full = committed_client.post("/audit/verify", data={"csrf_token": _csrf(page.text)})
    assert full.status_code == 200 and "<html" in full.text and _status(full.text) == "verified"
    note = re.search(r'data-testid="audit-checkpoint"[^>]*>([^<]+)</pre>', full.text).group(1)
    assert f"/tenant:{tenant.id}" in note and "\u2014" in note  # origin line and signature line


def test_tampering_shows_broken_with_the_first_bad_seq(committed_client, committed_ctx, chain):
    tenant, auditor = chain
    chain_id = f"tenant:{tenant.id}"
    _sign_in(committed_client, auditor.username)
    csrf = _csrf(committed_client.get("/audit").text)
    assert _status(committed_client.post("/audit/verify", data={"csrf_token": csrf}).text) == "verified"

    # As the table owner, in one transaction: lift the no-update trigger, rewrite entry 2, restore it.
    owner = make_engine(committed_ctx.settings.migration_database_url, pool_size=1)
    try:
        with owner.begin() as conn:
            conn.execute(text("ALTER TABLE audit_entries DISABLE TRIGGER audit_entries_no_update_delete"))
            changed = conn.execute(text(
                "UPDATE audit_entries SET entry = convert_to(replace(convert_from(entry, 'UTF8'), '\"t\"', '\"x\"'),"
                " 'UTF8') WHERE chain_id = :c AND seq = 2"), {"c": chain_id}).rowcount
            conn.execute(text("ALTER TABLE audit_entries ENABLE ALWAYS TRIGGER audit_entries_no_update_delete"))
    finally:
        owner.dispose()
    assert changed == 1

    result = committed_client.post("/audit/verify", data={"csrf_token": csrf}, headers={"HX-Request": "true"})
    assert result.status_code == 200 and _status(result.text) == "broken"
    assert re.search(r'data-testid="audit-first-bad-seq">(\d+)<', result.text).group(1) == "2"
    assert 'data-testid="audit-reason"' in result.text
    last = _events(committed_ctx, tenant.id)[-1]
    assert last.event_type == "audit.verified"


def test_export_downloads_valid_jsonl_and_is_audited(committed_client, committed_ctx, chain):
    tenant, auditor = chain
    _sign_in(committed_client, auditor.username)
    before = len(_events(committed_ctx, tenant.id))
    response = committed_client.get("/audit/export", params={"tenant": tenant.name})
    assert response.status_code == 200
    assert response.headers["content-disposition"].startswith("attachment;")
    assert response.headers["content-type"].startswith("application/x-ndjson")
    lines = response.text.splitlines()
    records = [json.loads(line) for line in lines]
    assert records[0]["kind"] == "manifest" and records[0]["chain_id"] == f"tenant:{tenant.id}"
    assert records[0]["to_seq"] == before
    report = auditchain.verify_export(lines, [committed_ctx.audit.vkey])
    assert report.ok and report.entries == before and report.checkpoints_verified >= 1
    events = _events(committed_ctx, tenant.id)
    assert len(events) == before + 1 and events[-1].event_type == "audit.exported"


def test_admin_with_several_tenants_picks_the_chain(committed_client, committed_ctx, chain):
    from app.services.tenancy.users import set_role

    tenant, auditor = chain
    second = create_tenant(committed_ctx, name=unique("aud"), actor=ACTOR)
    set_role(committed_ctx, user_id=auditor.id, tenant_id=second.id, role="admin", actor=ACTOR)
    _sign_in(committed_client, auditor.username)
    page = committed_client.get("/audit", params={"tenant": second.name})
    assert page.status_code == 200 and 'id="audit-tenant"' in page.text and f"tenant:{second.id}" in page.text
    export = committed_client.get("/audit/export", params={"tenant": second.name})
    assert json.loads(export.text.splitlines()[0])["chain_id"] == f"tenant:{second.id}"
