"""A chain broken anywhere, not only at its head, closes its tenant to writes.

Each case builds a committed tenant chain of 32 entries with signed checkpoints at 10 and 20 (so
seq 5, 12 and 15 lie under a signature and 25 in the unsigned tail), breaks it mid-chain as the
database owner (the helpers of `test_audit_tamper`), lets something detect it — the real `memwarden
audit verify --tenant`, a checkpoint, an export, the periodic verification — and then requires
every write to that tenant, on the live server, to be 409 `audit_chain_broken` and to change
nothing, until the chain is repaired and `memwarden audit clear-alarm` clears the alarm.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy import func, select, text

from app.db.models import AuditEntry, Memory
from app.errors import AuditChainBroken
from app.services.events import events
from app.services.tenancy.apikeys import create_key
from app.services.audit.audit import chain_for
from app.services.tenancy.tenant_config import set_policy
from app.services.tenancy.tenants import create_tenant
from app.services.tenancy.users import create_user
from tests.harness import bearer, csrf_token_in, unique
from tests.integration.test_audit_tamper import (cli, edited, move_seq, owner, row, set_row,  # noqa: F401 (fixture)
                                                 tampering)
from tests.integration.test_mcp_live import call

ACTOR = {"kind": "test", "id": "chain-alarm-suite"}
N = 30
CHECKPOINTS = (10, 20)
PASSWORD = "correct horse battery"


@dataclass(frozen=True)
class Tenant:
    id: str
    name: str
    token: str
    admin: str
    viewer: str

    @property
    def chain_id(self) -> str:
        return chain_for(self.id)


def _event(ctx, tenant_id: str, n: int) -> None:
    with ctx.db.sessions.begin() as session:
        ctx.audit.append(session, tenant_id=tenant_id, event_type="test.event", actor=ACTOR,
                         subject={"type": "memory", "id": f"mem_{n:04d}"}, data={"n": n})


def size(ctx, chain_id: str) -> int:
    with ctx.db.sessions() as session:
        return session.scalar(select(func.coalesce(func.max(AuditEntry.seq), 0)).where(AuditEntry.chain_id == chain_id))


def memories(ctx, tenant_id: str) -> int:
    with ctx.db.sessions() as session:
        return session.scalar(select(func.count()).select_from(Memory).where(Memory.tenant_id == tenant_id))


def alarm(ctx, chain_id: str):
    """The chain's open alarm row (migration 0019), or None."""
    with ctx.db.sessions() as session:
        return session.execute(text("SELECT first_bad_seq, reason FROM audit_chain_alarms"
                                    " WHERE chain_id = :c AND cleared_at IS NULL"), {"c": chain_id}).first()


@pytest.fixture
def tenant(committed_ctx) -> Tenant:
    """A tenant that writes live (no review policy) with an API key, `test.event` entries (data
    `{"n": seq}`) up to seq 30, signed at 10 and 20, then an admin and a viewer (seq 31, 32)."""
    ctx = committed_ctx
    made = create_tenant(ctx, name=unique("alarm"), actor=ACTOR)
    set_policy(ctx, tenant_id=made.id, doc={"rules": []}, actor=ACTOR)
    token = create_key(ctx, tenant_id=made.id, scopes="memory:read,memory:write,audit:read,events:read",
                       actor=ACTOR).token
    chain_id = chain_for(made.id)
    assert size(ctx, chain_id) < 5  # every tampered seq below is a test.event
    for n in range(size(ctx, chain_id) + 1, N + 1):
        _event(ctx, made.id, n)
        if n in CHECKPOINTS:
            with ctx.db.sessions.begin() as session:
                ctx.audit.checkpoint(session, chain_id)
    admin, viewer = unique("admin"), unique("viewer")
    create_user(ctx, username=admin, password=PASSWORD, tenant_id=made.id, role="admin", actor=ACTOR)
    create_user(ctx, username=viewer, password=PASSWORD, tenant_id=made.id, role="viewer", actor=ACTOR)
    assert size(ctx, chain_id) == N + 2
    return Tenant(made.id, made.name, token, admin, viewer)


