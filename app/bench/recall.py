"""`memwarden bench recall`: memorywire's microbenchmark corpus against the full Memwarden stack.

A fresh embedded database, `memwarden serve` as a subprocess, a tenant and key made with the CLI,
then over HTTP: remember the corpus's facts (agent `bench`, the fact's user and type), and recall
each query with k=5 and the query's `user_id`. Quality is scored exactly as memorywire's
`scripts/run_microbench.py` scores it:

- recall@k    = mean over labelled queries of |gold ∩ top-k| / |gold|
- precision@k = mean over labelled queries of |gold ∩ top-k| / k
- a no-match probe (empty gold) is correct only when recall returns no hits at all

Latency is client-side wall time per request (keep-alive connection, after a warm-up), with
nearest-rank percentiles. The relevance floor is the server default: it was calibrated on
Memwarden's own data (`python -m dev.bench calibrate` in a checkout), never on this corpus.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from app.bench import common

DEFAULT_CORPUS = "../shared/bench/memorywire-microbench.json"
AGENT_ID = "bench"
WARMUP_FACTS = [
    "The warm-up user prefers window seats on long flights.",
    "The warm-up user keeps a sourdough starter named Clint.",
    "The warm-up user runs a 10k every Sunday morning.",
    "The warm-up user is learning Portuguese for a trip to Lisbon.",
    "The warm-up user's laptop is a ten-year-old ThinkPad.",
]
WARMUP_QUERIES = ["where does the warm-up user like to sit?", "what bread does the warm-up user bake?",
                  "which language is the warm-up user learning?", "what is the capital of Peru?"]

GOALS = {"recall_at_k": 1.0, "no_match_empty_min": 6, "remember_p50_ms": 15.0, "recall_p50_ms": 15.0}


def as_memwarden_fsm(content: str) -> str:
    """memorywire's procedural facts are `{name, states, current}`; Memwarden's FSM also requires
    `initial` and `transitions` (contract §3). Add those two (initial = current or the first state,
    no transitions) and keep everything else as it was."""
    doc = json.loads(content)
    doc.setdefault("initial", doc.get("current") or doc["states"][0])
    doc.setdefault("transitions", [])
    return json.dumps(doc, separators=(",", ":"))


def load_corpus(path: str | Path) -> dict[str, Any]:
    corpus = json.loads(Path(path).read_text(encoding="utf-8"))
    adapted = []
    for fact in corpus["facts"]:
        if fact["type"] == "procedural":
            fixed = as_memwarden_fsm(fact["content"])
            if fixed != fact["content"]:
                fact["content"] = fixed
                adapted.append(fact["id"])
    corpus["adapted_procedural_facts"] = adapted
    ids = {f["id"] for f in corpus["facts"]}
    for q in corpus["queries"]:
        unknown = set(q["gold_ids"]) - ids
        if unknown:
            raise ValueError(f"query {q['query']!r} names unknown gold ids {sorted(unknown)}")
    corpus.setdefault("name", Path(path).name)
    return corpus


def subset(corpus: dict[str, Any], users: list[str]) -> dict[str, Any]:
    """The facts and queries of some users only (queries are user-scoped, so scores carry over)."""
    return {**corpus, "name": f"{corpus.get('name', 'corpus')}[{','.join(users)}]",
            "facts": [f for f in corpus["facts"] if f["user_id"] in users],
            "queries": [q for q in corpus["queries"] if q.get("user_id") in users]}


def warm_up(http, rounds: int = 3) -> None:
    """Load the model, fill the connection pool and the plan caches before anything is timed."""
    agent = f"{AGENT_ID}-warmup"
    for content in WARMUP_FACTS:
        common.timed_post(http, "/v1/memories/remember",
                          {"agent_id": agent, "user_id": "warmup", "type": "semantic", "content": content})
    for _ in range(rounds):
        for query in WARMUP_QUERIES:
            common.timed_post(http, "/v1/memories/recall", {"agent_id": agent, "user_id": "warmup",
                                                            "query": query, "k": 5})


def run_pass(http, corpus: dict[str, Any], *, agent_id: str = AGENT_ID, k: int = 5) -> dict[str, Any]:
    """Remember every fact, then run every query; quality plus raw per-request timings."""
    remember_ms: list[float] = []
    to_dataset: dict[str, str] = {}
    for fact in corpus["facts"]:
        body = {"agent_id": agent_id, "type": fact["type"], "content": fact["content"]}
        if fact.get("user_id") is not None:
            body["user_id"] = fact["user_id"]
        elapsed, resp = common.timed_post(http, "/v1/memories/remember", body, expect=(201,))
        remember_ms.append(elapsed)
        to_dataset[resp["id"]] = fact["id"]

    recall_ms: list[float] = []
    server_ms: list[float] = []
    recalls: list[float] = []
    precisions: list[float] = []
    probes = probes_empty = 0
    failures: list[dict[str, Any]] = []
    probe_results: list[dict[str, Any]] = []
    for q in corpus["queries"]:
        body = {"agent_id": agent_id, "query": q["query"], "k": k}
        if q.get("user_id") is not None:
            body["user_id"] = q["user_id"]
        elapsed, resp = common.timed_post(http, "/v1/memories/recall", body, expect=(200,))
        recall_ms.append(elapsed)
        server_ms.append(float(resp.get("latency_ms", 0.0)))
        hits = resp["hits"]
        returned = [to_dataset.get(h["id"], h["id"]) for h in hits]
        sims = [round(h.get("similarity", 0.0), 4) for h in hits]
        gold = set(q["gold_ids"])
        if not gold:
            probes += 1
            probes_empty += not hits
            probe_results.append({"query": q["query"], "user_id": q.get("user_id"), "returned": returned,
                                  "similarities": sims})
            if hits:
                failures.append({"kind": "false_positive_on_no_match_probe", "query": q["query"],
                                 "user_id": q.get("user_id"), "returned": returned, "similarities": sims})
            continue
        found = len(gold & set(returned))
        recalls.append(found / len(gold))
        precisions.append(found / k)
        if found < len(gold):
            failures.append({"kind": "partial_or_full_miss", "query": q["query"], "user_id": q.get("user_id"),
                             "gold": sorted(gold), "missing": sorted(gold - set(returned)),
                             "returned": returned, "similarities": sims})
    return {
        "quality": {
            "recall_at_k": round(sum(recalls) / len(recalls), 6) if recalls else 0.0,
            "precision_at_k": round(sum(precisions) / len(precisions), 6) if precisions else 0.0,
            "labelled_queries": len(recalls),
            "no_match_empty": probes_empty, "no_match_total": probes,
        },
        "remember_ms": remember_ms, "recall_ms": recall_ms, "server_recall_ms": server_ms,
        "failures": failures, "probes": probe_results,
    }


def run_benchmark(base_url: str, token: str, corpus: dict[str, Any], *, runs: int = 1, k: int = 5,
                  agent_prefix: str = AGENT_ID, warmup: bool = True) -> dict[str, Any]:
    """The benchmark's core against any running server: `runs` passes, each under its own agent.

    Quality comes from the first pass (later passes see identical data in a fresh agent scope, so
    they must agree; any disagreement is reported); latencies pool every pass.
    """
    with common.client(base_url, token) as http:
        if warmup:
            warm_up(http)
        passes = [run_pass(http, corpus, agent_id=agent_prefix if i == 0 else f"{agent_prefix}-{i + 1}", k=k)
                  for i in range(runs)]
    first = passes[0]
    remember_ms = [x for p in passes for x in p["remember_ms"]]
    recall_ms = [x for p in passes for x in p["recall_ms"]]
    server_ms = [x for p in passes for x in p["server_recall_ms"]]
    latency = {"remember": common.latency_summary(remember_ms), "recall": common.latency_summary(recall_ms),
               "recall_server_side": common.latency_summary(server_ms)}
    quality = first["quality"]
    return {
        "benchmark": "recall",
        "corpus": {"name": corpus.get("name"), "source": corpus.get("source"), "facts": len(corpus["facts"]),
                   "queries": len(corpus["queries"]), "labelled": quality["labelled_queries"],
                   "no_match_probes": quality["no_match_total"],
                   "adapted_procedural_facts": corpus.get("adapted_procedural_facts", []),
                   "adaptation": "procedural facts completed with `initial` (= current) and `transitions: []`, "
                                 "which Memwarden's FSM schema requires; no other change"},
        "k": k, "runs": runs,
        "method": "HTTP against `memwarden serve` (subprocess), one keep-alive client, warm-up first; "
                  "recall@k = mean |gold ∩ top-k|/|gold|, precision@k = mean |gold ∩ top-k|/k "
                  "(memorywire's definitions); nearest-rank percentiles",
        "quality": quality,
        "consistent_across_runs": all(p["quality"] == quality for p in passes),
        "latency": latency,
        "goals": {
            "recall_at_k_1.0": quality["recall_at_k"] >= GOALS["recall_at_k"],
            "no_match_empty_ge_6": quality["no_match_empty"] >= GOALS["no_match_empty_min"],
            "remember_p50_le_15ms": latency["remember"]["p50_ms"] <= GOALS["remember_p50_ms"],
            "recall_p50_le_15ms": latency["recall"]["p50_ms"] <= GOALS["recall_p50_ms"],
        },
        "failures": first["failures"],
        "probes": first["probes"],
    }


def summary_table(report: dict[str, Any]) -> str:
    """Memwarden's numbers alone: the comparison with memorywire is measured side by side by
    `memwarden bench compare`, never taken from a figure published on another machine."""
    q, lat = report["quality"], report["latency"]
    fmt = lambda d: f"{d['p50_ms']:.1f} / {d['p95_ms']:.1f} / {d['p99_ms']:.1f}"  # noqa: E731
    rows = [
        (f"recall@{report['k']} ({q['labelled_queries']} labelled)", f"{q['recall_at_k']:.3f}"),
        (f"precision@{report['k']}", f"{q['precision_at_k']:.3f}"),
        ("no-match probes empty", f"{q['no_match_empty']} / {q['no_match_total']}"),
        ("remember p50 / p95 / p99 ms", fmt(lat["remember"])),
        ("recall p50 / p95 / p99 ms", fmt(lat["recall"])),
    ]
    return common.table(rows, ["metric", "Memwarden (HTTP, full stack)"])


def cmd_recall(args: argparse.Namespace, settings) -> int:
    common.quiet_http_logs()
    corpus_path = Path(args.corpus)
    if not corpus_path.is_file():
        print(f"error: corpus not found: {corpus_path}")
        return 2
    corpus = load_corpus(corpus_path)
    started = time.perf_counter()
    load_before = common.machine()["loadavg_1_5_15"]
    with common.scratch_dir(args.data_dir) as data_dir:
        with common.serve(data_dir) as server:
            token = common.provision_via_cli(data_dir)
            report = run_benchmark(server.base_url, token, corpus, runs=args.runs, k=args.k)
    report["wall_s"] = round(time.perf_counter() - started, 1)
    report["machine"] = {**common.machine(), "loadavg_before": load_before}
    report["command"] = (f"memwarden bench recall --corpus {args.corpus} --runs {args.runs}"
                         + (f" --out {args.out}" if args.out else ""))
    print(summary_table(report))
    for failure in report["failures"]:
        print(f"  [{failure['kind']}] {failure['query']!r} (user={failure['user_id']}): "
              f"returned {failure['returned']} sims {failure['similarities']}")
    missed = [name for name, ok in report["goals"].items() if not ok]
    print("goals met" if not missed else f"goals missed: {', '.join(missed)}")
    common.write_json(args.out, report)
    return 0


def add_parser(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser("recall", help="memorywire's microbenchmark corpus over HTTP on a fresh database",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default=DEFAULT_CORPUS, help=f"corpus JSON (default {DEFAULT_CORPUS})")
    p.add_argument("--out", help="write the JSON report here (e.g. recall.json)")
    p.add_argument("--runs", type=int, default=3,
                   help="passes (each remembers the corpus under its own agent and runs every query); default 3")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--data-dir", help="use (and keep) this empty directory instead of a temporary one")
    p.set_defaults(func=cmd_recall)
