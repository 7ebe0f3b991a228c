"""`memwarden bench replicas`: recall throughput with 0, 1 and 2 read replicas.

One fresh embedded PostgreSQL, and two hot standbys of it made with its own `pg_basebackup`
(`app.db.standby`), streaming on their own ports. One agent's memories are written once; then
`--threads` threads call the recall service in this process for `--seconds` per round, with the
reads routed to no replica (the primary), one, or both (read-your-writes lookups included: the
key's last write position is read on the primary before each routed read). Configurations
alternate 0,1,2,2,1,0 so drift in the machine's load hits them alike. The load average is
recorded: on a small machine the embedding and Python work of each recall, not the database,
bound the throughput, and replicas only move the database's share off the primary's cores.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

from app.bench.common import in_process_context, latency_summary, machine, scratch_dir, write_json
from app.config import Settings

ACTOR = {"kind": "bench", "id": "memwarden-bench"}
AGENT = "bench-agent"
TOPICS = ("keeps the spare fuses", "prefers green tea", "flies to Lisbon", "plays the cello", "is allergic to nuts",
          "runs on Tuesdays", "reads Borges", "fixes old radios", "grows tomatoes", "speaks Finnish")
QUERIES = ("where are the fuses?", "what does she drink?", "any travel plans?", "which instrument?",
           "food allergies?", "when does he run?", "favourite author?", "hobbies with electronics?")


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("replicas", help="recall throughput with 0, 1 and 2 read replicas (pg_basebackup standbys)")
    parser.add_argument("--memories", type=int, default=500, help="memories of the one agent recalled from")
    parser.add_argument("--threads", type=int, default=8, help="concurrent recall callers")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each round")
    parser.add_argument("--out", help="write the JSON report here")
    parser.set_defaults(func=run)


def _round(ctx, principal, threads: int, seconds: float) -> dict[str, Any]:
    from app.services.memory.recall import recall

    samples: list[float] = []
    errors = [0]
    lock = threading.Lock()
    start = threading.Barrier(threads + 1)
    stop_at = [0.0]

    def worker(n: int) -> None:
        mine: list[float] = []
        start.wait()
        i = n
        while time.monotonic() < stop_at[0]:
            began = time.perf_counter()
            try:
                recall(ctx, principal, {"agent_id": AGENT, "query": QUERIES[i % len(QUERIES)], "k": 5})
                mine.append((time.perf_counter() - began) * 1000)
            except Exception:
                with lock:
                    errors[0] += 1
            i += 1
        with lock:
            samples.extend(mine)

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    stop_at[0] = time.monotonic() + seconds
    began = time.monotonic()
    start.wait()
    for t in pool:
        t.join()
    elapsed = time.monotonic() - began
    return {"ops_per_second": round(len(samples) / elapsed, 1), "errors": errors[0], **latency_summary(samples)}


def _tuples_read(engine) -> int:
    """Rows the server has read for this database so far (its statistics, flushed about every second)."""
    from sqlalchemy import text

    with engine.connect() as conn:
        return int(conn.scalar(text("SELECT tup_returned + tup_fetched FROM pg_stat_database "
                                    "WHERE datname = current_database()")))


def _measured(ctx, principal, threads: int, seconds: float, primary, replicas: list) -> dict[str, Any]:
    """One round, with the rows each server read per recall: where the database work went."""
    before = [_tuples_read(e) for e in (primary, *replicas)]
    result = _round(ctx, principal, threads, seconds)
    time.sleep(1.2)  # backends flush their statistics at most once a second
    after = [_tuples_read(e) for e in (primary, *replicas)]
    served = max(1, result["n"])
    result["primary_rows_read_per_recall"] = round((after[0] - before[0]) / served, 1)
    result["replica_rows_read_per_recall"] = round(sum(a - b for a, b in zip(after[1:], before[1:])) / served, 1)
    result["loadavg_1"] = round(os.getloadavg()[0], 2)
    return result


def run(args: argparse.Namespace, settings: Settings) -> int:
    from app.db.database import make_engine
    from app.db.replicas import Replica, ReplicaSet
    from app.db.standby import make_standby
    from app.local_server import free_port
    from app.services.tenancy import apikeys
    from app.services.memory import remembering
    from app.services.tenancy.tenants import create_tenant

    before = machine()
    pool_size = args.threads + 2
    with scratch_dir() as data_dir, in_process_context(data_dir, pool_size=pool_size, read_budget_per_key=0,
                                                       read_budget_per_agent=0) as (ctx, urls):
        tenant = create_tenant(ctx, name="bench-replicas", actor=ACTOR)
        token = apikeys.create_key(ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", agents="*",
                                   actor=ACTOR).token
        principal = apikeys.authenticate(ctx, token)
        for i in range(args.memories):
            remembering.remember(ctx, principal, {"agent_id": AGENT, "type": "semantic",
                                               "content": f"Person {i} {TOPICS[i % len(TOPICS)]} (note {i})"})
        standbys = [make_standby(urls.embedded, data_dir.parent / f"replica{n}", free_port()) for n in (1, 2)]
        try:
            time.sleep(1.0)  # let both replay the seed
            replica_engines = [make_engine(s.url(), pool_size=pool_size) for s in standbys]
            contexts = {}
            for n in (0, 1, 2):
                replicas = None
                if n:
                    replicas = ReplicaSet(ctx.db.engine, [Replica(f"replica{i + 1}", e)
                                                          for i, e in enumerate(replica_engines[:n])], 0.05)
                contexts[n] = ctx.with_database(type(ctx.db)(ctx.db.engine, ctx.db.sessions, replicas=replicas))
            for n in (0, 1, 2):  # warm up: pools, plans, the embedder
                _round(contexts[n], principal, args.threads, 1.0)
            rounds: dict[int, list[dict[str, Any]]] = {0: [], 1: [], 2: []}
            for n in (0, 1, 2, 2, 1, 0):
                result = _measured(contexts[n], principal, args.threads, args.seconds, ctx.db.engine, replica_engines)
                rounds[n].append(result)
                print(f"{n} replica(s): {result['ops_per_second']} recalls/s, p50 {result['p50_ms']} ms, "
                      f"p95 {result['p95_ms']} ms, errors {result['errors']}, rows read per recall: primary "
                      f"{result['primary_rows_read_per_recall']}, replicas {result['replica_rows_read_per_recall']}, "
                      f"load {result['loadavg_1']}", flush=True)
            for engine in replica_engines:
                engine.dispose()
        finally:
            for standby in standbys:
                standby.remove()
    summary = {f"{n}_replicas": {"ops_per_second": round(sum(r["ops_per_second"] for r in rs) / len(rs), 1),
                                 "p50_ms": round(sum(r["p50_ms"] for r in rs) / len(rs), 3),
                                 "p95_ms": round(sum(r["p95_ms"] for r in rs) / len(rs), 3),
                                 "errors": sum(r["errors"] for r in rs),
                                 "primary_rows_read_per_recall": round(
                                     sum(r["primary_rows_read_per_recall"] for r in rs) / len(rs), 1),
                                 "replica_rows_read_per_recall": round(
                                     sum(r["replica_rows_read_per_recall"] for r in rs) / len(rs), 1)}
               for n, rs in rounds.items()}
    write_json(args.out, {"benchmark": "replicas", "machine": before, "loadavg_after": machine()["loadavg_1_5_15"],
                          "memories": args.memories, "threads": args.threads, "seconds_per_round": args.seconds,
                          "summary": summary, "rounds": {f"{n}_replicas": rs for n, rs in rounds.items()}})
    return 0
