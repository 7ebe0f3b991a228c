"""`memwarden bench scale`: recall latency and ingest rate at N memories on a fresh embedded database.

1. A fresh data dir; this process opens the embedded PostgreSQL through the services (migrated as
   `memwarden serve` would), creates a tenant and a key.
2. Synthetic but realistic memories (templates in `app.bench.scale_data`: facts about the people an
   agent serves, each with the question a later turn would ask) are generated with a seeded RNG: `--memories N`
   spread at random over `--agents A` agents (`--users-per-agent` people each), plus, unless
   `--big-agent 0`, one agent holding `--big-agent M` memories (default 50,000; `--big-agent
   10000,100000` makes one agent per size, `agent-big-<size>`), all interleaved
   as they would arrive. Each distinct text is embedded once, in batches with the bundled model
   (the templates repeat, as real facts do: ~30% of 1M rows are distinct texts; a repeated text
   gets the vector it would get on its own, up to float rounding), and the rows are bulk-loaded with
   binary COPY into `memories` with the columns `remember` writes (status 'live', live_from set,
   a random 32-byte digest_key, ids in the app's format). The table's secondary indexes are dropped
   for the load and rebuilt after it with their original definitions (HNSW included), then
   VACUUM ANALYZE. Embedding, COPY and index build are timed separately.
3. `memwarden serve` (subprocess) joins the same cluster; `--queries Q` recall requests go over HTTP
   (keep-alive client, after a warm-up) to random agents, and Q more to the big agent. Each asks the
   question of a random stored memory, so found@5 (that memory, or one with the identical text in
   the same scope, among the hits) is reported as a sanity check, not a quality metric; for each
   big agent, how much of an exact scan's top 20 recall's vector search returns (found@20) is
   measured in process. Scopes up to FULL_SCAN_MAX (2,000) rows are ranked exactly; larger ones
   are shortlisted over their binary codes held in the server process and re-ranked (filtered
   requests, which none of these are, take the code-scan or HNSW statements). The goal checked:
   p95 <= 30 ms with found@20 >= 0.95. One query
   of each kind is replayed in-process under EXPLAIN (ANALYZE, BUFFERS) and the plans are kept in
   the report, with how many of the recall counters' row updates were HOT; and for each big agent,
   every vector path's statement (full scan; binary codes with 100, 200, 400 re-ranked; HNSW with
   `ef_search` 100, 200, 400; the codes held in process, 200 re-ranked, their numpy time added to
   the statement's) on 30 of its questions, whichever path recall takes there: found@20
   against an exact scan, median execution time and buffers (`scale_measure.PATH_VARIANTS`).

A load takes most of the run (about half an hour at 1M on 2 cores). `--data-dir DIR` keeps it, with
the bench key and the rows' ids beside it; `--reuse DIR` then measures recall on that database
again (same `--memories/--agents/--big-agent/--seed`) without reloading, e.g. after a change to
the recall path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.bench import common
from app.bench.scale_data import BIG_AGENT, Row, big_agents, load, plan
from app.bench.scale_measure import (
    explain,
    measure,
    row_updates,
    scope_path,
    vector_paths,
    vector_vs_exact,
)

STATE_FILE = "bench-scale.json"  # beside the kept data dir: config, bench key, ingest report
IDS_FILE = "bench-scale-ids.txt"  # the loaded rows' ids, one per line, in plan order


def _save_load(root: Path, config: dict[str, Any], token: str, ingest: dict[str, Any], rows: list[Row]) -> None:
    (root / IDS_FILE).write_text("".join(r.id + "\n" for r in rows), encoding="utf-8")
    (root / STATE_FILE).write_text(json.dumps({"config": _load_config(config), "token": token, "ingest": ingest}),
                                   encoding="utf-8")


def _reuse_load(root: Path, config: dict[str, Any], rows: list[Row]) -> tuple[str, dict[str, Any]]:
    """The bench key and ingest report of a kept load of the same plan; the rows get their ids."""
    state = json.loads((root / STATE_FILE).read_text(encoding="utf-8"))
    if state["config"] != _load_config(config):
        raise SystemExit(f"--reuse {root} holds a different load: {state['config']}")
    ids = (root / IDS_FILE).read_text(encoding="utf-8").split()
    for row, row_id in zip(rows, ids, strict=True):
        row.id = row_id
    return state["token"], {**state["ingest"], "reused": True}


def _load_config(config: dict[str, Any]) -> dict[str, Any]:
    """What decides the loaded rows (not how they are queried)."""
    return {k: v for k, v in config.items() if k not in ("queries", "embed_batch")}


@contextlib.contextmanager
def _data_dir(args: argparse.Namespace) -> Iterator[Path]:
    if not args.reuse:
        with common.scratch_dir(args.data_dir) as data_dir:
            yield data_dir
        return
    root = Path(args.reuse).expanduser().resolve()
    if not (root / STATE_FILE).is_file():
        raise SystemExit(f"--reuse {root}: no {STATE_FILE}; load it first with --data-dir")
    try:
        yield root / ".memwarden"
    finally:
        common.stop_cluster(root / ".memwarden")


def _big_key(agent: str) -> str:
    """The report's key for a large agent: `recall_big_agent` for the lone `agent-big`."""
    return "recall_big_agent" if agent == BIG_AGENT else "recall_" + agent.replace("-", "_")


