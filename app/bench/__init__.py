"""Benchmarks behind `memwarden bench …` (see docs/benchmarks.md).

Each module exposes `add_parser(bench_subparsers)`; `app.cli.bench.BENCHMARKS` lists them.
"""
