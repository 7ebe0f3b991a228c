"""`memwarden bench state-check`: what holding memories to their audited state costs.

One process, one fresh embedded PostgreSQL:

* **Full-tenant check.** A tenant of N memories (default 100,000), each written with its
  `memory.remembered` audit entry as `remember` writes it (state digest included; constant
  embeddings, since the check never reads them), then `state_check.check_tenant` over it, several
  times: rows per second, and the same with one row tampered (the report still lists it).
* **Fail-closed recall.** A scope of real memories (bundled embedder) recalled with
  `MEMWARDEN_INTEGRITY_FAIL_CLOSED` off and on, alternating recall by recall (ABBA), so a busy box
  slows both alike; the difference is the per-recall cost of the check (one statement: the hits'
  rows beside their latest audit entries, and a digest per hit), which is also timed alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from app.bench.common import in_process_context, latency_summary, machine, scratch_dir, write_json
from app.config import Settings

ACTOR = {"kind": "bench", "id": "memwarden-bench"}
BATCH = 2_000


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("state-check", help="rows/s of the memory state check at N memories, and the "
                                                  "per-recall cost of failing closed (A/B)")
    parser.add_argument("--rows", type=int, default=100_000, help="memories in the checked tenant")
    parser.add_argument("--checks", type=int, default=3, help="full checks timed")
    parser.add_argument("--recall-scope", type=int, default=200, help="memories in the recalled scope")
    parser.add_argument("--recalls", type=int, default=100, help="recalls per variant per round")
    parser.add_argument("--rounds", type=int, default=6, help="rounds; variants alternate ABBA")
    parser.add_argument("--out", help="write the JSON report here")
    parser.set_defaults(func=run)


def _fill(ctx, tenant_id: str, rows: int) -> float:
    """Write `rows` memories with their audit entries, as `remember` records them; returns seconds."""
    from app.core.ids import new_id
    from app.core.timefmt import utcnow
    from app.db.models import Memory
    from app.repos.memory import memories as repo
    from app.services.memory.memories import memory_event

    started, vector = time.perf_counter(), [0.0] * 383 + [1.0]
    for first in range(0, rows, BATCH):
        now = utcnow()
        batch = [Memory(id=new_id("mem"), tenant_id=tenant_id, agent_id=f"agent-{i % 10}", user_id=None,
                        type="semantic", content=f"Bench fact {i}: the weekly report is due on day {i % 7}.",
                        metadata_={"i": i, "source": "bench"}, tags=["bench", f"t{i % 5}"], confidence=0.9,
                        source=None, status="live", created_at=now, updated_at=now, live_from=now,
                        digest_key=os.urandom(32), score_multiplier=1.0, hard_deleted=False, embedding=vector)
                 for i in range(first, min(rows, first + BATCH))]
        with ctx.db.sessions.begin() as session:
            repo.insert_all(session, batch)
            for memory in batch:
                ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.remembered", actor=ACTOR,
                                 subject={"type": "memory", "id": memory.id}, data=memory_event(ctx, memory))
        print(f"  written {min(rows, first + BATCH)}/{rows}", end="\r", flush=True)
    print()
    return time.perf_counter() - started


def _full_checks(ctx, tenant_id: str, checks: int) -> dict[str, Any]:
    from sqlalchemy import text

    from app.services.audit import state_check

    runs = []
    for _ in range(checks):
        report = state_check.check_tenant(ctx, tenant_id, detected_by="bench")
        assert report.ok, report.mismatches[:3]
        runs.append(report.seconds)
    with ctx.db.sessions.begin() as session:  # one row edited behind the log: found, and the pass costs the same
        session.execute(text("UPDATE memories SET content = 'tampered' WHERE id = (SELECT id FROM memories "
                             "WHERE tenant_id = :t ORDER BY id LIMIT 1)"), {"t": tenant_id})
    tampered = state_check.check_tenant(ctx, tenant_id, detected_by="bench")
    median = statistics.median(runs)
    return {"rows": report.checked, "seconds": [round(s, 3) for s in runs], "seconds_median": round(median, 3),
            "rows_per_second": round(report.checked / median),
            "tampered": {"mismatch_count": tampered.mismatch_count, "reason": tampered.mismatches[0].reason,
                         "seconds": round(tampered.seconds, 3)}}


def _recalls(ctx, tenant_id: str, scope: int, per_round: int, rounds: int) -> dict[str, Any]:
    from app.core.access import Principal
    from app.services.audit import state_check
    from app.services.memory import recall, remembering
    from app.services.tenancy.tenant_config import set_policy

    set_policy(ctx, tenant_id=tenant_id, doc={"rules": []}, actor=ACTOR)  # every note live: recall sees them all
    principal = Principal(tenant_id=tenant_id, key_id="key_bench", scopes=frozenset({"memory:read", "memory:write"}),
                          agents=("*",))
    topics = ["the quarterly budget review", "the office move to Lisbon", "the on-call rota", "the vendor contract",
              "the customer escalation", "the hiring plan", "the product launch", "the security audit"]
    for i in range(scope):
        remembering.remember(ctx, principal, {"agent_id": "recall-agent", "type": "semantic",
                                           "content": f"Note {i} about {topics[i % len(topics)]}: owner {i % 13}."})
    plain, closed = ctx.settings, ctx.settings.with_changes(integrity_fail_closed=True)
    samples: dict[str, list[float]] = {"off": [], "on": []}
    for r in range(rounds):
        for n in range(per_round):  # the variants alternate recall by recall (ABBA), so load drift hits both
            for variant in (("off", "on") if (r + n) % 2 == 0 else ("on", "off")):
                ctx.settings = closed if variant == "on" else plain
                started = time.perf_counter()
                hits = recall.recall(ctx, principal, {"agent_id": "recall-agent", "k": 5,
                                                      "query": f"who owns {topics[n % len(topics)]}?"})["hits"]
                samples[variant].append((time.perf_counter() - started) * 1000)
                assert hits, "the bench's recalls must return rows to check"
    ctx.settings = plain
    alone = []  # the check by itself, on the last recall's hits: the part a busy box's noise hides above
    ids = [h["id"] for h in hits]
    with ctx.db.reader() as conn:
        for _ in range(per_round * 3):
            started = time.perf_counter()
            assert state_check.check_rows(ctx, conn, tenant_id, ids) == []
            alone.append((time.perf_counter() - started) * 1000)
    off, on = latency_summary(samples["off"]), latency_summary(samples["on"])
    return {"scope": scope, "k": 5, "fail_closed_off": off, "fail_closed_on": on,
            "p50_added_ms": round(on["p50_ms"] - off["p50_ms"], 3),
            "mean_added_ms": round(on["mean_ms"] - off["mean_ms"], 3),
            "check_alone": {"rows": len(ids), **latency_summary(alone)}}


def run(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.tenancy.tenants import create_tenant

    before = machine()
    with scratch_dir() as data_dir, in_process_context(data_dir, pool_size=2, checkpoint_every=10_000) as (ctx, _):
        tenant = create_tenant(ctx, name="bench-state", actor=ACTOR)
        write_seconds = _fill(ctx, tenant.id, args.rows)
        full = _full_checks(ctx, tenant.id, args.checks)
        print(f"state check of {full['rows']} memories: median {full['seconds_median']} s = "
              f"{full['rows_per_second']} rows/s (one tampered row: {full['tampered']['mismatch_count']} "
              f"mismatch, {full['tampered']['reason']})", flush=True)
        recalls = _recalls(ctx, create_tenant(ctx, name="bench-recall", actor=ACTOR).id, args.recall_scope,
                           args.recalls, args.rounds)
        print(f"recall p50: fail-closed off {recalls['fail_closed_off']['p50_ms']} ms, on "
              f"{recalls['fail_closed_on']['p50_ms']} ms ({recalls['p50_added_ms']:+} ms; mean "
              f"{recalls['mean_added_ms']:+} ms); the check alone on {recalls['check_alone']['rows']} hits: p50 "
              f"{recalls['check_alone']['p50_ms']} ms", flush=True)
    write_json(args.out, {"benchmark": "state-check", "machine": before, "loadavg_after": machine()["loadavg_1_5_15"],
                          "write_seconds": round(write_seconds, 1), "full_check": full, "recall": recalls,
                          "rounds": args.rounds})
    return 0