def _big_config(sizes: list[int]) -> int | list[int]:
    """As the config recorded it before there could be several large agents (a kept load compares it)."""
    return sizes[0] if len(sizes) == 1 else sizes


def run(args: argparse.Namespace) -> dict[str, Any]:
    from app.config import Settings
    from app.services.memory import recall  # noqa: F401  (fail now, not after an hour of loading)
    from app.services.tenancy.apikeys import authenticate, create_key
    from app.services.runtime.context import AppContext
    from app.services.tenancy.tenants import create_tenant

    rows = plan(args.seed, args.memories, args.agents, args.users_per_agent, args.big_agent)
    report: dict[str, Any] = {
        "benchmark": "scale",
        "config": {"memories": args.memories, "agents": args.agents, "users_per_agent": args.users_per_agent,
                   "big_agent_memories": _big_config(args.big_agent), "total_rows": len(rows), "queries": args.queries,
                   "seed": args.seed, "embed_batch": args.batch},
    }
    with _data_dir(args) as data_dir:
        # The in-process EXPLAIN replays a recall under this key too: budgets that never refuse, as the server's.
        settings = Settings(data_dir=data_dir, rate_limit_per_minute=0, read_budget_per_key=100_000_000,
                            read_budget_per_agent=100_000_000)
        ctx = AppContext.open(settings)
        try:
            if args.reuse:
                token, report["ingest"] = _reuse_load(data_dir.parent, report["config"], rows)
            else:
                tenant = create_tenant(ctx, name="bench-scale", actor=common.BENCH_ACTOR)
                token = create_key(ctx, tenant_id=tenant.id, scopes="memory:read,memory:write",
                                   actor=common.BENCH_ACTOR).token
                print(f"loading {len(rows):,} memories ({args.memories:,} over {args.agents:,} agents"
                      + "".join(f" + {size:,} in {agent}" for agent, size in big_agents(args.big_agent)) + ")",
                      flush=True)
                report["ingest"] = load(ctx.db.embedded.admin_url, tenant.id, rows, batch=args.batch,
                                        chunk=args.chunk, seed=args.seed)
                if args.data_dir:
                    _save_load(data_dir.parent, report["config"], token, report["ingest"], rows)
            rng = random.Random(args.seed + 2)
            names = [agent for agent, _ in big_agents(args.big_agent)]
            spread = [r for r in rows if r.agent not in names]
            bigs = {agent: [r for r in rows if r.agent == agent] for agent in names}
            warm = min(50, args.queries)
            # Budgets so high they never refuse: their cost per recall is measured, not their refusals.
            env = common.clean_env(data_dir, MEMWARDEN_RATE_LIMIT_PER_MINUTE="0",
                                   MEMWARDEN_READ_BUDGET_PER_KEY="100000000", MEMWARDEN_READ_BUDGET_PER_AGENT="100000000")
            updates_before = row_updates(ctx)
            with common.serve(data_dir, env=env) as server:
                print(f"recall: {args.queries} queries on random agents" + "".join(f", on {a}" for a in names),
                      flush=True)
                if spread:
                    report["recall_spread"] = {
                        "scope_rows": round(len(spread) / args.agents, 1), "path": scope_path(len(spread) / args.agents, len(rows)),
                        **measure(server.base_url, token, rng.sample(spread, min(args.queries, len(spread))),
                                  rng.sample(spread, min(warm, len(spread))))}
                for agent, big in bigs.items():
                    report[_big_key(agent)] = {
                        "agent": agent, "scope_rows": len(big), "path": scope_path(len(big), len(rows)),
                        **measure(server.base_url, token, rng.sample(big, min(args.queries, len(big))),
                                  rng.sample(big, min(warm, len(big))))}
            report["recall_tracking_updates"] = row_updates(ctx, since=updates_before)
            common.write_json(args.out, report)  # the measurements are safe even if EXPLAIN fails
            principal = authenticate(ctx, token)
            for agent, big in bigs.items():
                print(f"vector search against an exact scan of {agent}", flush=True)
                report[_big_key(agent)]["vector_vs_exact"] = vector_vs_exact(
                    ctx, principal.tenant_id, rng.sample(big, min(100, len(big))))
                print(f"each vector path's statement on {agent} (EXPLAIN ANALYZE)", flush=True)
                report[_big_key(agent)]["vector_paths"] = vector_paths(
                    ctx, principal.tenant_id, rng.sample(big, min(30, len(big))))
            report["explain"] = {}
            for agent, pool in (("spread", spread), *bigs.items()):
                if pool:
                    try:
                        report["explain"][agent] = explain(ctx, principal, rng.choice(pool))
                    except Exception as exc:  # diagnostics only; never lose the run for them
                        report["explain"][agent] = [f"EXPLAIN failed: {type(exc).__name__}: {exc}"]
        finally:
            ctx.close()
    return report


