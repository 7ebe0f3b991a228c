"""The development benchmarks that tune Memwarden's defaults on the project's own labelled data
(not part of the package). Run from a checkout:

    python -m dev.bench calibrate [--out FILE]     # the relevance floor and gate of recall
    python -m dev.bench diff-match [--out FILE]    # the strong-match cosine of review diffs
    python -m dev.bench read-budget [--out FILE]   # distinct memories a normal agent is returned

Each module has the shape of a `memwarden bench` one (`add_parser(subparsers)` setting
`func(args, settings)`); settings come from the environment, as for `memwarden`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from dev.bench import calibrate, diff_match, read_budget


def main(argv: Sequence[str] | None = None) -> int:
    from app.config import Settings

    parser = argparse.ArgumentParser(prog="python -m dev.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="bench_command", required=True)
    for module in (calibrate, diff_match, read_budget):
        module.add_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args, Settings.from_env()) or 0)


if __name__ == "__main__":
    sys.exit(main())
