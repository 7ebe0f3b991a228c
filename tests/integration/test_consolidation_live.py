"""Consolidation against real processes: the API route on a live server (tenant-isolated, its event
content-free on `/v1/events`), `memwarden consolidate --dry-run` changing nothing, a `kill -9` of
a real `memwarden consolidate` mid-run then a rerun that loses and doubles nothing, and the
schedule run by a live server's background job at the tenant's own interval."""

import json
import os
import signal
import subprocess
import sys
import time

import httpx
from sqlalchemy import text

from app.services.memory import consolidation
from app.services.tenancy.apikeys import create_key
from app.services.tenancy.tenants import create_tenant
from tests.consolidation_data import (
    NOISE,
    VEGETARIAN,
    preference_and_noise,
    write_notes,
)
from tests.harness import PROJECT_ROOT, server_env, start_server, stop_server, unique
from tests.sse import parse_sse

ADMIN = {"kind": "test", "id": "pytest"}
WINDOWS = 16
KILL_AFTER = 4


def _key(ctx, tenant_id, scopes):
    return {"Authorization": "Bearer " + create_key(ctx, tenant_id=tenant_id, scopes=scopes, agents="*",
                                                    actor=ADMIN).token}


def _cli(settings, *args):
    done = subprocess.run([sys.executable, "-m", "app.cli", "consolidate", *args], cwd=PROJECT_ROOT, check=False,
                          env=server_env(settings), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _scalar(ctx, sql, **params):
    with ctx.db.sessions() as session:
        return session.execute(text(sql), params).scalar()


def _snapshot(ctx, tenant_id):
    with ctx.db.sessions() as session:
        memories = session.execute(text("SELECT id, status, updated_at, content FROM memories WHERE tenant_id = :t "
                                        "ORDER BY id"), {"t": tenant_id}).all()
        counts = {table: session.execute(text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t"),
                                         {"t": tenant_id}).scalar()
                  for table in ("changes", "events", "consolidation_claims", "audit_entries")}
    return memories, counts


def test_the_api_route_on_a_live_server_is_tenant_isolated_and_its_event_content_free(live_server, committed_ctx):
    ctx = committed_ctx
    tenant = create_tenant(ctx, name=unique("cons"), actor=ADMIN)
    other = create_tenant(ctx, name=unique("cons"), actor=ADMIN)
    evidence, noise = preference_and_noise(ctx, tenant.id)
    preference_and_noise(ctx, other.id)
    consolidation.set_config(ctx, tenant_id=tenant.id, actor=ADMIN, agents=["assistant"])
    with httpx.Client(base_url=live_server, timeout=60) as http:
        refused = http.post("/v1/consolidate", json={}, headers=_key(ctx, other.id, "admin"))
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "conflict"
        answered = http.post("/v1/consolidate", json={}, headers=_key(ctx, tenant.id, "admin"))
        assert answered.status_code == 200, answered.text
        body = answered.json()
        assert body["promoted"] == 1 and body["evicted"] == len(noise)
        assert body["promotions"][0]["source_ids"] == sorted(evidence)
        items = parse_sse(http.get("/v1/events", params={"once": 1},
                                   headers=_key(ctx, tenant.id, "events:read")).text)
        other_items = parse_sse(http.get("/v1/events", params={"once": 1},
                                         headers=_key(ctx, other.id, "events:read")).text)
    [event] = [e for e in items if e["type"] == "agent.memory.consolidated"]
    assert event["data"]["promotedIds"] == [body["promotions"][0]["memory_id"]]
    assert event["data"]["evictedCount"] == len(noise)
    assert not any(word in json.dumps(event).lower() for word in ("vegetarian", "menu", "parking", "receipt"))
    assert not [e for e in other_items if e["type"] == "agent.memory.consolidated"]
    assert _scalar(ctx, "SELECT count(*) FROM memories WHERE tenant_id = :t AND type = 'semantic'", t=other.id) == 0


def test_the_cli_dry_run_changes_nothing(settings, committed_ctx):
    ctx = committed_ctx
    tenant = create_tenant(ctx, name=unique("cons"), actor=ADMIN)
    evidence, noise = preference_and_noise(ctx, tenant.id)
    consolidation.set_config(ctx, tenant_id=tenant.id, actor=ADMIN, agents=["*"])
    memories, counts = _snapshot(ctx, tenant.id)
    report = json.loads(_cli(settings, "--tenant", tenant.name, "--dry-run", "--json").stdout)
    assert report["dry_run"] is True and [p["source_ids"] for p in report["promotions"]] == [sorted(evidence)]
    assert sorted(report["evictions"][0]["memory_ids"]) == sorted(noise)
    after, after_counts = _snapshot(ctx, tenant.id)
    assert after == memories
    # only the run's own record: one `consolidation.finished` audit entry
    assert after_counts == {**counts, "audit_entries": counts["audit_entries"] + 1}
    printed = _cli(settings, "--tenant", tenant.name, "--dry-run").stdout
    assert "dry run: nothing changed" in printed and "vegetarian" not in printed.lower()
    assert _snapshot(ctx, tenant.id)[0] == memories


def test_a_kill_9_mid_run_then_a_rerun_loses_and_doubles_nothing(settings, committed_ctx):
    ctx = committed_ctx
    tenant = create_tenant(ctx, name=unique("cons"), actor=ADMIN)
    for i in range(WINDOWS):
        user = f"user-{i:02d}"
        write_notes(ctx, tenant.id, [(1 + 2 * d, VEGETARIAN[d]) for d in range(4)], user_id=user)
        write_notes(ctx, tenant.id, [(21 + d, NOISE[d]) for d in range(2)], user_id=user, confidence=0.5)
    consolidation.set_config(ctx, tenant_id=tenant.id, actor=ADMIN, agents=["*"])
    assert len(consolidation.consolidate_tenant(ctx, tenant.id, dry_run=True)["promotions"]) == WINDOWS

    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "consolidate", "--tenant", tenant.name, "--progress"],
                            cwd=PROJECT_ROOT, env=server_env(settings), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if line.strip() == f"window {KILL_AFTER} done":
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        proc.wait(60)
    assert proc.returncode == -signal.SIGKILL
    promoted_before = _scalar(ctx, "SELECT count(*) FROM memories WHERE tenant_id = :t AND type = 'semantic'",
                              t=tenant.id)
    assert KILL_AFTER <= promoted_before < WINDOWS, promoted_before  # killed mid-run, windows left undone
    assert _scalar(ctx, "SELECT count(*) FROM consolidation_runs WHERE tenant_id = :t AND status = 'running'",
                   t=tenant.id) == 1

    rerun = json.loads(_cli(settings, "--tenant", tenant.name, "--json").stdout)
    assert rerun["promoted"] == WINDOWS - promoted_before and rerun["denied"] == 0
    with ctx.db.sessions() as session:
        per_user = dict(session.execute(text(
            "SELECT user_id, count(*) FROM memories WHERE tenant_id = :t AND type = 'semantic' AND status = 'live' "
            "GROUP BY user_id"), {"t": tenant.id}).all())
        sources = session.execute(text("SELECT source_ids FROM consolidation_claims WHERE tenant_id = :t "
                                       "AND kind = 'promote'"), {"t": tenant.id}).scalars().all()
        statuses = dict(session.execute(text("SELECT status, count(*) FROM consolidation_runs WHERE tenant_id = :t "
                                             "GROUP BY status"), {"t": tenant.id}).all())
        archived = session.execute(text("SELECT count(*) FROM memories WHERE tenant_id = :t AND status = 'archived'"),
                                   {"t": tenant.id}).scalar()
        events = session.execute(text("SELECT count(*) FROM events WHERE tenant_id = :t "
                                      "AND type = 'agent.memory.consolidated'"), {"t": tenant.id}).scalar()
    assert per_user == {f"user-{i:02d}": 1 for i in range(WINDOWS)}  # none lost, none doubled
    used = [i for ids in sources for i in ids]
    assert len(sources) == WINDOWS and len(used) == len(set(used)) == 4 * WINDOWS
    assert archived == 2 * WINDOWS and events == WINDOWS  # each window's event exactly once
    assert statuses == {"done": 2, "failed": 1}  # the dry run, the rerun; the killed run marked failed
    again = json.loads(_cli(settings, "--tenant", tenant.name, "--json").stdout)
    assert (again["promoted"], again["evicted"], again["promotions"]) == (0, 0, [])


def test_the_schedule_runs_in_a_live_server_at_the_tenant_interval(settings, committed_ctx):
    ctx = committed_ctx
    tenant = create_tenant(ctx, name=unique("cons"), actor=ADMIN)
    preference_and_noise(ctx, tenant.id)
    consolidation.set_config(ctx, tenant_id=tenant.id, actor=ADMIN, agents=["*"], enabled=True, interval_minutes=60)
    proc, _ = start_server(settings, MEMWARDEN_CONSOLIDATION_POLL_SECONDS="1")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _scalar(
                ctx, "SELECT count(*) FROM consolidation_runs WHERE tenant_id = :t AND trigger = 'schedule' "
                     "AND status = 'done'", t=tenant.id):
            time.sleep(0.5)
        time.sleep(3)  # three more rounds of the job: the tenant's 60 minutes have not passed
        runs = _scalar(ctx, "SELECT count(*) FROM consolidation_runs WHERE tenant_id = :t AND trigger = 'schedule'",
                       t=tenant.id)
    finally:
        stop_server(proc)
    assert runs == 1
    assert _scalar(ctx, "SELECT count(*) FROM memories WHERE tenant_id = :t AND type = 'semantic' "
                        "AND status = 'live'", t=tenant.id) == 1
