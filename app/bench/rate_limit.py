"""`memwarden bench rate-limit`: what the shared (PostgreSQL) rate limit adds to each request.

One process, one fresh embedded PostgreSQL. Alternating round by round (ABBA), it times the
authentication step of every `/v1` request as the middleware runs it — the key check alone (rate
limit off), and the key check that also takes a token from the key's bucket in the same statement
(rate limit on) — plus the token upsert on its own statement.
Then `--threads` threads take tokens from one key's bucket at once: the row every process
serving that key contends on, so the worst case for the shared design.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from app.bench.common import in_process_context, latency_summary, machine, scratch_dir, write_json
from app.config import Settings

ACTOR = {"kind": "bench", "id": "memwarden-bench"}
PER_MINUTE = 10**9  # never refuses: the cost of saying yes is what is measured


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("rate-limit", help="per-request cost of the rate limit shared through PostgreSQL")
    parser.add_argument("--requests", type=int, default=2_000, help="requests per variant per round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds; variants alternate ABBA")
    parser.add_argument("--threads", type=int, default=4, help="threads hitting one key's bucket at once")
    parser.add_argument("--out", help="write the JSON report here")
    parser.set_defaults(func=run)


def _sequential(ctx, token: str, principal, per_round: int, rounds: int) -> dict[str, Any]:
    from app.services.tenancy import apikeys, rate_limits

    variants = {
        "authenticate": lambda: apikeys.authenticate_and_take_token(ctx, token, per_minute=0),
        "authenticate_and_limit": lambda: apikeys.authenticate_and_take_token(ctx, token, per_minute=PER_MINUTE),
        "take_token": lambda: rate_limits.take_token(ctx, principal, PER_MINUTE),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in order:
            call = variants[name]
            for _ in range(per_round):
                started = time.perf_counter()
                call()
                samples[name].append((time.perf_counter() - started) * 1000)
    out: dict[str, Any] = {name: latency_summary(values) for name, values in samples.items()}
    out["p50_added_ms"] = round(out["authenticate_and_limit"]["p50_ms"] - out["authenticate"]["p50_ms"], 3)
    return out


def _contended(ctx, principal, threads: int, per_thread: int) -> dict[str, Any]:
    from app.services.tenancy import rate_limits

    samples: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def worker():
        mine = []
        start.wait()
        for _ in range(per_thread):
            started = time.perf_counter()
            rate_limits.take_token(ctx, principal, PER_MINUTE)
            mine.append((time.perf_counter() - started) * 1000)
        with lock:
            samples.extend(mine)

    began = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - began
    return {"threads": threads, **latency_summary(samples), "tokens_per_second": round(len(samples) / elapsed)}


def run(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.tenancy import apikeys
    from app.services.tenancy.tenants import create_tenant

    before = machine()
    with scratch_dir() as data_dir, in_process_context(data_dir, pool_size=args.threads + 1) as (ctx, _):
        tenant = create_tenant(ctx, name="bench-rate-limit", actor=ACTOR)
        token = apikeys.create_key(ctx, tenant_id=tenant.id, scopes="memory:read", agents="*",
                                   actor=ACTOR).token
        principal = apikeys.authenticate(ctx, token)
        sequential = _sequential(ctx, token, principal, args.requests, args.rounds)
        print(f"per request p50: key check {sequential['authenticate']['p50_ms']} ms, key check + token "
              f"{sequential['authenticate_and_limit']['p50_ms']} ms (+{sequential['p50_added_ms']} ms); "
              f"token statement alone p50 {sequential['take_token']['p50_ms']} ms, "
              f"p95 {sequential['take_token']['p95_ms']} ms", flush=True)
        contended = _contended(ctx, principal, args.threads, args.requests)
        print(f"{args.threads} threads on one key: p50 {contended['p50_ms']} ms, p95 {contended['p95_ms']} ms, "
              f"{contended['tokens_per_second']} tokens/s", flush=True)
    write_json(args.out, {"benchmark": "rate-limit", "machine": before, "loadavg_after": machine()["loadavg_1_5_15"],
                          "rounds": args.rounds, "sequential": sequential, "contended_one_key": contended})
    return 0
