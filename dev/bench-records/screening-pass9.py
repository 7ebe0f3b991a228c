"""Ninth screening pass (issue 21): the whole default policy on every spent set, v3-v8.

    python dev/bench-records/screening-pass9.py [--label NAME] [--out dev/bench-records/screening-pass9.json] [--cache FILE] [--show]

How rows are judged and cached: `spent_sets_policy.py` beside this file.
"""

import sys

from spent_sets_policy import main

SETS = ("heldout_v3", "heldout_v4", "heldout_v5", "heldout_v6", "heldout_v7", "heldout_v8")

if __name__ == "__main__":
    sys.exit(main(SETS, "/tmp/screening-pass9-semantic.pkl"))
