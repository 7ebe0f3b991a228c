"""The screening benchmark's labelled corpora in this package's data folder: the generated
corpus (dev and test splits) and the hand-written held-out set. Shared by the benchmark and the
semantic classifier's trainer, which must read the same rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "screening_corpus.jsonl"
HELDOUT = Path(__file__).resolve().parent / "data" / "screening_heldout.jsonl"


def load_corpus(path: str | Path = DATA) -> list[dict[str, Any]]:
    """The labelled writes, one JSON object per line."""
    with Path(path).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