def tamper(owner, tenant: Tenant, how: str, seq: int) -> None:  # noqa: F811
    """Break the chain at `seq`: edit the entry's bytes, delete its row, or swap it with the next."""
    with tampering(owner) as conn:
        if how == "edit":
            set_row(conn, tenant.chain_id, seq, entry=edited(row(conn, tenant.chain_id, seq).entry, seq))
        elif how == "delete":
            conn.execute(text("DELETE FROM audit_entries WHERE chain_id = :c AND seq = :s"),
                         {"c": tenant.chain_id, "s": seq})
        else:
            move_seq(conn, tenant.chain_id, seq, 1_000_000 + seq)
            move_seq(conn, tenant.chain_id, seq + 1, seq)
            move_seq(conn, tenant.chain_id, 1_000_000 + seq, seq + 1)


def remember(base_url: str, tenant: Tenant, **headers: str) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/memories/remember", headers={**bearer(tenant.token), **headers}, timeout=60,
                      json={"agent_id": "alarm-agent", "type": "semantic", "content": "written on a broken chain"})


def assert_closed(ctx, base_url: str, tenant: Tenant, first_bad_seq: int) -> None:
    """Every write path refuses with 409 `audit_chain_broken` and changes nothing; reads still work."""
    entries, stored = size(ctx, tenant.chain_id), memories(ctx, tenant.id)
    for headers in ({}, {"Idempotency-Key": unique("idem")}):
        response = remember(base_url, tenant, **headers)
        assert response.status_code == 409, response.text
        error = response.json()["error"]
        assert error["code"] == "audit_chain_broken", error
        assert (error["details"]["chain_id"], error["details"]["first_bad_seq"]) == (tenant.chain_id, first_bad_seq)
    result = call(base_url, tenant.token, "remember", {"agent_id": "alarm-agent", "type": "semantic",
                                                        "content": "written over MCP on a broken chain"})
    assert result.is_error and json.loads(result.content[0].text)["error"]["code"] == "audit_chain_broken"
    assert (size(ctx, tenant.chain_id), memories(ctx, tenant.id)) == (entries, stored)
    listed = httpx.get(f"{base_url}/v1/memories", headers=bearer(tenant.token), params={"agent_id": "alarm-agent"},
                       timeout=60)
    assert listed.status_code == 200, listed.text  # reads keep working
    open_alarm = alarm(ctx, tenant.chain_id)
    assert open_alarm is not None and open_alarm.first_bad_seq == first_bad_seq, open_alarm
    assert open_alarm.reason == error["details"]["reason"]


def assert_export_refused(base_url: str, tenant: Tenant, first_bad_seq: int, reason: str | None = None) -> None:
    response = httpx.get(f"{base_url}/v1/audit/export", headers=bearer(tenant.token), timeout=60)
    assert response.status_code == 409, response.text[:500]
    error = response.json()["error"]
    assert error["code"] == "audit_chain_broken" and error["details"]["first_bad_seq"] == first_bad_seq, error
    if reason is not None:
        assert error["details"]["reason"] == reason, error


REASONS = {"edit": "leaf_hash_mismatch", "delete": "seq_mismatch", "swap": "seq_mismatch"}


@pytest.mark.parametrize("seq", [5, 12, 15, 25])
@pytest.mark.parametrize("how", ["edit", "delete", "swap"])
def test_a_mid_chain_break_found_by_a_verification_closes_the_tenant_to_writes(
        settings, committed_ctx, live_server, owner, tenant, how, seq):  # noqa: F811
    tamper(owner, tenant, how, seq)
    assert remember(live_server, tenant).status_code == 201  # not detected yet: only the head is checked
    written = memories(committed_ctx, tenant.id)
    done = cli(settings, "verify", "--tenant", tenant.name, "--json")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (done.returncode, report["first_bad_seq"], report["reason"]) == (1, seq, REASONS[how]), report
    assert_closed(committed_ctx, live_server, tenant, seq)
    assert memories(committed_ctx, tenant.id) == written
    assert_export_refused(live_server, tenant, seq)


