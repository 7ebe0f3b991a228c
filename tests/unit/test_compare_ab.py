"""`bench compare --ab`: the argument it takes and how it summarises alternated runs."""

import argparse

import pytest

from app.bench.compare_ab import parse_ab, summarise_ab


def test_ab_takes_a_memwarden_variable_or_workers_with_two_values() -> None:
    assert parse_ab("MEMWARDEN_DB_POOL_SIZE=5,10") == ("MEMWARDEN_DB_POOL_SIZE", ["5", "10"])
    assert parse_ab("workers=1,2") == ("workers", ["1", "2"])
    for bad in ("PATH=1,2", "MEMWARDEN_X=1", "MEMWARDEN_X=1,2,3", "workers=one,2", "=1,2", "MEMWARDEN_X=1,",
                "workers=2,2"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_ab(bad)


def _run(pair: int, value: str, cpu: float, ops: float) -> dict:
    cell = {"ops_per_s": ops, "p50_ms": 10.0, "cpu_ms_per_op": cpu, "errors": 0,
            "cpu_ms_per_op_by_part": {"server": cpu - 2, "postgresql": 2.0}}
    return {"pair": pair, "value": value, "result": {"levels": [{"clients": 1, "remember": cell, "recall": cell}]}}


def test_ratios_are_per_pair_medians_of_b_over_a() -> None:
    runs = [_run(1, "a", 10.0, 100.0), _run(1, "b", 9.0, 110.0), _run(2, "b", 12.0, 90.0), _run(2, "a", 10.0, 100.0)]
    summary = summarise_ab(runs, ["a", "b"], [1])
    ratio = summary["b_over_a"]["1"]["remember"]
    assert ratio["cpu_b_over_a"] == pytest.approx(1.05)  # median of 0.9 and 1.2
    assert ratio["cpu_b_over_a_range"] == [0.9, 1.2]
    assert ratio["ops_b_over_a"] == pytest.approx(1.0)  # median of 1.1 and 0.9
    assert summary["values"]["b"]["1"]["remember"]["cpu_ms_per_op"] == pytest.approx(10.5)
