"""`memwarden bench audit-guards`: what the fail-closed audit checks cost, each against its absence.

Both halves run in one process on one fresh embedded PostgreSQL, alternating the two variants
round by round (ABBA order), so a busy machine slows both alike and the ratio stays meaningful:

* **Append head check.** Durable appends (each its own committed transaction, one chain) with
  the head check skipped because this process wrote the head (the single-writer case), and with
  it run on every append (the case of several writer processes: the head is someone else's).
* **Export verify-first.** `AuditLog.export` of one chain of N events as it runs (the range is
  verified before the first line) and with that verification pass stubbed out (stream only).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from app.bench.common import in_process_context, latency_summary, machine, scratch_dir, write_json
from app.config import Settings

ACTOR = {"kind": "bench", "id": "memwarden-bench"}


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("audit-guards", help="cost of the audit head check per append and of export's "
                                                   "verify-first pass, each A/B against its absence")
    parser.add_argument("--appends", type=int, default=300, help="appends per variant per round")
    parser.add_argument("--export-events", type=int, default=20_000, help="events in the exported chain")
    parser.add_argument("--rounds", type=int, default=6, help="rounds; variants alternate ABBA")
    parser.add_argument("--out", help="write the JSON report here")
    parser.set_defaults(func=run)


class _Forgetful(dict):
    """A head cache that never remembers: every append checks its head."""

    def __setitem__(self, key, value) -> None:
        pass


def _order(round_no: int, a: str, b: str) -> tuple[str, str]:
    return (a, b) if round_no % 2 == 0 else (b, a)


def _appends(ctx, tenant_id: str, per_round: int, rounds: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {"head_cached": [], "head_checked": []}
    n = 0
    for r in range(rounds):
        for variant in _order(r, "head_cached", "head_checked"):
            ctx.audit.known_good_heads = {} if variant == "head_cached" else _Forgetful()
            for _ in range(per_round):
                n += 1
                started = time.perf_counter()
                with ctx.db.sessions.begin() as session:
                    ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.remembered", actor=ACTOR,
                                     subject={"type": "memory", "id": f"mem_{n}"}, data={"n": n})
                samples[variant].append((time.perf_counter() - started) * 1000)
    ctx.audit.known_good_heads = {}
    out: dict[str, Any] = {k: latency_summary(v) for k, v in samples.items()}
    out["p50_added_ms"] = round(out["head_checked"]["p50_ms"] - out["head_cached"]["p50_ms"], 3)
    out["check_alone"] = _check_alone(ctx, tenant_id, per_round * 2)
    return out


def _check_alone(ctx, tenant_id: str, calls: int) -> dict[str, float]:
    """The head check by itself (the hashing of the head rows the lock call returned), without
    the commit's WAL flush that dominates an append: the time it adds while the chain's lock is held."""
    from app.repos.audit.audit_log import lock_and_read_heads
    from app.services.audit.audit import chain_for

    chain_id = chain_for(tenant_id)
    samples = []
    with ctx.db.sessions.begin() as session:
        head = lock_and_read_heads(session, chain_id=chain_id, tenant_id=tenant_id, notify=False)
        for _ in range(calls):
            started = time.perf_counter()
            ctx.audit.check_head(session, chain_id, head)
            samples.append((time.perf_counter() - started) * 1000)
    return latency_summary(samples)


def _exports(ctx, tenant_id: str, events: int, rounds: int) -> dict[str, Any]:
    from app.services.audit.audit import AuditLog, chain_for

    for first in range(0, events, 1_000):
        with ctx.db.sessions.begin() as session:
            for k in range(first, min(events, first + 1_000)):
                ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.remembered", actor=ACTOR,
                                 subject={"type": "memory", "id": f"mem_export{k}"}, data={"k": k})
    chain_id = chain_for(tenant_id)
    verify_range = AuditLog.verify_range
    seconds: dict[str, list[float]] = {"verify_first": [], "stream_only": []}
    try:
        for r in range(rounds):
            for variant in _order(r, "verify_first", "stream_only"):
                AuditLog.verify_range = verify_range if variant == "verify_first" else (lambda *a, **k: None)
                started = time.perf_counter()
                lines = sum(1 for _ in ctx.audit.export(ctx.db.sessions, chain_id))
                seconds[variant].append(time.perf_counter() - started)
    finally:
        AuditLog.verify_range = verify_range
    out: dict[str, Any] = {"entries": events + 1, "lines": lines}  # + tenant.created; lines add checkpoints
    for variant, runs in seconds.items():
        median = statistics.median(runs)
        out[variant] = {"seconds_median": round(median, 3), "lines_per_second": round(lines / median)}
    out["slowdown"] = round(out["verify_first"]["seconds_median"] / out["stream_only"]["seconds_median"], 2)
    return out


def run(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.tenancy.tenants import create_tenant

    before = machine()
    with scratch_dir() as data_dir, in_process_context(data_dir, pool_size=2, checkpoint_every=1_000) as (ctx, _):
        appends = _appends(ctx, create_tenant(ctx, name="bench-appends", actor=ACTOR).id, args.appends,
                           args.rounds)
        print(f"append p50: head cached {appends['head_cached']['p50_ms']} ms, head checked "
              f"{appends['head_checked']['p50_ms']} ms ({appends['p50_added_ms']:+} ms); the check alone "
              f"p50 {appends['check_alone']['p50_ms']} ms", flush=True)
        exports = _exports(ctx, create_tenant(ctx, name="bench-export", actor=ACTOR).id, args.export_events,
                           args.rounds)
        print(f"export of {exports['lines']} lines: verify-first {exports['verify_first']['lines_per_second']}"
              f" lines/s, stream only {exports['stream_only']['lines_per_second']} lines/s "
              f"({exports['slowdown']}x)", flush=True)
    write_json(args.out, {"benchmark": "audit-guards", "machine": before, "loadavg_after": machine()["loadavg_1_5_15"],
                          "rounds": args.rounds, "appends": appends, "export": exports})
    return 0
