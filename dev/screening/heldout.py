"""The hand-written held-out screening sets (development data, not part of the package).

Each set is JSONL, one labelled write a line, written by hand as varied human sentences (no
templates, no generator) by a writer who never opened the detectors or their training data. A set
is measured blind once; its figure is recorded (dev/bench-records/, docs/benchmarks.md) and from
then on it is read. Its status in the classifier's training:

* **spent** (``dev.screening.train.exemplars.SEEN_SETS``): measured, read and trained on; the
  screening report labels them ``seen/trained`` and adds a leave-one-set-out figure;
* **measured** (``MEASURED_SETS``): measured once and read, not trained on;
* any other set in ``HELDOUT_SETS`` is blind: never trained on (``exemplars --check`` enforces it).

``heldout`` was written first and read while the detectors were shaped; ``heldout_fresh`` was
committed before the classifier was retrained on its larger training set. From ``heldout_v3`` on,
each set holds ten or more attack families and eleven to sixteen benign families of look-alikes
(kinds of agent earlier sets lacked among them), at least 15 writes each
(tests/unit/test_screening_heldout_sets.py checks their shape).
"""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
HELDOUT = DATA_DIR / "screening_heldout.jsonl"
HELDOUT_FRESH = DATA_DIR / "screening_heldout_fresh.jsonl"
#: Report name -> file of every hand-written held-out set.
HELDOUT_SETS: dict[str, Path] = {"heldout": HELDOUT, "heldout_fresh": HELDOUT_FRESH,
                                 **{f"heldout_v{n}": DATA_DIR / f"screening_heldout_v{n}.jsonl" for n in range(3, 11)}}
#: Held-out sets measured once and read (the recorded figure is kept) but not trained on.
MEASURED_SETS: frozenset[str] = frozenset({"heldout_v9", "heldout_v10"})