@pytest.mark.parametrize("how", ["delete", "swap"])
def test_a_break_after_the_last_checkpoint_is_found_by_the_next_checkpoint(
        committed_ctx, live_server, owner, tenant, how):  # noqa: F811
    tamper(owner, tenant, how, 25)
    with pytest.raises(AuditChainBroken):
        with committed_ctx.db.sessions.begin() as session:
            committed_ctx.audit.checkpoint(session, tenant.chain_id)
    assert_closed(committed_ctx, live_server, tenant, 25)


def test_a_break_under_the_last_checkpoint_is_found_by_the_periodic_verification(
        committed_ctx, live_server, owner, tenant):  # noqa: F811
    tamper(owner, tenant, "edit", 12)
    with committed_ctx.db.sessions.begin() as session:  # a checkpoint reads rows from its last anchor on only
        committed_ctx.audit.checkpoint(session, tenant.chain_id)
    assert remember(live_server, tenant).status_code == 201  # so the append does not catch it
    from app.services.audit import audit_alarms

    assert audit_alarms.verify_chains(committed_ctx) >= 1  # the MEMWARDEN_AUDIT_VERIFY_INTERVAL_SECONDS round
    assert_closed(committed_ctx, live_server, tenant, 12)


@pytest.mark.parametrize("column, value, seq", [
    ("event_type", "'memory.forgotten'", 12),
    ("actor", "'api_key:key_innocent'", 25),
])
def test_an_export_refuses_an_edit_of_only_the_columns_it_serves(
        committed_ctx, live_server, owner, tenant, column, value, seq):  # noqa: F811
    with tampering(owner) as conn:
        conn.execute(text(f"UPDATE audit_entries SET {column} = {value} WHERE chain_id = :c AND seq = :s"),
                     {"c": tenant.chain_id, "s": seq})
    assert_export_refused(live_server, tenant, seq, "column_mismatch")
    assert_closed(committed_ctx, live_server, tenant, seq)


def test_the_alarm_is_an_event_and_a_banner_for_the_tenants_admins(settings, committed_ctx, live_server, owner,
                                                                     tenant):  # noqa: F811
    tamper(owner, tenant, "delete", 15)
    assert cli(settings, "verify", "--tenant", tenant.name, "--json").returncode == 1
    deadline, found = time.monotonic() + 30, []
    while not found and time.monotonic() < deadline:  # written by the server's background round
        found = [e for e in events.read_after(committed_ctx.db.sessions, tenant.id, 0, 1000)
                 if e.type == "audit.chain_broken"]
        time.sleep(0.2)
    assert [e.payload for e in found] == [{"chainId": tenant.chain_id, "firstBadSeq": 15, "reason": "seq_mismatch",
                                           "detectedBy": "verification"}]

    def page_as(username: str) -> str:
        with httpx.Client(base_url=live_server, timeout=60) as browser:
            login = browser.get("/login")
            signed_in = browser.post("/login", data={"username": username, "password": PASSWORD, "next": "/review",
                                                     "csrf_token": csrf_token_in(login.text)})
            assert signed_in.status_code in (200, 303), signed_in.text[:500]  # sign-in works on a closed chain
            page = browser.get("/review")
            assert page.status_code == 200
            return page.text

    banner = page_as(tenant.admin)
    assert 'data-testid="audit-alarm"' in banner and tenant.name in banner and "seq_mismatch" in banner
    assert 'data-testid="audit-alarm"' not in page_as(tenant.viewer)
    with committed_ctx.db.sessions() as session:  # the closed chain could not take the sign-ins: the system chain did
        diverted = session.execute(select(AuditEntry.event_type).where(
            AuditEntry.chain_id == "system", AuditEntry.event_type == "auth.signed_in",
            AuditEntry.entry.contains(tenant.id.encode()))).all()
    assert len(diverted) == 2


