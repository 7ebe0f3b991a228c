"""`memwarden bench blast`: the size and time of an incident report over a large tenant.

One process, one fresh embedded PostgreSQL. A tenant of N memories (default 100,000) over 30 days,
seeded directly through the repos for speed (rows, no audit entries: the report reads none but
the reads' own): one key wrote `--poisoned` of them in one window in the middle, a good key the
rest. Lineage: `--edges` derivations (default one per two memories), each from an older memory to a newer one written within
`--span` memories of it (merges, compactions, supersedes and consolidations in turn), at the
derived memory's time. Read audit: `--reads` reads, each returning `--ids-per-read` memories at a
random later time.

Then the product code, as `GET /v1/recover/report` runs it: `incident.report` for the poisoning
key's window, `--runs` times (median seconds, the report's JSON size, its counts), and
`recover.recover(dry_run=True)`, which walks the same radius and locks nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from datetime import timedelta
from typing import Any

from app.bench.common import in_process_context, machine, scratch_dir, write_json
from app.config import Settings

ACTOR = {"kind": "bench", "id": "memwarden-bench"}
BATCH = 5_000
KINDS = ("merge", "compaction", "supersede", "consolidation")


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("blast", help="size and time of the blast-radius incident report at N memories")
    parser.add_argument("--memories", type=int, default=100_000, help="memories in the tenant")
    parser.add_argument("--poisoned", type=int, default=1_000, help="memories the poisoning key wrote")
    parser.add_argument("--edges", type=int, default=50_000, help="derivations (older → newer)")
    parser.add_argument("--span", type=int, default=2_000, help="a derivation's source is this many memories back at most")
    parser.add_argument("--reads", type=int, default=200_000, help="reads in the read audit")
    parser.add_argument("--ids-per-read", type=int, default=5, help="memories each read returned")
    parser.add_argument("--runs", type=int, default=3, help="reports timed")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", help="write the JSON report here")
    parser.set_defaults(func=run)


def _seed(ctx, tenant_id: str, bad_key: str, good_key: str, args: argparse.Namespace) -> dict[str, Any]:
    """Memories, lineage and reads; returns the poisoned window and the seeding times."""
    from app.core.ids import new_id
    from app.core.timefmt import utcnow
    from app.db.models import Memory
    from app.repos.memory import derivations
    from app.repos.audit import reads
    from app.repos.memory import memories as repo

    rng = random.Random(args.seed)
    n = args.memories
    start, now = utcnow() - timedelta(days=30), utcnow()
    step = (timedelta(days=25)) / n
    first_bad = n // 2
    times, ids = [start + step * i for i in range(n)], [new_id("mem") for _ in range(n)]
    started = time.perf_counter()
    for first in range(0, n, BATCH):
        rows = [Memory(id=ids[i], tenant_id=tenant_id, agent_id=f"agent-{i % 10}", user_id=None, type="semantic",
                       content=f"Bench fact {i}: the weekly report is due on day {i % 7}.", metadata_={}, tags=[],
                       confidence=0.9, source=None, status="live", created_at=times[i], updated_at=times[i],
                       live_from=times[i], score_multiplier=1.0, hard_deleted=False,
                       written_by=bad_key if first_bad <= i < first_bad + args.poisoned else good_key)
                for i in range(first, min(n, first + BATCH))]
        with ctx.db.sessions.begin() as session:
            repo.insert_all(session, rows)
    seeded = {"memories_s": time.perf_counter() - started}
    started = time.perf_counter()
    edges, seen = [], set()
    while len(edges) < args.edges:
        derived = rng.randrange(1, n)
        source = rng.randrange(max(0, derived - args.span), derived)
        if (derived, source) in seen:
            continue
        seen.add((derived, source))
        edges.append({"tenant_id": tenant_id, "derived_id": ids[derived], "source_id": ids[source],
                      "kind": KINDS[len(edges) % len(KINDS)], "created_at": times[derived]})
    for first in range(0, len(edges), BATCH):
        with ctx.db.sessions.begin() as session:
            derivations.insert_many(session, edges[first:first + BATCH])
    seeded["edges_s"] = time.perf_counter() - started
    started = time.perf_counter()
    span = (now - start).total_seconds()
    for first in range(0, args.reads, BATCH):
        records = []
        for r in range(first, min(args.reads, first + BATCH)):
            picked = sorted({rng.randrange(n) for _ in range(args.ids_per_read)})
            earliest = times[picked[-1]]
            read_at = earliest + timedelta(seconds=rng.random() * (now - earliest).total_seconds())
            records.append({"tenant_id": tenant_id, "id": new_id("read"), "read_at": read_at,
                            "actor": f"api_key:{good_key}", "key_id": good_key, "agent_id": f"agent-{r % 10}",
                            "operation": "recall", "query_digest": None, "memory_ids": [ids[i] for i in picked],
                            # half the reads name one of 200 agent runs, so the report lists the runs reached
                            "run_id": f"run_bench{r % 200:03d}" if r % 2 else None})
        with ctx.db.sessions.begin() as session:
            reads.insert_records(session, records)
    seeded["reads_s"] = time.perf_counter() - started
    seeded["span_days"] = round(span / 86400, 1)
    return {"since": times[first_bad], "until": times[first_bad + args.poisoned - 1] + step / 2, "seeded": seeded}


def run(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.audit import incident, recover
    from app.services.tenancy.apikeys import create_key
    from app.services.tenancy.tenants import create_tenant

    before = machine()
    with scratch_dir() as data_dir, in_process_context(data_dir, pool_size=2) as (ctx, _):
        tenant = create_tenant(ctx, name="bench-blast", actor=ACTOR)
        bad = create_key(ctx, tenant_id=tenant.id, scopes="memory:write", agents="*", actor=ACTOR).key.id
        good = create_key(ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", agents="*",
                          actor=ACTOR).key.id
        seeded = _seed(ctx, tenant.id, bad, good, args)
        print(f"seeded {args.memories} memories, {args.edges} derivations, {args.reads} reads: "
              + ", ".join(f"{k} {v:.1f}" for k, v in seeded["seeded"].items()), flush=True)
        with ctx.db.engine.begin() as conn:  # what a live database has after autovacuum
            conn.exec_driver_sql("ANALYZE memories, memory_derivations, read_records, memory_reads")
        target = recover.parse_target(key=bad, since=seeded["since"].isoformat(), until=seeded["until"].isoformat())
        seconds, report, size = [], None, 0
        for _ in range(args.runs):
            started = time.perf_counter()
            report = incident.report(ctx, tenant.id, target)
            size = len(json.dumps(report).encode())
            seconds.append(time.perf_counter() - started)
        started = time.perf_counter()
        dry = recover.recover(ctx, tenant_id=tenant.id, target=target, actor=ACTOR, dry_run=True)
        dry_seconds = time.perf_counter() - started
    counts = report["counts"]
    depths = [d["depth"] for r in report["recovered"] for d in r["derived"]]
    result = {
        "benchmark": "blast", "machine": before, "loadavg_after": machine()["loadavg_1_5_15"],
        "config": {k: getattr(args, k) for k in ("memories", "poisoned", "edges", "span", "reads", "ids_per_read",
                                                  "runs", "seed")},
        "seeding_seconds": {k: round(v, 1) if isinstance(v, float) else v for k, v in seeded["seeded"].items()},
        "report": {"seconds_median": round(statistics.median(seconds), 3), "seconds": [round(s, 3) for s in seconds],
                   "json_bytes": size, "counts": counts, "max_depth_reached": max(depths, default=0),
                   "derived_rows": len(depths)},
        "recover_dry_run": {"seconds": round(dry_seconds, 3), "derived": dry["counts"]["derived"],
                            "would_quarantine": dry["counts"]["quarantined"] + dry["counts"]["derived_quarantined"]},
    }
    print(f"incident report: {counts['recovered']} recovered, {counts['derived']} derived, {counts['reads']} reads; "
          f"median {result['report']['seconds_median']} s, {size / 1e6:.1f} MB of JSON; "
          f"recover dry run {dry_seconds:.2f} s", flush=True)
    write_json(args.out, result)
    return 0
