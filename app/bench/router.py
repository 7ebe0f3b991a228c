"""`memwarden bench router`: what memory backends cost recall, and how fast the outbox delivers.

One process, one fresh embedded PostgreSQL, real stores: mem0 2.x in process (its vectors in pgvector)
and two memorywire `PgVectorStore`s (asyncpg, their own schemas in the same PostgreSQL), all three
embedding with the same int8 MiniLM as Memwarden. An agent holds `--memories` memories.

1. Backfill: the three backends are added; each is owed every live memory (`owe_existing`) and
   the delivery job (`deliver_due`, as the background job runs it) works them off: deliveries/s.
2. Recall with 0, 1, 2 and 3 backends routed, rounds alternating ABBA, `--queries` varied queries
   each: p50/p95 and the added cost per backend (service call, no HTTP).
3. Steady writes: `--writes` remembers while a delivery thread polls every 0.2 s: lag from
   owed to delivered (p50/p95) and the delivery rate under load.
4. Erasure: a fourth backend that loses every `--lose-every`-th delete (it answers the forget and
   keeps the item: `router_stores.LossyStore`) takes the agent; `--forgets` memories are forgotten
   and the job works the deletes off, each read back from its store: receipts per second, and the
   alerts the lossy store raised (each is retried until a read-back finds the item gone). Retries
   are brisk here (0.2 s base, 0.5 s cap) so the phase measures the read-back, not the backoff.
"""

from __future__ import annotations

import argparse
import threading
import time

from app.bench.common import in_process_context, latency_summary, machine, scratch_dir, table, write_json
from app.config import Settings
from app.core.timefmt import utcnow

ACTOR = {"kind": "bench", "id": "memwarden-bench"}
AGENT = "bench-agent"
TOPICS = ["coffee", "trains", "the garden", "tax forms", "the dentist", "football", "the printer", "a novel",
          "the kids' school", "a marathon", "the car", "a birthday", "the roof", "Python", "the budget"]


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("router", help="recall cost per memory backend, outbox delivery rate and lag")
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--queries", type=int, default=100, help="recalls per variant per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--forgets", type=int, default=200, help="memories forgotten in the erasure phase")
    parser.add_argument("--lose-every", type=int, default=10,
                        help="the lossy backend keeps every N-th item it is told to delete")
    parser.add_argument("--out", help="write the JSON report here")
    parser.set_defaults(func=run)


def _fact(i: int) -> str:
    return f"Note {i}: the user mentioned {TOPICS[i % len(TOPICS)]} on day {i // len(TOPICS)} and wants a reminder."


def _deliver_all(ctx) -> tuple[int, float]:
    from app.services.router import backends

    started, total = time.perf_counter(), 0
    while True:
        worked = backends.deliver_due(ctx)
        total += worked
        if worked == 0:
            return total, time.perf_counter() - started


