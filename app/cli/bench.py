"""`memwarden bench <name>`: the benchmarks (contract §8; results and commands in docs/benchmarks/).

To add a benchmark, write a module with `add_parser(bench_subparsers)` (it sets `func(args, settings)`
as the handler) and add its import path to `BENCHMARKS` below.
"""

from __future__ import annotations

import argparse
import importlib

from app.cli.common import Commands

# Every `memwarden bench …` subcommand, one module each, in help order.
BENCHMARKS: list[str] = [
    "app.bench.recall",      # memwarden bench recall     — memorywire corpus, quality + latency over HTTP
    "app.bench.scale",       # memwarden bench scale      — recall latency at N memories, ingest rate
    "app.bench.review",      # memwarden bench review     — queue/detail render and approvals at 100k pending
    "app.bench.audit",       # memwarden bench audit      — durable audit appends/s, offline verify events/s
    "app.bench.audit_guards",  # memwarden bench audit-guards — cost of the fail-closed audit checks, A/B
    "app.bench.state_check",  # memwarden bench state-check — state check rows/s at 100k, fail-closed recall cost
    "app.bench.screening",   # memwarden bench screening  — poisoned writes caught vs benign staged, labelled corpus
    "app.bench.compare",     # memwarden bench compare    — side by side with memorywire, interleaved pairs
    "app.bench.import_",     # memwarden bench import     — `memwarden import` rate at N mem0 memories
    "app.bench.hotpath",     # memwarden bench hotpath    — round trips and CPU ms per remember/recall/approve
    "app.bench.rate_limit",  # memwarden bench rate-limit — per-request cost of the shared rate limit
    "app.bench.fusion",      # memwarden bench fusion     — memorywire's adversarial-fusion experiment through the router
    "app.bench.router",      # memwarden bench router     — recall cost per memory backend, outbox rate and lag
    "app.bench.replicas",    # memwarden bench replicas   — recall throughput with 0, 1 and 2 read replicas
    "app.bench.reviewer",    # memwarden bench reviewer   — human decisions before/after learned policy rules
    "app.bench.backtest",    # memwarden bench backtest   — seconds to backtest a policy change over 10k decisions
    "app.bench.consolidate",  # memwarden bench consolidate — promotion precision/recall on a scripted month, evictions, cost
    "app.bench.contradiction",  # memwarden bench contradiction — CPU of reading a change of state by meaning, A/B
    "app.bench.blast",       # memwarden bench blast      — size and time of the blast-radius incident report at 100k
]


def register(sub: Commands) -> None:
    """Add `bench` to the `memwarden` parser; its benchmarks' modules load only when it runs."""
    sub.add_deferred_parser("bench", _add_benchmarks, help="benchmarks (results and commands: docs/benchmarks/)")


def _add_benchmarks(parser: argparse.ArgumentParser) -> None:
    bench = parser.add_subparsers(dest="bench_command", required=True)
    for name in BENCHMARKS:
        importlib.import_module(name).add_parser(bench)
