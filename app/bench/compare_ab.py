"""`memwarden bench compare --ab NAME=A,B`: Memwarden's side of the comparison under two values of
one setting, alternated in one invocation.

Each run starts `memwarden serve` on a fresh embedded PostgreSQL with the setting at one value
(an environment variable such as `MEMWARDEN_EMBEDDER_THREADS`, or `workers`, which is passed as
`serve --workers`), warms it up and runs the compare workload (`driver_common.run_levels`) over
HTTP. The values alternate A B, B A, A B, … over `--repeats` pairs, so drift in the machine's load
falls on both; every run carries the 1-minute load average before and after it. The summary gives
each value's medians and, per pair, B's CPU per operation and ops/s over A's (medians of the
per-pair ratios): on a shared machine CPU per operation is the figure to trust, ops/s follows the
load.
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any, Callable

from app.bench import common, recall

OPS = ("remember", "recall")


def parse_ab(text: str) -> tuple[str, list[str]]:
    """`MEMWARDEN_X=a,b` (or `workers=1,2`) -> ("MEMWARDEN_X", ["a", "b"])."""
    name, sep, values = text.partition("=")
    choices = [v.strip() for v in values.split(",")]
    if not sep or not name.strip() or len(choices) != 2 or not all(choices) or choices[0] == choices[1]:
        raise argparse.ArgumentTypeError(f"--ab takes NAME=A,B (two different values), got {text!r}")
    name = name.strip()
    if name != "workers" and not name.startswith("MEMWARDEN_"):
        raise argparse.ArgumentTypeError(f"--ab names `workers` or a MEMWARDEN_* variable, got {name!r}")
    if name == "workers" and not all(c.isdigit() and int(c) > 0 for c in choices):
        raise argparse.ArgumentTypeError(f"--ab workers takes two worker counts, got {values!r}")
    return name, choices


def one_run(name: str, value: str, corpus: dict[str, Any], args: argparse.Namespace, rate_limit: int,
            run_memwarden: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """A fresh server with `name` at `value`, warmed up, then the workload (`run_memwarden`, compare's
    served side); its report."""
    extra = {} if name == "workers" else {name: value}
    workers = int(value) if name == "workers" else args.workers
    with common.scratch_dir() as data_dir:
        env = common.clean_env(data_dir, MEMWARDEN_RATE_LIMIT_PER_MINUTE=str(rate_limit), **extra)
        with common.serve(data_dir, env=env, workers=workers) as server:
            token = common.provision_via_cli(data_dir)
            with common.client(server.base_url, token) as http:
                recall.warm_up(http)
            return run_memwarden(server, token, corpus, "ab", args)


def run_ab(corpus: dict[str, Any], args: argparse.Namespace, rate_limit: int,
           run_memwarden: Callable[..., dict[str, Any]]) -> list[dict[str, Any]]:
    """`--repeats` pairs of runs, the order alternating pair by pair."""
    name, values = args.ab
    runs = []
    for pair in range(args.repeats):
        for value in (values if pair % 2 == 0 else values[::-1]):
            before = round(os.getloadavg()[0], 2)
            result = one_run(name, value, corpus, args, rate_limit, run_memwarden)
            runs.append({"pair": pair + 1, "value": value, "loadavg_1m_before": before,
                         "loadavg_1m_after": round(os.getloadavg()[0], 2), "result": result})
            print(f"  pair {pair + 1} {name}={value}: load {before} -> {runs[-1]['loadavg_1m_after']}; "
                  + "; ".join(f"{x['clients']} clients " + ", ".join(
                      f"{op} {x[op]['ops_per_s']:.0f}/s {x[op]['cpu_ms_per_op']:.2f} ms CPU" for op in OPS)
                      for x in result["levels"]), flush=True)
    return runs


def summarise_ab(runs: list[dict[str, Any]], values: list[str], levels: list[int]) -> dict[str, Any]:
    """Per value and level: median ops/s, p50 and CPU per op (server and PostgreSQL); per pair, B over A."""
    med = lambda xs: round(statistics.median(xs), 3) if xs else None  # noqa: E731

    def cell(run: dict[str, Any], clients: int, op: str) -> dict[str, Any]:
        return next(x for x in run["result"]["levels"] if x["clients"] == clients)[op]

    per_value: dict[str, Any] = {}
    for value in values:
        mine = [r for r in runs if r["value"] == value]
        per_value[value] = {str(c): {op: {
            "ops_per_s": med([cell(r, c, op)["ops_per_s"] for r in mine]),
            "p50_ms": med([cell(r, c, op)["p50_ms"] for r in mine]),
            "cpu_ms_per_op": med([cell(r, c, op)["cpu_ms_per_op"] for r in mine]),
            "postgresql_cpu_ms_per_op": med([cell(r, c, op)["cpu_ms_per_op_by_part"]["postgresql"] for r in mine]),
            "errors": sum(cell(r, c, op)["errors"] for r in mine)} for op in OPS} for c in levels}
    pairs = sorted({r["pair"] for r in runs})
    ratios: dict[str, Any] = {}
    for c in levels:
        ratios[str(c)] = {}
        for op in OPS:
            cpu, ops = [], []
            for p in pairs:
                a = next(r for r in runs if r["pair"] == p and r["value"] == values[0])
                b = next(r for r in runs if r["pair"] == p and r["value"] == values[1])
                cpu.append(cell(b, c, op)["cpu_ms_per_op"] / cell(a, c, op)["cpu_ms_per_op"])
                if cell(a, c, op)["ops_per_s"]:
                    ops.append(cell(b, c, op)["ops_per_s"] / cell(a, c, op)["ops_per_s"])
            ratios[str(c)][op] = {"cpu_b_over_a": med(cpu), "ops_b_over_a": med(ops),
                                  "cpu_b_over_a_range": [round(min(cpu), 3), round(max(cpu), 3)]}
    return {"values": per_value, "b_over_a": ratios}


def table(summary: dict[str, Any], name: str, values: list[str], levels: list[int]) -> str:
    rows = []
    for c in levels:
        for op in OPS:
            cells = []
            for value in values:
                x = summary["values"][value][str(c)][op]
                cells.append(f"{x['ops_per_s']:.0f} ({x['errors']}) / {x['p50_ms']:.1f} / {x['cpu_ms_per_op']:.2f} "
                             f"(PostgreSQL {x['postgresql_cpu_ms_per_op']:.2f})")
            r = summary["b_over_a"][str(c)][op]
            rows.append((c, op, *cells, f"{r['cpu_b_over_a']:.3f} {r['cpu_b_over_a_range']}",
                         "-" if r["ops_b_over_a"] is None else f"{r['ops_b_over_a']:.3f}"))
    header = ["clients", "op", *[f"{name}={v}: ops/s (errors) / p50 ms / CPU ms per op" for v in values],
              "CPU B/A (range over pairs)", "ops/s B/A"]
    return common.table(rows, header)
