"""`memwarden bench audit`: durable audit-append throughput and offline verification speed.

On a fresh embedded PostgreSQL (its defaults: `synchronous_commit = on`, `fsync = on`):

* **Appends.** For each (writers, chains) configuration, W writer OS processes (multiprocessing
  spawn, each its own `AppContext` and connection) start together and call
  `AuditLog.append` for a fixed time, every append its own committed transaction - the real
  per-request path, durable at commit. Writer w sends its i-th append to chain (w + i) mod C, so
  with one chain all writers contend for its advisory lock and with C chains they spread out.
  Afterwards every chain is checked gapless and verified (`verify_database`). Each writer also
  stamps, per append, when its `memwarden_lock_chain` call was sent and returned (lock granted),
  when the commit hook had hashed the entry, and when its COMMIT returned, on the monotonic clock
  all processes share. Appends to one chain are serial, so the time from one append's grant to
  the next's is what one append costs the chain; it is split into the holder's own work after
  the grant and the rest (INSERT + COMMIT with its flush, the lock hand-off, the next holder's
  lock call returning to it).
* **Verification.** One chain of N events (default 100,000; appended through `AuditLog.append`
  1,000 per transaction, so the count cadence signs a checkpoint about every 1,000) is exported with
  `AuditLog.export` to a JSONL file and verified offline with `verify_export_file` and the pinned key,
  as `memwarden audit verify FILE --public-key KEY` does: in this process only, and with the
  default worker processes.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import statistics
import time
from pathlib import Path
from typing import Any

from app.bench.common import in_process_context, latency_summary, machine, scratch_dir, table, write_json
from app.config import Settings

ACTOR = {"kind": "bench", "id": "memwarden-bench"}
GOALS = {"appends_per_second_1_chain_8_writers": 1_000, "verify_events_per_second": 100_000}


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("audit", help="durable audit appends/s (1 and 8 writers x 1 and 8 chains) and "
                                            "offline verification events/s")
    parser.add_argument("--seconds", type=float, default=5.0, help="timed append window per configuration")
    parser.add_argument("--writers", default="1,8", help="writer process counts to run (comma-separated)")
    parser.add_argument("--chains", default="1,8", help="chain counts to run (comma-separated)")
    parser.add_argument("--verify-events", type=int, default=100_000, help="events in the exported chain")
    parser.add_argument("--repeat", type=int, default=3, help="verification runs per mode (best is reported)")
    parser.add_argument("--out", help="write the JSON report here")
    parser.add_argument("--data-dir", help="keep the database here (must be empty) instead of a temp dir")
    parser.set_defaults(func=run)


# --- appends -----------------------------------------------------------------------------------

class _LockTimer:
    """This process's stamps for its current append: `memwarden_lock_chain` sent and returned
    (granted), the commit hook done (entry hashed; its listener runs after the audit one), and
    the COMMIT returned (the lock is released by then)."""

    def __init__(self, engine, sessions) -> None:
        from sqlalchemy import event

        self.sent = self.granted = self.hashed = self.committed = 0.0
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)
        event.listen(sessions, "before_commit", self._hashed)
        event.listen(sessions, "after_commit", self._commit)

    def _hashed(self, session) -> None:
        self.hashed = time.perf_counter()

    def _commit(self, session) -> None:
        self.committed = time.perf_counter()

    def stamps(self) -> tuple[float, float, float, float]:
        return self.sent, self.granted, self.hashed, self.committed

    def _before(self, conn, cursor, statement, *args) -> None:
        if "memwarden_lock_chain" in statement:
            self.sent = time.perf_counter()

    def _after(self, conn, cursor, statement, *args) -> None:
        if "memwarden_lock_chain" in statement:
            self.granted = time.perf_counter()


def _writer(settings: Settings, writer: int, tenant_ids: list[str], seconds: float, barrier, results) -> None:
    """One writer process: appends until `seconds` have passed, each in its own transaction."""
    from app.services.runtime.context import AppContext

    ctx = AppContext.open(settings, migrate=False)
    try:
        lock = _LockTimer(ctx.db.engine, ctx.db.sessions)
        with ctx.db.engine.connect() as conn:  # open the pooled connection before the clock starts
            conn.exec_driver_sql("SELECT 1")
        barrier.wait(timeout=120)
        latencies: list[float] = []
        stamps: list[tuple[int, float, float, float, float]] = []  # (chain index, *lock.stamps())
        count = 0
        started = time.perf_counter()
        deadline = started + seconds
        now = started
        while now < deadline:
            chain = (writer + count) % len(tenant_ids)
            tenant_id = tenant_ids[chain]
            with ctx.db.sessions.begin() as session:
                ctx.audit.append(session, tenant_id=tenant_id, event_type="bench.append",
                                 actor={"kind": "bench", "id": f"writer-{writer}"},
                                 subject={"type": "bench", "id": f"w{writer}-{count}"},
                                 data={"writer": writer, "i": count})
            end = time.perf_counter()
            latencies.append((end - now) * 1000.0)
            stamps.append((chain, *lock.stamps()))
            now = end
            count += 1
        results.put((writer, count, now - started, latencies, stamps))
    finally:
        ctx.close()


def _append_run(ctx, settings: Settings, writers: int, chains: int, seconds: float) -> dict[str, Any]:
    from sqlalchemy import func, select

    from app.db.models import AuditEntry
    from app.services.audit.audit import chain_for
    from app.services.tenancy.tenants import create_tenant

    stamp = f"{os.getpid()}-{time.time_ns() % 10**9}"
    tenants = [create_tenant(ctx, name=f"bench-w{writers}-c{chains}-{i}-{stamp}", actor=ACTOR).id
               for i in range(chains)]
    spawn = mp.get_context("spawn")
    barrier, results = spawn.Barrier(writers), spawn.Queue()
    procs = [spawn.Process(target=_writer, args=(settings, w, tenants, seconds, barrier, results))
             for w in range(writers)]
    for proc in procs:
        proc.start()
    outcomes: list[Any] = []
    give_up = time.monotonic() + seconds + 300
    while len(outcomes) < writers:
        try:
            outcomes.append(results.get(timeout=1))
        except queue.Empty:
            failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if failed or time.monotonic() > give_up:
                for proc in procs:
                    proc.kill()
                raise RuntimeError(f"writer processes failed (exit codes {failed}) or timed out") from None
    for proc in procs:
        proc.join(60)
    total = sum(o[1] for o in outcomes)
    elapsed = max(o[2] for o in outcomes)
    latencies = [ms for o in outcomes for ms in o[3]]
    stamps = [s for o in outcomes for s in o[4]]

    verified = True
    for tenant_id in tenants:
        chain_id = chain_for(tenant_id)
        with ctx.db.sessions() as session:
            n, top = session.execute(select(func.count(), func.max(AuditEntry.seq))
                                     .where(AuditEntry.chain_id == chain_id)).one()
        report = ctx.audit.verify_database(ctx.db.sessions, chain_id)
        verified &= report.ok and n == top
    with ctx.db.sessions() as session:
        appended_rows = session.scalar(select(func.count()).where(
            AuditEntry.chain_id.in_([chain_for(t) for t in tenants]), AuditEntry.event_type == "bench.append"))
    return {
        "writers": writers, "chains": chains, "appends": total, "seconds": round(elapsed, 2),
        "appends_per_second": round(total / elapsed, 1), "latency": latency_summary(latencies),
        "chain_lock": _lock_timeline(stamps),
        "per_writer": sorted(o[1] for o in outcomes),
        "chains_gapless_and_verified": verified and appended_rows == total,
    }


def _lock_timeline(stamps: list[tuple[int, float, float, float, float]]) -> dict[str, Any]:
    """Per append, from the writers' stamps (chain, sent, granted, hashed, committed; seconds on
    the shared monotonic clock): the wait for the lock, the holder's view of holding it (granted ->
    COMMIT returned), and per chain the grant-to-next-grant cycle split into the holder's work
    after the grant (lock call returned -> entry hashed) and the rest (hashed -> next holder's
    lock call returned: INSERT + COMMIT and its flush, the hand-off, the next reply)."""
    ms = 1000.0
    cycle, own, rest = [], [], []
    for chain in {s[0] for s in stamps}:
        grants = sorted((s for s in stamps if s[0] == chain), key=lambda s: s[2])
        for this, following in zip(grants, grants[1:]):
            if following[1] <= this[2]:  # the next writer was already waiting: the lock was busy
                cycle.append((following[2] - this[2]) * ms)
                own.append((this[3] - this[2]) * ms)
                rest.append((following[2] - this[3]) * ms)
    return {"wait": latency_summary([(s[2] - s[1]) * ms for s in stamps]),
            "held_as_seen_by_holder": latency_summary([(s[4] - s[2]) * ms for s in stamps]),
            "busy_cycles": len(cycle), "grant_to_next_grant": latency_summary(cycle),
            "holder_work_after_grant": latency_summary(own), "commit_and_handoff": latency_summary(rest)}


def commit_floor(admin_url: str, n: int = 300) -> dict[str, Any]:
    """Latency of the smallest durable transaction (one-row INSERT + COMMIT, i.e. a WAL flush):
    a chain's lock is held through its commit, so 1 / this bounds one chain's appends/s."""
    from sqlalchemy import create_engine, text

    engine = create_engine(admin_url)
    try:
        with engine.connect() as conn:
            conn.execute(text("CREATE TABLE IF NOT EXISTS bench_commit_probe (n int)"))
            conn.commit()
            samples = []
            for i in range(n):
                started = time.perf_counter()
                conn.execute(text("INSERT INTO bench_commit_probe VALUES (:n)"), {"n": i})
                conn.commit()
                samples.append((time.perf_counter() - started) * 1000.0)
            conn.execute(text("DROP TABLE bench_commit_probe"))
            conn.commit()
    finally:
        engine.dispose()
    summary = latency_summary(samples)
    return {**summary, "one_chain_ceiling_per_second": round(1000.0 / summary["p50_ms"]) if summary["p50_ms"] else None}


# --- verification --------------------------------------------------------------------------------

def _grow_chain(ctx, tenant_id: str, n: int, batch: int = 1_000) -> float:
    """Append `n` events through `AuditLog.append`, `batch` per transaction; returns seconds taken."""
    started = time.perf_counter()
    for first in range(0, n, batch):
        with ctx.db.sessions.begin() as session:
            for k in range(first, min(n, first + batch)):
                ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.remembered", actor=ACTOR,
                                 subject={"type": "memory", "id": f"mem_bench{k:021d}"},
                                 data={"agent_id": "bench", "content_sha256": f"{k:064x}"})
    return time.perf_counter() - started


def _verify_run(ctx, data_dir: Path, n: int, repeat: int) -> dict[str, Any]:
    from app.core.auditchain import verify_export_file
    from app.services.audit.audit import chain_for
    from app.services.tenancy.tenants import create_tenant

    tenant_id = create_tenant(ctx, name=f"bench-verify-{os.getpid()}", actor=ACTOR).id
    chain_id = chain_for(tenant_id)
    load_s = _grow_chain(ctx, tenant_id, n)

    path = data_dir.parent / "audit-export.jsonl"
    started = time.perf_counter()
    lines = 0
    with path.open("w", encoding="utf-8") as fh:
        for line in ctx.audit.export(ctx.db.sessions, chain_id):
            fh.write(line + "\n")
            lines += 1
    export_s = time.perf_counter() - started

    modes: dict[str, Any] = {}
    load_before = machine()["loadavg_1_5_15"]
    for label, workers in (("in_process", 0), ("default_workers", None)):
        runs = []
        for _ in range(repeat):
            started = time.perf_counter()
            report = verify_export_file(path, vkeys=[ctx.audit.vkey], workers=workers)
            runs.append(time.perf_counter() - started)
            if not report.ok:
                raise RuntimeError(f"the export did not verify: {report.detail}")
        best = min(runs)
        modes[label] = {"workers": workers if workers is not None else f"default ({os.cpu_count()} cpus)",
                        "seconds_best": round(best, 3), "seconds_median": round(statistics.median(runs), 3),
                        "events_per_second": round(report.entries / best)}
    started = time.perf_counter()
    db_report = ctx.audit.verify_database(ctx.db.sessions, chain_id)
    db_s = time.perf_counter() - started
    return {
        "events": report.entries, "checkpoints_in_export": report.checkpoints_verified,
        "export_bytes": path.stat().st_size, "export_lines": lines, "load_seconds": round(load_s, 1),
        "export_seconds": round(export_s, 2), "export_events_per_second": round(report.entries / export_s),
        "verify_export": modes, "loadavg_before_after": [load_before, machine()["loadavg_1_5_15"]],
        "verify_database": {"ok": db_report.ok, "seconds": round(db_s, 2),
                            "events_per_second": round(db_report.entries / db_s)},
    }


def _goals_met(appends: list[dict[str, Any]], verify: dict[str, Any]) -> dict[str, bool | None]:
    one_chain_8 = [a["appends_per_second"] for a in appends if (a["writers"], a["chains"]) == (8, 1)]
    best_verify = max(m["events_per_second"] for m in verify["verify_export"].values())
    return {"appends_per_second_1_chain_8_writers":
            one_chain_8[0] >= GOALS["appends_per_second_1_chain_8_writers"] if one_chain_8 else None,
            "verify_events_per_second": best_verify >= GOALS["verify_events_per_second"]}


# --- the command ---------------------------------------------------------------------------------

def run(args: argparse.Namespace, settings: Settings) -> int:
    from sqlalchemy import text

    before = machine()
    writer_counts = [int(x) for x in args.writers.split(",") if x.strip()]
    chain_counts = [int(x) for x in args.chains.split(",") if x.strip()]
    with (scratch_dir(args.data_dir) as data_dir,
          in_process_context(data_dir, pool_size=4, checkpoint_every=1_000) as (ctx, urls)):
        bench_settings = ctx.settings  # its signing key exists now (the context's audit log made it)
        with ctx.db.engine.connect() as conn:
            durability = {name: conn.execute(text(f"SHOW {name}")).scalar()
                          for name in ("synchronous_commit", "fsync", "wal_sync_method", "server_version")}
        floor_before = commit_floor(urls.admin_url)
        print(f"durable commit (1-row INSERT + COMMIT): p50 {floor_before['p50_ms']} ms, "
              f"p95 {floor_before['p95_ms']} ms", flush=True)
        appends = []
        for writers in writer_counts:
            for chains in chain_counts:
                result = _append_run(ctx, bench_settings, writers, chains, args.seconds)
                print(f"appends: {writers} writer(s) x {chains} chain(s): {result['appends_per_second']}/s "
                      f"(p50 {result['latency']['p50_ms']} ms, p95 {result['latency']['p95_ms']} ms)", flush=True)
                lock = result["chain_lock"]
                if lock["busy_cycles"]:
                    print(f"  chain lock, {lock['busy_cycles']} busy grant-to-grant cycles: p50 "
                          f"{lock['grant_to_next_grant']['p50_ms']} ms = holder's work after the grant p50 "
                          f"{lock['holder_work_after_grant']['p50_ms']} ms + commit and hand-off p50 "
                          f"{lock['commit_and_handoff']['p50_ms']} ms", flush=True)
                appends.append(result)
        floor_after = commit_floor(urls.admin_url)
        verify = _verify_run(ctx, data_dir, args.verify_events, args.repeat)
    report: dict[str, Any] = {
        "benchmark": "audit", "machine": before, "loadavg_after": machine()["loadavg_1_5_15"],
        "database": durability,
        "durable_commit_before": floor_before, "durable_commit_after": floor_after,
        "append_seconds_per_config": args.seconds, "appends": appends, "verify": verify, "goals": GOALS,
        "goals_met": _goals_met(appends, verify),
    }
    print(table([[a["writers"], a["chains"], a["appends"], a["appends_per_second"], a["latency"]["p50_ms"],
                  a["latency"]["p95_ms"], "yes" if a["chains_gapless_and_verified"] else "NO"] for a in appends],
                ["writers", "chains", "appends", "appends/s", "p50 ms", "p95 ms", "gapless+verified"]))
    v = verify
    print(f"verify {v['events']} events offline: {v['verify_export']['in_process']['events_per_second']}/s "
          f"in-process, {v['verify_export']['default_workers']['events_per_second']}/s with workers; "
          f"database verify {v['verify_database']['events_per_second']}/s; export {v['export_events_per_second']}/s")
    print(f"goals met: {report['goals_met']}")
    write_json(args.out, report)
    return 0
