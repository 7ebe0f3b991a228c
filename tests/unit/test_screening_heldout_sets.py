"""Every hand-written held-out screening set from the third on (`screening_heldout_v<N>.jsonl`, each written
blind by a new writer) is well-formed: both labels in force, every family large enough to report on its
own, no write repeated, hidden characters visible in the file, and every row a `remember` the API accepts
(so the benchmark judges writes that could really arrive). Their rates are the benchmark's to report
(docs/benchmarks/), never a test's. A new set is picked up by its file name."""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from pathlib import Path

import pytest

from app.contracts import default_contracts
from tests.harness import PROJECT_ROOT

DATA = PROJECT_ROOT / "dev" / "screening" / "data"
SETS = sorted(DATA.glob("screening_heldout_v*.jsonl"), key=lambda p: int(p.stem.rsplit("_v", 1)[1]))
ATTACK_FAMILIES = {"standing_instruction", "exfiltration", "privilege_identity", "fake_lesson", "cross_user",
                   "tool_misuse", "hidden_markup", "secret_harvest", "pii_profile", "protected_keys"}
UNEVEN_FAMILIES = {"screening_heldout_v3.jsonl"}
"""Written before the sets settled on the same number of writes per attack family (24-26 each)."""
KNOWN_REPEATS = {"hv5-protected_keys-01"}
"""Word for word (content and metadata) a row of v4, whose first lines its writer was shown for the
format; it was measured with the rest and is disclosed with the fifth set's figures."""


def version(path: Path) -> str:
    return path.stem.rsplit("_", 1)[1]


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_sets_are_found() -> None:
    assert [version(p) for p in SETS][:3] == ["v3", "v4", "v5"]


@pytest.fixture(params=SETS, ids=version)
def heldout(request) -> tuple[Path, list[dict]]:
    return request.param, rows(request.param)


def test_both_labels_and_every_attack_family_are_present(heldout) -> None:
    _, corpus = heldout
    labels = Counter(r["label"] for r in corpus)
    assert set(labels) == {"poisoned", "benign"}
    assert labels["poisoned"] >= 200 and labels["benign"] >= 200
    assert {r["class"] for r in corpus if r["label"] == "poisoned"} == ATTACK_FAMILIES
    # Benign families are named benign_*, attack families never are: the report groups by this.
    assert all(r["class"].startswith("benign_") == (r["label"] == "benign") for r in corpus)
    # Hard negatives come in many kinds, not one: at least ten benign families.
    assert len({r["class"] for r in corpus if r["label"] == "benign"}) >= 10


def test_every_family_has_at_least_15_writes(heldout) -> None:
    sizes = Counter(r["class"] for r in heldout[1])
    assert min(sizes.values()) >= 15, sizes


def test_attack_families_are_the_same_size(heldout) -> None:
    """The same number of writes per attack family, so the per-family rates the benchmark prints
    compare like with like."""
    path, corpus = heldout
    sizes = Counter(r["class"] for r in corpus if r["label"] == "poisoned")
    assert len(set(sizes.values())) == 1 or path.name in UNEVEN_FAMILIES, sizes


def test_no_write_is_repeated_and_ids_are_unique(heldout) -> None:
    path, corpus = heldout
    assert len({r["content"] for r in corpus}) == len(corpus)
    assert len({r["id"] for r in corpus}) == len(corpus)
    prefix = "h" + version(path)
    assert all(re.fullmatch(rf"{prefix}-{re.escape(r['class'])}-\d{{2}}", r["id"]) for r in corpus)


def _write(row: dict) -> str:
    """What the agent writes: content, tags and metadata (protected-key attacks differ only in the last two)."""
    return json.dumps([row["content"], row.get("tags"), row.get("metadata")], sort_keys=True)


def test_no_write_is_in_an_earlier_set(heldout) -> None:
    """A blind set shares no write with the sets before it (which are read and trained on)."""
    path, corpus = heldout
    earlier = {_write(r) for p in SETS[:SETS.index(path)] for r in rows(p)}
    assert not [r["id"] for r in corpus if _write(r) in earlier and r["id"] not in KNOWN_REPEATS]


def test_invisible_characters_are_written_as_escapes(heldout) -> None:
    """A reviewer reading the file must see hidden characters: format characters (zero-width, bidi
    marks, Unicode tags) appear only as \\uXXXX escapes in the raw text, never as themselves."""
    path, corpus = heldout
    assert not [c for c in path.read_text(encoding="utf-8") if unicodedata.category(c) in ("Cf", "Co", "Cn")]
    assert any(unicodedata.category(c) == "Cf" for r in corpus for c in r["content"])  # the escapes decode


def test_protected_key_writes_carry_tags_or_metadata(heldout) -> None:
    assert all("tags" in r or "metadata" in r for r in heldout[1] if r["class"] == "protected_keys")


def test_every_row_is_a_remember_the_api_accepts(heldout) -> None:
    contracts = default_contracts()
    for row in heldout[1]:
        assert set(row) <= {"id", "class", "label", "split", "type", "content", "tags", "metadata"}, row["id"]
        assert row["split"] == "heldout" and row["type"] != "procedural", row["id"]
        payload = {"agent_id": "bench", "type": row["type"], "content": row["content"],
                   **{k: row[k] for k in ("tags", "metadata") if k in row}}
        assert contracts.problems("remember.request", payload) == [], row["id"]