def summary(report: dict[str, Any]) -> str:
    ing = report["ingest"]
    embedding = (f"{ing['embedding_rate_per_s']:,.0f} texts/s "
                 f"({ing.get('distinct_texts', ing['rows']):,} distinct, {ing['embed_s']:.0f} s)")
    rows = [("ingest: embedding", embedding),
            ("ingest: COPY insert", f"{ing['insert_rate_per_s']:,.0f} rows/s ({ing['copy_s']:.1f} s)"),
            ("ingest: embed + insert", f"{ing['ingest_rate_per_s']:,.0f} memories/s"),
            ("index rebuild", ", ".join(f"{k} {v:.0f}s" for k, v in ing["index_build_s"].items())),
            ("table / indexes", f"{ing['table_size']} / {ing['indexes_size']}")]
    keys = [("recall_spread", "recall, random agents")] + [
        (key, f"recall, {report[key]['agent'] if 'agent' in report[key] else BIG_AGENT}")
        for key in report if key.startswith("recall_big_agent") or key.startswith("recall_agent_big")]
    for key, label in keys:
        if key in report:
            r = report[key]
            lat = r["latency"]
            rows.append((f"{label} ({r['scope_rows']:,} rows/scope, {r['path']})",
                         f"p50 {lat['p50_ms']:.1f} / p95 {lat['p95_ms']:.1f} / p99 {lat['p99_ms']:.1f} ms; "
                         f"found@5 {r['found_at_5']:.2f}"
                         + (f"; vector found@20 vs exact {r['vector_vs_exact']['mean_share_of_exact_top_n']:.3f}"
                            if "vector_vs_exact" in r else "")))
    return common.table(rows, ["scale " + f"({report['config']['total_rows']:,} rows)", "result"])


def goals(report: dict[str, Any]) -> dict[str, bool]:
    """The large-scope goal per large agent (recall p95 <= 30 ms with the vector search
    returning >= 0.95 of an exact scan's top 20), and the 100-row scopes' p95 <= 50 ms."""
    out = {}
    if "recall_spread" in report:
        out["recall_p95_le_50ms_spread"] = report["recall_spread"]["latency"]["p95_ms"] <= 50.0
    for key, r in report.items():
        if key.startswith(("recall_big_agent", "recall_agent_big")) and isinstance(r, dict) and "latency" in r:
            agent = r.get("agent", BIG_AGENT)
            out[f"{agent}_recall_p95_le_30ms"] = r["latency"]["p95_ms"] <= 30.0
            if "vector_vs_exact" in r:
                out[f"{agent}_found_at_20_ge_0.95"] = (r["vector_vs_exact"]["mean_share_of_exact_top_n"] or 0) >= 0.95
    return out


def cmd_scale(args: argparse.Namespace, settings) -> int:
    common.quiet_http_logs()
    started = time.perf_counter()
    load_before = common.machine()["loadavg_1_5_15"]
    report = run(args)
    report["wall_s"] = round(time.perf_counter() - started, 1)
    report["machine"] = {**common.machine(), "loadavg_before": load_before}
    report["command"] = (f"memwarden bench scale --memories {args.memories} --agents {args.agents} "
                         f"--queries {args.queries} --big-agent {','.join(map(str, args.big_agent))}"
                         + (f" --reuse {args.reuse}" if args.reuse else "")
                         + (f" --out {args.out}" if args.out else ""))
    report["goal"] = goals(report)
    print(summary(report))
    common.write_json(args.out, report)
    return 0


def _sizes(value: str) -> list[int]:
    return [int(v) for v in value.split(",") if v.strip()]


def add_parser(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser("scale", help="recall latency and ingest rate at N memories (fresh database)",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memories", type=int, required=True, help="memories spread over the agents")
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--queries", type=int, default=500, help="timed recalls per query set (default 500)")
    p.add_argument("--big-agent", type=_sizes, default=[50_000],
                   help="extra memories in ONE agent, to exercise the HNSW path (default 50000; 0 = none); "
                        "several sizes, comma-separated, make one agent each (agent-big-<size>)")
    p.add_argument("--users-per-agent", type=int, default=20)
    p.add_argument("--batch", type=int, default=128, help="embedding batch size")
    p.add_argument("--chunk", type=int, default=4096, help="rows per COPY")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", help="write the JSON report here (e.g. scale-100k.json)")
    p.add_argument("--data-dir", help="use (and keep) this empty directory instead of a temporary one, with what "
                                      "--reuse needs to query it again")
    p.add_argument("--reuse", metavar="DIR", help="measure recall on a load kept by --data-dir DIR (same plan "
                                                  "options) instead of loading a fresh database")
    p.set_defaults(func=cmd_scale)