def test_clear_alarm_refuses_while_broken_and_clears_after_the_repair(settings, committed_ctx, live_server, owner,
                                                                      tenant):  # noqa: F811
    with owner.connect() as conn:
        original = row(conn, tenant.chain_id, 15)
    tamper(owner, tenant, "edit", 15)
    assert cli(settings, "clear-alarm", "--tenant", tenant.name).returncode == 2  # nothing to clear yet
    assert cli(settings, "verify", "--tenant", tenant.name, "--json").returncode == 1
    refused = cli(settings, "clear-alarm", "--tenant", tenant.name)
    assert refused.returncode == 1 and "first bad seq 15" in refused.stderr, refused.stderr[-2000:]
    assert_closed(committed_ctx, live_server, tenant, 15)

    with tampering(owner) as conn:  # the operator restores the row from a backup
        set_row(conn, tenant.chain_id, 15, entry=original.entry)
    cleared = cli(settings, "clear-alarm", "--tenant", tenant.name)
    assert cleared.returncode == 0, cleared.stderr[-2000:]
    assert alarm(committed_ctx, tenant.chain_id) is None
    assert remember(live_server, tenant).status_code == 201
    with committed_ctx.db.sessions() as session:
        types = session.scalars(select(AuditEntry.event_type).where(AuditEntry.chain_id == tenant.chain_id)
                                .order_by(AuditEntry.seq.desc()).limit(2)).all()
    assert types == ["memory.remembered", "audit.alarm_cleared"]
    assert cli(settings, "verify", "--tenant", tenant.name, "--json").returncode == 0


def test_review_decisions_and_workspace_writes_are_refused_too(settings, committed_ctx, live_server, owner):  # noqa: F811
    """The refusal sits in the audit append every write makes, so paths other than remember keep to it."""
    made = create_tenant(committed_ctx, name=unique("alarm-paths"), actor=ACTOR)
    token = create_key(committed_ctx, tenant_id=made.id, actor=ACTOR,
                       scopes="memory:read,memory:write,workspace:read,workspace:write").token
    # Another key decides: the writing key is the change's author and never decides it.
    reviewer = create_key(committed_ctx, tenant_id=made.id, actor=ACTOR, scopes="review:decide,memory:read").token
    staged = httpx.post(f"{live_server}/v1/memories/remember", headers=bearer(token), timeout=60, json={
        "agent_id": "alarm-agent", "type": "semantic", "content": "waits for review", "approval_required": True})
    assert staged.status_code == 202, staged.text
    change_id = staged.json()["change_id"]
    for n in range(size(committed_ctx, chain_for(made.id)) + 1, 8):
        _event(committed_ctx, made.id, n)
    with tampering(owner) as conn:
        conn.execute(text("DELETE FROM audit_entries WHERE chain_id = :c AND seq = 5"), {"c": chain_for(made.id)})
    assert cli(settings, "verify", "--tenant", made.name, "--json").returncode == 1
    entries, stored = size(committed_ctx, chain_for(made.id)), memories(committed_ctx, made.id)  # the pending one

    approved = httpx.post(f"{live_server}/v1/changes/{change_id}/approve", headers=bearer(reviewer), json={},
                          timeout=60)
    assert approved.status_code == 409 and approved.json()["error"]["code"] == "audit_chain_broken", approved.text
    change = httpx.get(f"{live_server}/v1/changes/{change_id}", headers=bearer(token), timeout=60)
    assert change.status_code == 200 and change.json()["status"] == "pending", change.text
    put = httpx.put(f"{live_server}/v1/host/workspace/files/notes/plan.md", headers=bearer(token), timeout=60,
                    json={"content": "# a plan"})
    # The workspace is an OpenWOP surface: OpenWOP's envelope, our code as a vendor code.
    assert put.status_code == 409 and put.json()["error"] == "memwarden.audit_chain_broken", put.text
    assert (size(committed_ctx, chain_for(made.id)), memories(committed_ctx, made.id)) == (entries, stored)
