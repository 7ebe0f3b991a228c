"""`bench compare --ab`: the argument it takes, as an operator types it (the bench's summary of
alternated runs is exercised by running it: `memwarden bench compare --ab ...`)."""

import subprocess
import sys

import pytest


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", "bench", "compare", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("bad", ["PATH=1,2", "MEMWARDEN_X=1", "MEMWARDEN_X=1,2,3", "workers=one,2", "=1,2",
                                 "MEMWARDEN_X=1,", "workers=2,2"])
def test_ab_refuses_anything_but_a_memwarden_variable_or_workers_with_two_values(bad: str) -> None:
    done = _cli("--ab", bad)
    assert done.returncode == 2, done.stderr
    assert "argument --ab" in done.stderr
