"""`memwarden bench backtest`: what trying a policy change before it goes live costs.

One process, one fresh embedded PostgreSQL: a tenant with N decided staged remembers (default
10,000: approvals and rejections, some later forgotten or pulled back by a recover, a spread of
agents, tags and screening flags), then `policy_backtest.backtest` for three candidates (a change
that tightens review, a learned-style rule scoped to one agent and tag, a catch-all allow), each
several times: its time (the first run of the process also screens the known-attack corpus once)
and what it finds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from app.bench.common import in_process_context, machine, scratch_dir, write_json
from app.config import Settings

ACTOR = {"kind": "bench", "id": "memwarden-bench"}
BATCH = 2_000
CANDIDATES = {
    "tighten": {"rules": [{"id": "review-all", "match": {"operations": ["remember"]}, "action": "require_approval"}]},
    "scoped-allow": {"rules": [{"id": "faq-bot", "match": {"agents": ["agent-1"], "types": ["semantic"],
                                                           "tags_within": ["faq"], "risk_at_most": "none"},
                                "action": "allow"}]},
    "catch-all-allow": {"rules": [{"id": "trust-all", "match": {"operations": ["remember"]}, "action": "allow"}]},
}


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("backtest", help="seconds to backtest a policy change over N decided writes and the "
                                               "known attacks, and what it finds")
    parser.add_argument("--decisions", type=int, default=10_000, help="decided staged remembers in the tenant")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per candidate")
    parser.add_argument("--out", help="write the report as JSON here")
    parser.set_defaults(func=run)


def _fill(ctx, tenant_id: str, rows: int) -> float:
    """Insert `rows` decided remembers (memory and change rows, as staging leaves them); returns seconds."""
    from datetime import timedelta

    from app.core.ids import new_id
    from app.core.timefmt import utcnow
    from app.db.models import Change, Memory

    started = time.perf_counter()
    flags = [[], [], [{"name": "injection", "severity": "high", "score": 0.9, "evidence": []}],
             [{"name": "directive", "severity": "medium", "score": 0.6, "evidence": []}]]
    for first in range(0, rows, BATCH):
        now = utcnow()
        memories, changes = [], []
        for i in range(first, min(rows, first + BATCH)):
            rejected = i % 9 == 0
            status = "rejected" if rejected else ("forgotten" if i % 23 == 0 else ("pending" if i % 31 == 0
                                                                                   else "live"))
            memory_id, change_id = new_id("mem"), new_id("chg")
            memories.append(Memory(
                id=memory_id, tenant_id=tenant_id, agent_id=f"agent-{i % 7}", user_id=None, type="semantic",
                content=f"Decided note {i}: the team sync moved to {['Monday', 'Tuesday', 'Friday'][i % 3]}.",
                metadata_={}, tags=["faq"] if i % 2 else ["notes"], confidence=0.9, source=None, status=status,
                created_at=now, updated_at=now, live_from=now, digest_key=os.urandom(32), score_multiplier=1.0, hard_deleted=False,
                change_id=change_id))
            flag = flags[i % len(flags)]
            changes.append(Change(
                id=change_id, tenant_id=tenant_id, agent_id=f"agent-{i % 7}", user_id=None, operation="remember",
                status="rejected" if rejected else "approved", request={"memory_id": memory_id},
                memory_ids=[memory_id], submitted_by="key_bench", decided_at=now - timedelta(seconds=i),
                decided_by="user:bench-reviewer", approvals=[], approvals_required=1, redactions=[],
                risk_flags=flag, risk_level=flag[0]["severity"] if flag else "none"))
        with ctx.db.sessions.begin() as session:
            session.add_all(memories)
            session.flush()
            session.add_all(changes)
        print(f"  decided {min(rows, first + BATCH)}/{rows}", end="\r", flush=True)
    print()
    return time.perf_counter() - started


def run(args: argparse.Namespace, settings: Settings) -> int:
    from app.core.policy import Policy
    from app.services.review import policy_backtest
    from app.services.tenancy.tenants import create_tenant

    before = machine()
    results: dict[str, Any] = {}
    with scratch_dir() as data_dir, in_process_context(data_dir, pool_size=2) as (ctx, _):
        from app.services.tenancy.tenant_config import set_policy

        tenant = create_tenant(ctx, name="bench-backtest", actor=ACTOR)
        # The decided writes were staged because the tenant reviewed every remember; candidates change that.
        set_policy(ctx, tenant_id=tenant.id, doc=CANDIDATES["tighten"], actor=ACTOR)
        fill_seconds = _fill(ctx, tenant.id, args.decisions)
        cold = time.perf_counter()
        policy_backtest.backtest(ctx, tenant.id, Policy.parse(CANDIDATES["tighten"]))
        cold_ms = (time.perf_counter() - cold) * 1000
        for name, doc in CANDIDATES.items():
            times, report = [], {}
            for _ in range(args.runs):
                started = time.perf_counter()
                report = policy_backtest.backtest(ctx, tenant.id, Policy.parse(doc))
                times.append((time.perf_counter() - started) * 1000)
            results[name] = {"ms_median": round(statistics.median(times), 1), "ms": [round(t, 1) for t in times],
                             "replayed": report["replayed"], "newly_admitted": report["newly_admitted"],
                             "newly_admitted_harmful": report["newly_admitted_harmful"],
                             "blocking": report["blocking"]}
            print(f"{name:16} {results[name]['ms_median']:8.1f} ms median over {args.runs}: replayed "
                  f"{report['replayed']['history']} decided + {report['replayed']['corpus']} known-attack writes, "
                  f"blocking {report['blocking']}", flush=True)
    print(f"first backtest of the process (screens the known-attack corpus once): {cold_ms:.0f} ms")
    write_json(args.out, {"benchmark": "backtest", "decisions": args.decisions, "fill_seconds": round(fill_seconds, 1),
                          "first_backtest_ms": round(cold_ms, 1), "candidates": results,
                          "machine_before": before, "machine_after": machine()})
    return 0
