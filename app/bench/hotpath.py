"""`memwarden bench hotpath`: where one remember, one recall and one approval spend their time, measured in ways a
loaded machine does not distort.

The full ASGI app (auth, rate limit, policy, redaction, screening, audit, commit) runs in this
process against a fresh embedded PostgreSQL, driven by httpx's ASGI transport on this thread's event loop. Per request it counts

- database round trips: every statement the app sends (`before_cursor_execute`), the BEGIN psycopg
  sends ahead of the first statement of a transaction, and each COMMIT/ROLLBACK that reaches the
  server (one on an idle connection sends nothing), split by statement so a regression names it;
- CPU milliseconds of this process (`time.process_time`, all threads: the event loop, the thread
  pool and the embedder), which other processes' load inflates far less than wall time;
- optionally a cProfile of the timed requests (`--profile FILE`, cumulative top functions printed);
- the floor a request cannot go below here, sampled beside every timed request so the
  same load falls on both: one single-text embedding (wall), a `/healthz` exchange through the same
  client, and one durable commit (an autocommit statement that takes a transaction id, so its
  commit record is flushed to the WAL); and each operation's p50/p95 over that floor's p50, and its
  CPU over the embedder's CPU.

PostgreSQL's own CPU is not in these numbers (another process); round trips stand in for it.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import re
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from psycopg.pq import TransactionStatus
from sqlalchemy import event

from app.bench import common
from app.db import prepared

FACTS = [
    "{u} prefers window seats on long flights and always books row {n}.",
    "{u} keeps a sourdough starter and feeds it every {n} hours.",
    "{u} runs a 10k every Sunday and wants to finish under {n} minutes.",
    "{u} is learning Portuguese and has done {n} lessons so far.",
    "{u}'s laptop is a ThinkPad that is {n} years old.",
]
QUERIES = ["where does {u} like to sit on planes?", "what does {u} bake?", "how fast does {u} run?",
           "which language is {u} learning?", "what is the capital of Peru?"]


class StatementCounter:
    """Counts round trips on an engine, by statement kind, while `active`: SQLAlchemy's statements
    and the pre-built ones psycopg runs itself (`app.db.prepared`)."""

    def __init__(self, engine) -> None:
        self.active = False
        self.engine = engine
        self.kinds: Counter[str] = Counter()
        self.riders: Counter[str] = Counter()
        """Statements sent in the same round trip as another (a pipeline): not round trips."""
        self.open: set[int] = set()  # driver connections whose transaction this counter saw begin
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine, "commit", self._commit)
        event.listen(engine, "rollback", self._rollback)
        prepared.observers.append(self._prepared)

    def _statement(self, conn, cursor, statement, parameters, context, executemany) -> None:
        self._prepared(statement, conn.connection.dbapi_connection)

    def _prepared(self, statement: str, dbapi, params=None) -> None:
        if self.active:
            if not dbapi.autocommit and dbapi.info.transaction_status == TransactionStatus.IDLE:
                self.kinds["BEGIN"] += 1  # psycopg's own: a round trip of its own, in a pipeline too
                self.open.add(id(dbapi))
            # A statement sent with the one before it (`prepared.PIPELINED`) has no round trip of
            # its own: named, not counted.
            if statement.startswith(prepared.PIPELINED):
                self.riders[_kind(statement[len(prepared.PIPELINED):])] += 1
            else:
                self.kinds[_kind(statement)] += 1

    def _commit(self, conn) -> None:
        # The audit log's commit hook runs first and may already have sent the transaction's deferred
        # INSERTs (audit entries, events, new memories) with its COMMIT in one pipeline (past the statement events): one round trip.
        dbapi = conn.connection.dbapi_connection
        if self.active and id(dbapi) in self.open:
            self.open.discard(id(dbapi))
            idle = dbapi.info.transaction_status == TransactionStatus.IDLE
            self.kinds["COMMIT, pipelined with deferred INSERTs" if idle else "COMMIT"] += 1

    def _rollback(self, conn) -> None:
        if conn.invalidated or conn.closed:
            return
        dbapi = conn.connection.dbapi_connection
        if self.active and id(dbapi) in self.open:
            self.open.discard(id(dbapi))
            self.kinds["ROLLBACK"] += 1

    def take(self) -> Counter[str]:
        taken, self.kinds = self.kinds, Counter()
        return taken

    def take_riders(self) -> Counter[str]:
        taken, self.riders = self.riders, Counter()
        return taken


def _kind(statement: str) -> str:
    """A statement's text, whitespace collapsed and cut short: names it in the report."""
    return re.sub(r"\s+", " ", statement.strip())[:90]


