"""Every path that changes a memory records the state it leaves in the audit entry it writes, so
the state check (`GET /v1/audit/state-check`) finds an untouched tenant intact after each of them,
and finds a row changed behind its back. In-process (the tests' rolled-back transaction); the
attacks as the database owner against a live `serve` are in tests/integration/test_state_check.py."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from app.core.ids import new_id
from app.services.memory import compaction
from app.services.audit import state_check as integrity
from app.services.transfer.importer import import_bytes
from app.services.tenancy.tenant_config import set_policy
from tests.harness import bearer
from tests.schema_check import assert_error, assert_schema

ADMIN = {"kind": "test", "id": "pytest"}


@pytest.fixture
def agent(ctx, tenant, make_key):
    set_policy(ctx, tenant_id=tenant.id, doc={"rules": []}, actor=ADMIN)
    return bearer(make_key())


@pytest.fixture
def auditor(make_key):
    return bearer(make_key(scopes="audit:read"))


@pytest.fixture
def reviewer(make_key):
    return bearer(make_key(scopes="review:decide,memory:read"))


def remember(client, headers, content, status=201, **extra):
    body = {"agent_id": "agent-a", "type": extra.pop("type", "semantic"), "content": content, **extra}
    response = client.post("/v1/memories/remember", json=body, headers=headers)
    assert response.status_code == status, response.text
    return response.json()


def state_check(client, auditor):
    response = client.get("/v1/audit/state-check", headers=auditor)
    assert response.status_code == 200, response.text
    return assert_schema("state-check.response", response.json())


def assert_intact(client, auditor, at_least: int):
    report = state_check(client, auditor)
    assert report["status"] == "intact", report["mismatches"]
    assert report["checked"] >= at_least and report["mismatch_count"] == 0


def test_every_write_path_leaves_the_tenant_intact(client, ctx, tenant, agent, auditor, reviewer):
    plain = remember(client, agent, "Ana drinks her coffee black.", tags=["food"], metadata={"n": 1.0, "big": 1e20},
                     confidence=0.9, expires_at="2099-01-01T00:00:00Z")["id"]
    soft = remember(client, agent, "Ana's locker code changes monthly.")["id"]
    hard = remember(client, agent, "Ana's old phone number was private.")["id"]
    assert client.post("/v1/memories/forget", json={"agent_id": "agent-a", "ids": [soft]}, headers=agent).status_code == 200
    assert client.post("/v1/memories/forget", json={"agent_id": "agent-a", "ids": [hard], "hard_delete": True},
                       headers=agent).status_code == 200
    canonical = remember(client, agent, "Ana lives in Porto.", confidence=0.7)["id"]
    duplicate = remember(client, agent, "Ana lives in Porto, Portugal.", confidence=0.95)["id"]
    merged = client.post("/v1/memories/merge", json={"agent_id": "agent-a", "canonical": canonical,
                                                      "duplicates": [duplicate], "strategy": "merge_content"},
                         headers=agent)
    assert merged.status_code == 200, merged.text
    for action in ("demote", "archive", "forget"):
        target = remember(client, agent, f"Ana's {action} candidate fact.", type="episodic", confidence=0.1)["id"]
        done = client.post("/v1/memories/expire", json={"agent_id": "agent-a", "policy": {"confidence_below": 0.2},
                                                         "action": action}, headers=agent)
        assert done.status_code == 200 and target in done.json()["affected"], done.text
    assert client.delete(f"/v1/memories/{plain}", headers=agent).status_code == 200

    staged = [remember(client, agent, f"Ana staged fact {n}.", status=202, approval_required=True) for n in range(6)]
    approve = lambda s, **body: client.post(f"/v1/changes/{s['change_id']}/approve", json=body, headers=reviewer)  # noqa: E731
    assert approve(staged[0]).status_code == 200  # the plain approval's one-statement path
    # keep_both: the model may read "fact 1" as replacing "fact 0", which the supersede below names itself.
    assert approve(staged[1], edits={"content": "Ana staged fact 1, edited.", "tags": ["x"]},
                   keep_both=True).status_code == 200
    assert approve(staged[2], merge_into=canonical).status_code == 200
    assert approve(staged[3], supersedes=staged[0]["id"]).status_code == 200
    rejected = client.post(f"/v1/changes/{staged[4]['change_id']}/reject", json={"reason": "wrong"}, headers=reviewer)
    assert rejected.status_code == 200, rejected.text
    assert client.post(f"/v1/changes/{staged[5]['change_id']}/withdraw", headers=agent).status_code == 200

    for text_ in ("The user prefers dark mode in the code editor.", "The user prefers the dark mode in the code editor."):
        remember(client, agent, text_, agent_id="agent-c")
    assert compaction.compact_tenant(ctx, tenant.id, similarity=0.85)["compacted"] >= 1
    lines = [json.dumps({"id": new_id("mem"), "agent_id": "agent-i", "type": "semantic",
                         "content": f"Imported fact {n}.", "status": status})
             for n, status in enumerate(("live", "forgotten", "pending"))]
    report = import_bytes(ctx, tenant_id=tenant.id, data="\n".join(lines).encode(), actor=ADMIN)
    assert report.ok, report.problems

    assert_intact(client, auditor, at_least=19)  # every row written above


def test_a_row_changed_behind_the_log_is_reported_with_its_seq_and_reason(client, ctx, tenant, agent, auditor):
    ids = [remember(client, agent, f"Ben fact {n}.")["id"] for n in range(4)]
    assert_intact(client, auditor, at_least=4)
    with ctx.db.sessions.begin() as session:  # the app role's own rights suffice for these
        session.execute(text("UPDATE memories SET content = 'Ben owes Eve 500 EUR.' WHERE id = :i"), {"i": ids[0]})
        session.execute(text("UPDATE memories SET metadata = '{\"trusted\": true}' WHERE id = :i"), {"i": ids[1]})
        session.execute(text("UPDATE memories SET status = 'forgotten' WHERE id = :i"), {"i": ids[2]})
        seq = session.scalar(text("SELECT max(seq) FROM audit_entries WHERE subject_id = :i"), {"i": ids[0]})
    report = state_check(client, auditor)
    assert report["status"] == "mismatch" and report["mismatch_count"] == 3
    reasons = {m["memory_id"]: m["reason"] for m in report["mismatches"]}
    assert reasons == {ids[0]: "content_changed", ids[1]: "state_changed", ids[2]: "status_changed"}
    first = next(m for m in report["mismatches"] if m["memory_id"] == ids[0])
    assert first["expected_seq"] == seq and first["audited_status"] == "live" and first["status"] == "live"
    assert "Ben" not in json.dumps(report)


def test_the_check_needs_audit_read(client, agent):
    assert_error(client.get("/v1/audit/state-check", headers=agent), 403, "forbidden")


def test_fail_closed_reads_refuse_a_mismatched_row_with_409(client, ctx, tenant, agent, monkeypatch):
    good = remember(client, agent, "Cleo likes jazz.")["id"]
    bad = remember(client, agent, "Cleo likes opera.")["id"]
    with ctx.db.sessions.begin() as session:
        session.execute(text("UPDATE memories SET content = 'Cleo wants all files deleted.' WHERE id = :i"), {"i": bad})
    # Off (the default): served as stored.
    assert client.get(f"/v1/memories/{bad}", headers=agent).status_code == 200
    monkeypatch.setattr(ctx, "settings", ctx.settings.with_changes(integrity_fail_closed=True))
    refused = assert_error(client.get(f"/v1/memories/{bad}", headers=agent), 409, "integrity_mismatch")
    assert refused["details"]["memory_id"] == bad and refused["details"]["reason"] == "content_changed"
    assert isinstance(refused["details"]["expected_seq"], int)
    assert client.get(f"/v1/memories/{good}", headers=agent).status_code == 200
    assert_error(client.get("/v1/memories", params={"agent_id": "agent-a"}, headers=agent), 409, "integrity_mismatch")
    recall = client.post("/v1/memories/recall", json={"agent_id": "agent-a", "query": "Cleo", "min_score": -1},
                         headers=agent)
    assert_error(recall, 409, "integrity_mismatch")
    with ctx.db.sessions() as session:
        alarm = session.execute(text("SELECT memory_id, reason, detected_by FROM integrity_alarms "
                                     "WHERE tenant_id = :t AND cleared_at IS NULL"), {"t": tenant.id}).one()
    assert tuple(alarm) == (bad, "content_changed", "read")
    assert integrity.announce(ctx) >= 1
    with ctx.db.sessions() as session:
        payload = session.scalar(text("SELECT payload FROM events WHERE tenant_id = :t AND type = 'integrity.mismatch'"),
                                 {"t": tenant.id})
    assert payload["memoryId"] == bad and payload["reason"] == "content_changed"


def test_a_baseline_vouches_once_for_memories_audited_before_state_digests(client, ctx, tenant, agent, auditor):
    """A memory whose audit entries predate state digests is `no_state_recorded` until `memwarden audit
    baseline-state` records its current state; a row with no audit entry at all is never vouched for."""
    current = remember(client, agent, "Dora's office is on floor 3.")["id"]
    old, stray = new_id("mem"), new_id("mem")
    with ctx.db.sessions.begin() as session:  # what a remember wrote before migration 0023: no `state`
        for memory_id in (old, stray):
            session.execute(text(
                "INSERT INTO memories (id, tenant_id, agent_id, type, content, status, live_from, digest_key)"
                " VALUES (:id, :t, 'agent-a', 'semantic', 'Dora likes tea.', 'live', now(), :k)"),
                {"id": memory_id, "t": tenant.id, "k": b"k" * 32})
        ctx.audit.append(session, tenant_id=tenant.id, event_type="memory.remembered", actor=ADMIN,
                         subject={"type": "memory", "id": old}, data={"agent_id": "agent-a"})
    reasons = {m["memory_id"]: m["reason"] for m in state_check(client, auditor)["mismatches"]}
    assert reasons == {old: "no_state_recorded", stray: "no_audit_event"}

    assert integrity.baseline(ctx, tenant.id, actor=ADMIN) == 1
    reasons = {m["memory_id"]: m["reason"] for m in state_check(client, auditor)["mismatches"]}
    assert reasons == {stray: "no_audit_event"}  # the baselined memory and the current one are intact
    assert current not in reasons
    assert integrity.baseline(ctx, tenant.id, actor=ADMIN) == 0  # once: nothing left to vouch for
    with ctx.db.sessions() as session:
        types = session.scalars(text("SELECT event_type FROM audit_entries WHERE subject_id = :m ORDER BY seq"),
                                {"m": old}).all()
    assert types == ["memory.remembered", "memory.state_baseline"]
