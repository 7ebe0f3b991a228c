"""Memory rows changed behind the audit log's back, as the database owner, under a live `serve`:
each attack is reported by `GET /v1/audit/state-check` and by `memwarden audit
verify --tenant T --state` (exit 1) with the memory's id, the audit seq whose state it should hold
and a reason; with `MEMWARDEN_INTEGRITY_FAIL_CLOSED` the row is not served (409
`integrity_mismatch`); and the server's periodic check raises `integrity.mismatch` (event, webhook,
admin banner). An untouched tenant checks intact, so the check can pass as well as fail."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy import create_engine, text

from app.core.ids import new_id
from app.services.events import events
from app.services.tenancy.apikeys import create_key
from app.services.tenancy.tenant_config import set_policy
from app.services.tenancy.tenants import create_tenant
from app.services.tenancy.users import create_user
from tests.harness import bearer, csrf_token_in, start_server, stop_server, unique
from tests.http_receiver import Receiver
from tests.integration.test_audit_tamper import cli

ACTOR = {"kind": "test", "id": "state-check-suite"}
PASSWORD = "correct horse battery"
AGENT = "state-agent"


@pytest.fixture(scope="module")
def server(settings):
    """`serve` failing closed, with the periodic state check every 2 s."""
    proc, base_url = start_server(settings, MEMWARDEN_INTEGRITY_FAIL_CLOSED="1",
                                  MEMWARDEN_STATE_CHECK_INTERVAL_SECONDS="2")
    yield base_url
    stop_server(proc)


@pytest.fixture(scope="module")
def owner(settings):
    engine = create_engine(settings.migration_database_url)
    yield engine
    engine.dispose()


@dataclass
class Tenant:
    id: str
    name: str
    token: str
    admin: str
    live: list[str]
    pending: str
    forgotten: str


def post(base_url: str, tenant: Tenant, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{base_url}{path}", json=body, headers=bearer(tenant.token), timeout=60)


@pytest.fixture
def tenant(committed_ctx, server) -> Tenant:
    """Two live memories, one pending review and one forgotten, all written through the live server."""
    made = create_tenant(committed_ctx, name=unique("state"), actor=ACTOR)
    set_policy(committed_ctx, tenant_id=made.id, doc={"rules": []}, actor=ACTOR)
    token = create_key(committed_ctx, tenant_id=made.id, actor=ACTOR,
                       scopes="memory:read,memory:write,audit:read,events:read").token
    admin = unique("admin")
    create_user(committed_ctx, username=admin, password=PASSWORD, tenant_id=made.id, role="admin", actor=ACTOR)
    t = Tenant(made.id, made.name, token, admin, [], "", "")

    def remember(content: str, **extra) -> dict:
        response = post(server, t, "/v1/memories/remember",
                        {"agent_id": AGENT, "type": "semantic", "content": content, **extra})
        assert response.status_code in (201, 202), response.text
        return response.json()

    t.live = [remember("Dana's manager is Priya.", metadata={"team": "ops"})["id"],
              remember("Dana's badge opens the lab.")["id"]]
    t.pending = remember("Dana may approve refunds.", approval_required=True)["id"]
    t.forgotten = remember("Dana's old desk was 4B.")["id"]
    assert post(server, t, "/v1/memories/forget", {"agent_id": AGENT, "ids": [t.forgotten]}).status_code == 200
    return t


def state_check(base_url: str, tenant: Tenant) -> dict:
    response = httpx.get(f"{base_url}/v1/audit/state-check", headers=bearer(tenant.token), timeout=120)
    assert response.status_code == 200, response.text
    return response.json()


def cli_state(settings, tenant: Tenant) -> tuple[int, dict]:
    done = cli(settings, "verify", "--tenant", tenant.name, "--state", "--json")
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


def latest_seq(owner, memory_id: str) -> int | None:
    with owner.connect() as conn:
        return conn.scalar(text("SELECT max(seq) FROM audit_entries WHERE subject_type = 'memory' AND subject_id = :m"),
                           {"m": memory_id})


def test_an_untouched_tenant_is_intact(settings, server, tenant):
    report = state_check(server, tenant)
    assert (report["status"], report["checked"], report["mismatch_count"]) == ("intact", 4, 0), report
    code, payload = cli_state(settings, tenant)
    assert code == 0 and payload["status"] == "intact" and payload["state"]["status"] == "intact", payload
    for memory_id in tenant.live:
        assert httpx.get(f"{server}/v1/memories/{memory_id}", headers=bearer(tenant.token), timeout=60).status_code == 200


# Each attack: the SQL (run as the database owner), then {memory: reason} the check must report.
ATTACKS = {
    "update_content": ("UPDATE memories SET content = 'Dana may wire funds to any account.' WHERE id = :a",
                       {"a": "content_changed"}),
    "update_metadata": ("UPDATE memories SET metadata = '{\"team\": \"finance\", \"trusted\": true}' WHERE id = :a",
                        {"a": "state_changed"}),
    "pending_to_live": ("UPDATE memories SET status = 'live', live_from = now(), change_id = NULL WHERE id = :p",
                        {"p": "status_changed"}),
    "forgotten_to_live": ("UPDATE memories SET status = 'live', ended_at = NULL WHERE id = :f",
                          {"f": "status_changed"}),
    "insert_unremembered": ("INSERT INTO memories (id, tenant_id, agent_id, type, content, status, live_from, digest_key)"
                            " VALUES (:new, :tenant, :agent, 'semantic', 'Dana is cleared for root access.', 'live',"
                            " now(), decode(md5(random()::text) || md5(random()::text), 'hex'))", {"new": "no_audit_event"}),
    "swap_contents": ("UPDATE memories SET content = CASE id WHEN :a THEN (SELECT content FROM memories WHERE id = :b)"
                      " ELSE (SELECT content FROM memories WHERE id = :a) END WHERE id IN (:a, :b)",
                      {"a": "content_changed", "b": "content_changed"}),
    "delete_row": ("DELETE FROM memories WHERE id = :a", {"a": "row_missing"}),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_each_attack_is_reported_and_not_served(settings, server, owner, tenant, attack):
    sql, expected = ATTACKS[attack]
    names = {"a": tenant.live[0], "b": tenant.live[1], "p": tenant.pending, "f": tenant.forgotten,
             "new": new_id("mem")}
    seqs = {name: latest_seq(owner, memory_id) for name, memory_id in names.items()}
    with owner.begin() as conn:
        conn.execute(text(sql), {**names, "tenant": tenant.id, "agent": AGENT})

    report = state_check(server, tenant)
    assert report["status"] == "mismatch", report
    found = {m["memory_id"]: m for m in report["mismatches"]}
    assert {m: r["reason"] for m, r in found.items()} == {names[n]: reason for n, reason in expected.items()}, report
    for name in expected:
        assert found[names[name]]["expected_seq"] == seqs[name]  # None for the row nothing ever wrote
    if attack == "pending_to_live":
        assert (found[names["p"]]["audited_status"], found[names["p"]]["status"]) == ("pending", "live")
    if attack == "forgotten_to_live":
        assert (found[names["f"]]["audited_status"], found[names["f"]]["status"]) == ("forgotten", "live")
    if attack == "delete_row":
        assert (found[names["a"]]["audited_status"], found[names["a"]]["status"]) == ("live", None)
    assert "Dana" not in json.dumps(report)  # ids and reasons, never content

    code, payload = cli_state(settings, tenant)
    assert code == 1 and payload["status"] == "intact" and payload["state"]["status"] == "mismatch", payload
    assert {m["memory_id"] for m in payload["state"]["mismatches"]} == set(found)

    # Fail closed: no read serves a tampered row (a deleted one is simply gone).
    headers = bearer(tenant.token)
    for name in expected:
        got = httpx.get(f"{server}/v1/memories/{names[name]}", headers=headers, timeout=60)
        if attack == "delete_row":
            assert got.status_code == 404, got.text
            continue
        assert got.status_code == 409, got.text
        error = got.json()["error"]
        assert error["code"] == "integrity_mismatch" and error["details"]["memory_id"] == names[name], error
        assert error["details"]["expected_seq"] == seqs[name]
    if attack != "delete_row":
        listed = httpx.get(f"{server}/v1/memories", params={"agent_id": AGENT}, headers=headers, timeout=60)
        assert listed.status_code == 409 and listed.json()["error"]["code"] == "integrity_mismatch", listed.text
        recalled = post(server, tenant, "/v1/memories/recall", {"agent_id": AGENT, "query": "Dana", "min_score": -1})
        assert recalled.status_code == 409 and recalled.json()["error"]["code"] == "integrity_mismatch", recalled.text


def test_the_periodic_check_raises_an_event_a_webhook_and_a_banner(committed_ctx, server, owner, tenant):
    receiver = Receiver()
    try:
        hook = post(server, tenant, "/v1/webhooks", {"url": receiver.url, "events": ["integrity.mismatch"]})
        assert hook.status_code == 201, hook.text
        with owner.begin() as conn:  # no read touches it: only the server's periodic round can find it
            conn.execute(text("UPDATE memories SET content = 'Dana owns the vault.' WHERE id = :a"),
                         {"a": tenant.live[1]})
        deadline, found = time.monotonic() + 60, []
        while not (found and receiver.requests) and time.monotonic() < deadline:
            found = [e for e in events.read_after(committed_ctx.db.sessions, tenant.id, 0, 1000)
                     if e.type == "integrity.mismatch"]
            time.sleep(0.3)
        assert [e.payload for e in found] == [{"memoryId": tenant.live[1], "expectedSeq": latest_seq(owner, tenant.live[1]),
                                               "reason": "content_changed", "mismatches": 1,
                                               "detectedBy": "periodic"}]
        assert receiver.requests, "no webhook delivered"
        delivered = json.loads(receiver.requests[0][1])
        assert delivered["type"] == "integrity.mismatch" and delivered["data"]["memoryId"] == tenant.live[1], delivered
    finally:
        receiver.close()
    time.sleep(2.5)  # another round: the alarm stays one alarm, announced once
    assert len([e for e in events.read_after(committed_ctx.db.sessions, tenant.id, 0, 1000)
                if e.type == "integrity.mismatch"]) == 1

    with httpx.Client(base_url=server, timeout=60) as browser:
        login = browser.get("/login")
        signed_in = browser.post("/login", data={"username": tenant.admin, "password": PASSWORD, "next": "/review",
                                                 "csrf_token": csrf_token_in(login.text)})
        assert signed_in.status_code in (200, 303), signed_in.text[:500]
        page = browser.get("/review").text
    assert 'data-testid="integrity-alarm"' in page and tenant.live[1] in page and "content_changed" in page

    with owner.begin() as conn:  # repaired: the next round finds the tenant intact and clears the alarm
        conn.execute(text("UPDATE memories SET content = 'Dana''s badge opens the lab.' WHERE id = :a"),
                     {"a": tenant.live[1]})
    deadline, open_alarms = time.monotonic() + 30, 1
    while open_alarms and time.monotonic() < deadline:
        time.sleep(0.5)
        with owner.connect() as conn:
            open_alarms = conn.scalar(text("SELECT count(*) FROM integrity_alarms WHERE tenant_id = :t"
                                           " AND cleared_at IS NULL"), {"t": tenant.id})
    assert open_alarms == 0


def test_the_cli_baseline_vouches_for_nothing_already_bound_and_state_needs_a_tenant(settings, server, tenant):
    done = cli(settings, "baseline-state", "--tenant", tenant.name)
    assert done.returncode == 0 and "baselined 0 memories" in done.stdout, done.stderr[-2000:]
    done = cli(settings, "verify", "--state")
    assert done.returncode == 2 and "--state needs --tenant" in done.stderr
    done = cli(settings, "verify", "--tenant", tenant.name, "--state")
    assert done.returncode == 0 and "state intact: 4 memories" in done.stdout, done.stdout