def run(args: argparse.Namespace, settings=None) -> int:
    """`memwarden bench hotpath`: print (and with --out write) the report."""
    measure_http(args) if args.http else measure(args)
    return 0


def measure_http(args: argparse.Namespace) -> dict[str, Any]:
    """The near-the-floor goal over real HTTP: `memwarden serve` in its own process on a fresh embedded
    PostgreSQL, one keep-alive client in this process, remembers and recalls one at a time, each
    beside a sample of the floor (an embedding by the same model in this process, a `/healthz`
    exchange over the same connection, a durable commit on the server's database). Server CPU is
    the serving process's user + system time (`/proc`) over all timed requests of an operation,
    per request (a mean: the kernel counts it in ticks); the embedder's CPU is measured here."""
    from app.db.embedded import start_embedded
    from app.db.database import make_engine
    from app.embeddings import get_embedder

    common.quiet_http_logs()
    embedder = get_embedder()
    with common.scratch_dir() as data_dir, common.serve(data_dir) as server, \
            common.client(server.base_url, common.provision_via_cli(data_dir)) as http:
        engine = make_engine(start_embedded(data_dir).app_url, pool_size=1)  # joins the server's cluster
        floor_samples: dict[str, list[float]] = {"embedding_ms": [], "healthz_ms": [], "durable_commit_ms": []}
        result: dict[str, Any] = {}
        try:
            for i in range(args.warmup):
                http.post("/v1/memories/remember", json=remember_body(i)).raise_for_status()
                http.post("/v1/memories/recall", json=recall_body(i)).raise_for_status()
            for name, body in (("remember", remember_body), ("recall", recall_body)):
                wall: list[float] = []
                cpu = 0.0
                for i in range(args.requests):
                    _sample_floor_http(embedder, http, engine, floor_samples, i)
                    cpu_started, started = _process_cpu_s(server.proc.pid), time.perf_counter()
                    response = http.post(f"/v1/memories/{name}", json=body(args.warmup + i))
                    wall.append((time.perf_counter() - started) * 1000)
                    cpu += _process_cpu_s(server.proc.pid) - cpu_started
                    assert response.status_code in (200, 201), response.text
                result[name] = {"requests": args.requests,
                                "server_cpu_ms_per_request": {"mean": round(cpu * 1000 / args.requests, 3)},
                                "wall_ms_over_http": {"p50": round(common.percentile(wall, 50), 3),
                                                      "p95": round(common.percentile(wall, 95), 3)}}
        finally:
            engine.dispose()
    embed_cpu = _embedder_cpu_ms_of(embedder)
    floor = floor_summary(floor_samples)
    report = {
        "benchmark": "hotpath-http",
        "method": measure_http.__doc__.strip().replace("\n    ", " "),
        "embedder_cpu_ms_per_text": embed_cpu,
        **result,
        "floor": floor,
        "near_floor": near_floor(result, floor, embed_cpu, wall_key="wall_ms_over_http",
                                 cpu=("server_cpu_ms_per_request", "mean")),
        "machine": common.machine(),
    }
    print(json.dumps(report, indent=2))
    print(floor_table(report, wall_key="wall_ms_over_http", cpu=("server_cpu_ms_per_request", "mean")))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return report


def remember_body(i: int) -> dict[str, Any]:
    """The `i`th remember of the hot-path workload (seven users of agent "hot", the FACTS templates)."""
    user = f"user{i % 7}"
    return {"agent_id": "hot", "user_id": user, "type": "semantic",
            "content": FACTS[i % len(FACTS)].format(u=user.capitalize(), n=i)}


def recall_body(i: int) -> dict[str, Any]:
    """The `i`th recall of the hot-path workload (the QUERIES templates, k 5)."""
    user = f"user{i % 7}"
    return {"agent_id": "hot", "user_id": user, "k": 5, "query": QUERIES[i % len(QUERIES)].format(u=user.capitalize())}