def run(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.tenancy import apikeys
    from app.services.router import backends
    from app.services.memory import recall, remembering
    from app.services.tenancy.tenants import create_tenant

    with scratch_dir() as data_dir, in_process_context(data_dir, pool_size=8, backend_retry_base_seconds=0.2,
                                                       backend_retry_max_seconds=0.5) as (ctx, urls):
        tenant = create_tenant(ctx, name="bench-router", actor=ACTOR)
        token = apikeys.create_key(ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", agents="*",
                                   actor=ACTOR).token
        principal = apikeys.authenticate(ctx, token)
        ids = [remembering.remember(ctx, principal, {"agent_id": AGENT, "type": "semantic", "content": _fact(i)}).body["id"]
               for i in range(args.memories)]
        dsn = urls.admin_url.replace("postgresql+psycopg://", "postgresql://")
        specs = [("mem0", "mem0", {"factory": "app.stores.mem0_local:memory",
                                   "factory_args": {"dsn": dsn, "collection": "bench_mem0"}}),
                 ("wire-a", "memorywire", {"factory": "app.bench.router_stores:pgvector_store",
                                           "factory_args": {"dsn": dsn, "schema": "bench_wire_a"}}),
                 ("wire-b", "memorywire", {"factory": "app.bench.router_stores:pgvector_store",
                                           "factory_args": {"dsn": dsn, "schema": "bench_wire_b"}})]
        for name, kind, options in specs:
            backends.add_backend(ctx, tenant_name=tenant.name, name=name, kind=kind, options=options,
                                 timeout_ms=5000, actor=ACTOR)
        delivered, seconds = _deliver_all(ctx)
        backfill = {"deliveries": delivered, "seconds": round(seconds, 2),
                    "per_second": round(delivered / seconds, 1) if seconds else None}

        def routed(n: int):
            for index, (name, _, _) in enumerate(specs):
                backends.set_enabled(ctx, tenant_name=tenant.name, name=name, enabled=index < n, actor=ACTOR)
            _deliver_all(ctx)  # a resumed backend catches up before it is timed
            return apikeys.authenticate(ctx, token)  # a fresh key check sees the new routing

        samples: dict[int, list[float]] = {n: [] for n in range(4)}
        for r in range(args.rounds):
            for n in (range(4) if r % 2 == 0 else reversed(range(4))):
                caller = routed(n)
                for q in range(args.queries):
                    body = {"agent_id": AGENT, "query": f"what did the user say about {TOPICS[q % len(TOPICS)]}?"}
                    started = time.perf_counter()
                    answer = recall.recall(ctx, caller, body)
                    samples[n].append((time.perf_counter() - started) * 1000)
                    assert not answer.get("stores_failed"), answer["stores_failed"]
        latency = {f"{n}_backends": latency_summary(values) for n, values in samples.items()}
        base = latency["0_backends"]["p50_ms"]
        for n in (1, 2, 3):
            latency[f"{n}_backends"]["p50_added_ms"] = round(latency[f"{n}_backends"]["p50_ms"] - base, 3)

        routed(3)
        writes_from = utcnow()
        stop = threading.Event()

        def deliverer():
            while not stop.is_set():
                backends.deliver_due(ctx)
                stop.wait(0.2)

        worker = threading.Thread(target=deliverer, daemon=True)
        worker.start()
        started = time.perf_counter()
        for i in range(args.writes):
            remembering.remember(ctx, principal, {"agent_id": AGENT, "type": "semantic",
                                               "content": _fact(args.memories + i)})
        write_seconds = time.perf_counter() - started
        while backends.status(ctx, tenant_id=tenant.id) and any(s["pending"]
                                                                  for s in backends.status(ctx, tenant_id=tenant.id)):
            time.sleep(0.1)
        drained = time.perf_counter() - started
        stop.set()
        worker.join()
        lags = backends.delivery_lags(ctx, tenant_id=tenant.id, since=writes_from)
        lag_ms = latency_summary([v * 1000 for v in lags])
        steady = {"writes": args.writes, "backends": 3, "write_seconds": round(write_seconds, 2),
                  "drained_seconds": round(drained, 2), "deliveries_per_second": round(len(lags) / drained, 1),
                  "lag_ms": lag_ms}
        erasure_report = _erasure(ctx, tenant, principal, ids[:args.forgets], dsn, args.lose_every)
    report = {"machine": machine(), "memories": args.memories, "backfill": backfill, "recall": latency,
              "steady_writes": steady, "erasure": erasure_report}
    rows = [[f"{n} backends", latency[f"{n}_backends"]["p50_ms"], latency[f"{n}_backends"]["p95_ms"],
             latency[f"{n}_backends"].get("p50_added_ms", 0.0)] for n in range(4)]
    print(table(rows, ["recall", "p50 ms", "p95 ms", "p50 added ms"]))
    print(f"backfill: {backfill['deliveries']} deliveries in {backfill['seconds']} s ({backfill['per_second']}/s)")
    print(f"steady writes: {steady['writes']} remembers × 3 backends, lag p50 {lag_ms['p50_ms']} ms, "
          f"p95 {lag_ms['p95_ms']} ms, {steady['deliveries_per_second']} deliveries/s")
    e = erasure_report
    print(f"erasure: {e['forgotten']} forgets × {e['backends']} backends, {e['receipts']} receipts in {e['seconds']} s "
          f"({e['receipts_per_second']}/s); the lossy backend kept {e['alerts']} deletes, each an alert and a retry, "
          f"and signed {e['lossy_receipts']} receipts once read-backs found the items gone")
    write_json(args.out, report)
    return 0


def _erasure(ctx, tenant, principal, ids: list[str], dsn: str, lose_every: int) -> dict:
    """Phase 4: forget `ids` with four backends routed, one of them losing deletes."""
    from app.services.router import backends
    from app.services.audit import erasure
    from app.services.memory import memories

    backends.add_backend(ctx, tenant_name=tenant.name, name="lossy", kind="memorywire", timeout_ms=5000, actor=ACTOR,
                         options={"factory": "app.bench.router_stores:lossy_pgvector_store",
                                  "factory_args": {"dsn": dsn, "schema": "bench_lossy", "lose_every": lose_every}})
    _deliver_all(ctx)
    since = utcnow()
    for memory_id in ids:  # one at a time: a bulk forget waits for a reviewer under the default policy
        outcome = memories.forget(ctx, principal, {"agent_id": AGENT, "ids": [memory_id]})
        assert outcome.status == 200, outcome.body
    started = time.perf_counter()
    # Until every delete is confirmed: a lost one is owed again after its (brisk) backoff.
    while any(s["pending"] for s in backends.status(ctx, tenant_id=tenant.id)):
        if backends.deliver_due(ctx) == 0:
            time.sleep(0.05)
    seconds = time.perf_counter() - started
    receipts, alerts = erasure.counts_since(ctx, tenant_id=tenant.id, since=since)
    lossy = sum(1 for i in ids for r in erasure.receipts_listed(ctx, tenant_id=tenant.id, memory_id=i)
                if r["store"] == "lossy")
    return {"forgotten": len(ids), "backends": 4, "lose_every": lose_every, "receipts": receipts,
            "seconds": round(seconds, 2), "receipts_per_second": round(receipts / seconds, 1) if seconds else None,
            "alerts": alerts, "lossy_receipts": lossy, "failed": sum(s["failed"] for s in backends.status(ctx, tenant_id=tenant.id)),
            "every_store_confirmed": receipts == 4 * len(ids)}