def _sample_floor_http(embedder, http, engine, samples: dict[str, list[float]], i: int) -> None:
    started = time.perf_counter()
    embedder.embed([QUERIES[i % len(QUERIES)].format(u=f"Floor{i}")])
    samples["embedding_ms"].append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    http.get("/healthz").raise_for_status()
    samples["healthz_ms"].append((time.perf_counter() - started) * 1000)
    samples["durable_commit_ms"].append(_durable_commit_ms(engine))


def _process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Round trips and CPU per request of each operation, in process."""
    from app.main import create_app
    from app.services.tenancy.apikeys import create_key
    from app.services.tenancy.tenants import create_tenant

    with common.scratch_dir() as data_dir, \
            common.in_process_context(data_dir, pool_size=5, secret_key="hotpath-bench") as (ctx, _urls):
        counter = StatementCounter(ctx.db.engine)
        tenant = create_tenant(ctx, name="hotpath", actor=common.BENCH_ACTOR)
        owner = None
        if args.key_owner:  # the key belongs to a reviewer: each approval is counted as theirs (one read more)
            from app.services.tenancy.users import create_user

            owner = create_user(ctx, username="hotpath-reviewer", password="hotpath-bench-password",
                                tenant_id=tenant.id, role="reviewer", actor=common.BENCH_ACTOR).id
        # The agent's key writes and a reviewer's key approves: the author of a change never decides it.
        token = create_key(ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", actor=common.BENCH_ACTOR).token
        decider = create_key(ctx, tenant_id=tenant.id, scopes="memory:read,review:decide",
                             actor=common.BENCH_ACTOR, owner=owner).token
        headers = {"Authorization": f"Bearer {token}"}
        app = create_app(ctx.settings, ctx=ctx)
        result, profiler, (embed_cpu, screen_cpu) = asyncio.run(
            _drive(app, ctx, headers, {"Authorization": f"Bearer {decider}"}, counter, args))
    floor = result.pop("floor")
    report = {
        "benchmark": "hotpath",
        "method": "in-process ASGI app (httpx ASGITransport) on a fresh embedded PostgreSQL, default settings "
                  "(rate limit on); round trips = statements + the BEGIN psycopg sends + COMMIT/ROLLBACK that reach "
                  "the server, per request; "
                  "CPU = this process's time.process_time per request (PostgreSQL not included)",
        "key_owner": bool(args.key_owner),
        "embedder_cpu_ms_per_text": embed_cpu,
        "screening_cpu_ms_per_write": screen_cpu,
        **result,
        "floor": floor,
        "near_floor": near_floor(result, floor, embed_cpu),
        "machine": common.machine(),
    }
    if profiler:
        profiler.dump_stats(args.profile)
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(args.top)
        print(text.getvalue())
    print(json.dumps(report, indent=2))
    print(floor_table(report))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return report


async def _drive(app, ctx, headers: dict[str, str], reviewer: dict[str, str], counter: StatementCounter,
                 args: argparse.Namespace):
    """Warm up, then time `args.requests` remembers and recalls, one at a time like one agent would,
    and approvals of staged remembers by `reviewer` (another key than the agent's `headers`)."""
    import anyio.to_thread
    import httpx

    profiler = cProfile.Profile(time.thread_time) if args.profile else None  # CPU of the calling thread, not waits
    if profiler:
        # cProfile sees one thread: run the thread-pool work inline on the event loop's thread.
        async def inline(func, *fargs, **kwargs):
            return func(*fargs)
        anyio.to_thread.run_sync = inline
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench", headers=headers) as http:
        async def remember(i: int) -> None:
            response = await http.post("/v1/memories/remember", json=remember_body(i))
            assert response.status_code == 201, response.text

        async def recall(i: int) -> None:
            response = await http.post("/v1/memories/recall", json=recall_body(i))
            assert response.status_code == 200, response.text

        staged: list[str] = []

        async def stage(i: int) -> None:
            body = {"agent_id": "hot", "user_id": "reviewed", "type": "semantic", "approval_required": True,
                    "content": FACTS[i % len(FACTS)].format(u="Reviewed", n=i)}
            response = await http.post("/v1/memories/remember", json=body)
            assert response.status_code == 202, response.text
            staged.append(response.json()["change_id"])

        async def approve(i: int) -> None:
            response = await http.post(f"/v1/changes/{staged.pop()}/approve", json={}, headers=reviewer)
            assert response.status_code == 200, response.text

        for i in range(args.warmup):  # model, pool, plan caches, per-tenant caches
            await remember(i)
            await recall(i)
        for i in range(args.requests + args.warmup):
            await stage(i)
        for i in range(args.warmup):
            await approve(i)
        floor_samples: dict[str, list[float]] = {"embedding_ms": [], "healthz_ms": [], "durable_commit_ms": []}

        async def sample_floor(i: int) -> None:
            """One sample of each floor part (not counted, not profiled)."""
            started = time.perf_counter()
            ctx.embedder.embed([QUERIES[i % len(QUERIES)].format(u=f"Floor{i}")])
            floor_samples["embedding_ms"].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            response = await http.get("/healthz")
            floor_samples["healthz_ms"].append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.text
            floor_samples["durable_commit_ms"].append(_durable_commit_ms(ctx.db.engine))

        result = {}
        for name, op in (("remember", remember), ("recall", recall), ("approve", approve)):
            cpu: list[float] = []
            wall: list[float] = []
            trips: list[int] = []
            kinds: Counter[str] = Counter()
            riders: Counter[str] = Counter()
            counter.take()
            counter.take_riders()
            for i in range(args.requests):
                await sample_floor(i)
                counter.active = True
                if profiler:
                    profiler.enable()
                started, wall_started = time.process_time(), time.perf_counter()
                await op(args.warmup + i)
                cpu.append((time.process_time() - started) * 1000)
                wall.append((time.perf_counter() - wall_started) * 1000)
                if profiler:
                    profiler.disable()
                counter.active = False
                taken = counter.take()
                trips.append(sum(taken.values()))
                kinds.update(taken)
                riders.update(counter.take_riders())
            result[name] = {
                "requests": args.requests,
                "round_trips_per_request": round(statistics.fmean(trips), 2),
                "round_trips_by_kind": {k: round(v / args.requests, 2) for k, v in kinds.most_common()},
                "sent_with_another_by_kind": {k: round(v / args.requests, 2) for k, v in riders.most_common()},
                "cpu_ms_per_request": {"mean": round(statistics.fmean(cpu), 3),
                                       "p50": round(common.percentile(cpu, 50), 3)},
                "wall_ms_in_process": {"p50": round(common.percentile(wall, 50), 3),
                                       "p95": round(common.percentile(wall, 95), 3)},
            }
        result["floor"] = floor_summary(floor_samples)
    return result, profiler, (_embedder_cpu_ms(ctx), _screening_cpu_ms(ctx))


def _durable_commit_ms(engine) -> float:
    """Wall ms of one durable commit: an autocommit statement that takes a transaction id, so the
    server writes and flushes a commit record before it answers (one round trip)."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        started = time.perf_counter()
        conn.exec_driver_sql("SELECT txid_current()")
        return (time.perf_counter() - started) * 1000


def floor_summary(samples: dict[str, list[float]]) -> dict[str, Any]:
    """p50/p95 of each floor part and the floor itself: the sum of the parts' p50s."""
    parts = {name: {"p50": round(common.percentile(values, 50), 3), "p95": round(common.percentile(values, 95), 3)}
             for name, values in samples.items()}
    return {**parts, "samples": len(samples["embedding_ms"]),
            "floor_ms_p50": round(sum(part["p50"] for part in parts.values()), 3)}


GOALS = {"p50_over_floor_max": 1.5, "p95_over_floor_max": 2.0, "remember_cpu_over_embedding_cpu_max": 1.5}
"""The hot path's goal: "near the floor"."""


def near_floor(result: dict[str, Any], floor: dict[str, Any], embed_cpu: float, *,
               wall_key: str = "wall_ms_in_process", cpu: tuple[str, str] = ("cpu_ms_per_request", "p50")
               ) -> dict[str, Any]:
    """Each operation's latency (`result[op][wall_key]`) over the floor's p50, remember's CPU
    (`result["remember"][cpu[0]][cpu[1]]`) over one embedding's, and the goals."""
    base = floor["floor_ms_p50"]
    ratios = {op: {p: round(result[op][wall_key][p] / base, 2) for p in ("p50", "p95")}
              for op in ("remember", "recall")}
    cpu_ratio = round(result["remember"][cpu[0]][cpu[1]] / embed_cpu, 2)
    goals = {f"{op}_{p}_over_floor_le_{GOALS[f'{p}_over_floor_max']}":
             ratios[op][p] <= GOALS[f"{p}_over_floor_max"] for op in ratios for p in ("p50", "p95")}
    goals["remember_cpu_over_embedding_cpu_le_1.5"] = cpu_ratio <= GOALS["remember_cpu_over_embedding_cpu_max"]
    return {"over_floor": ratios, "remember_cpu_over_embedding_cpu": cpu_ratio, "goals": goals}


def floor_table(report: dict[str, Any], *, wall_key: str = "wall_ms_in_process",
                cpu: tuple[str, str] = ("cpu_ms_per_request", "p50")) -> str:
    """The floor, each operation's ratios to it and the goals, as text."""
    floor, near = report["floor"], report["near_floor"]
    parts = ", ".join(f"{name} {floor[name]['p50']:.2f}" for name in ("embedding_ms", "healthz_ms",
                                                                        "durable_commit_ms"))
    rows = [f"floor p50 {floor['floor_ms_p50']:.2f} ms ({parts}); load {report['machine']['loadavg_1_5_15']}"]
    for op in ("remember", "recall"):
        wall, ratio = report[op][wall_key], near["over_floor"][op]
        rows.append(f"{op:9} p50 {wall['p50']:7.2f} ms = {ratio['p50']:.2f}x floor   "
                    f"p95 {wall['p95']:7.2f} ms = {ratio['p95']:.2f}x floor")
    rows.append(f"remember CPU {cpu[1]} {report['remember'][cpu[0]][cpu[1]]:.2f} ms = "
                f"{near['remember_cpu_over_embedding_cpu']:.2f}x the embedder's {report['embedder_cpu_ms_per_text']:.2f}")
    missed = [name for name, ok in near["goals"].items() if not ok]
    rows.append("goal 1 met" if not missed else f"goal 1 missed: {', '.join(missed)}")
    return "\n".join(rows)


def _screening_cpu_ms(ctx, n: int = 200) -> dict[str, float]:
    """CPU ms of screening one remember's content (all detectors, the semantic one on the embedding
    remember already has), p50 and p95 over ``n`` facts; and without the semantic signal, for its share.
    The neighbour lookup for contradictions is a database statement, counted in the round trips."""
    from app.core.screening import screen

    texts = [FACTS[i % len(FACTS)].format(u=f"user{i}", n=i) for i in range(n)]
    vectors = ctx.embedder.embed(texts)
    timings: dict[str, list[float]] = {"with_semantic": [], "rules_only": []}
    for text, vector in zip(texts, vectors):
        for name, kwargs in (("with_semantic", {"embedding": vector, "embedder": ctx.embedder.name}),
                             ("rules_only", {})):
            started = time.process_time()
            screen(text, memory_type="semantic", **kwargs)
            timings[name].append((time.process_time() - started) * 1000)
    # p95 too: the semantic signal's second stage (a model call) runs only for the few writes its
    # first stage is unsure about, which a median hides.
    return {f"p{q}_{name}": round(common.percentile(values, q), 3) for name, values in timings.items() for q in (50, 95)}


def _embedder_cpu_ms(ctx, n: int = 50) -> float:
    """CPU ms of one single-text embedding call, what every remember and recall pays once."""
    return _embedder_cpu_ms_of(ctx.embedder, n)


def _embedder_cpu_ms_of(embedder, n: int = 50) -> float:
    started = time.process_time()
    for i in range(n):
        embedder.embed([f"calibration sentence number {i} about nothing in particular"])
    return round((time.process_time() - started) * 1000 / n, 3)


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("hotpath", help="round trips and CPU ms per remember/recall (in process)")
    parser.add_argument("--requests", type=int, default=200, help="timed requests per operation")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--profile", help="write a cProfile of the timed requests here")
    parser.add_argument("--top", type=int, default=40, help="profile rows printed")
    parser.add_argument("--out", help="write the JSON report here (e.g. hotpath.json)")
    parser.add_argument("--http", action="store_true",
                        help="time remember and recall over HTTP against `memwarden serve` (the near-the-floor goal), "
                             "with the floor and the server process's CPU, instead of in process")
    parser.add_argument("--key-owner", action="store_true",
                        help="in process: the key belongs to a reviewer, so each approval is counted as theirs "
                             "(the two-person rule)")
    parser.set_defaults(func=run)


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__)
    add_parser(cli.add_subparsers(dest="command", required=True))
    parsed = cli.parse_args(["hotpath", *os.sys.argv[1:]])
    parsed.func(parsed)
