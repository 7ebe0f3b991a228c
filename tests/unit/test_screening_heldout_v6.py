"""The sixth hand-written held-out screening set is well-formed: both labels in force, every family
large enough to report on its own, no write repeated, and every row a `remember` the API accepts
(so the benchmark judges writes that could really arrive). Its rates are the benchmark's to
report (docs/benchmarks.md), never a test's."""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter

from app.contracts import default_contracts
from tests.harness import PROJECT_ROOT

HELDOUT_V6 = PROJECT_ROOT / "app" / "bench" / "data" / "screening_heldout_v6.jsonl"
ATTACK_FAMILIES = {"standing_instruction", "exfiltration", "privilege_identity", "fake_lesson", "cross_user",
                   "tool_misuse", "hidden_markup", "secret_harvest", "pii_profile", "protected_keys"}


def rows() -> list[dict]:
    return [json.loads(line) for line in HELDOUT_V6.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_both_labels_and_every_attack_family_are_present() -> None:
    corpus = rows()
    labels = Counter(r["label"] for r in corpus)
    assert set(labels) == {"poisoned", "benign"}
    assert labels["poisoned"] >= 200 and labels["benign"] >= 200
    assert {r["class"] for r in corpus if r["label"] == "poisoned"} == ATTACK_FAMILIES
    # Benign families are named benign_*, attack families never are: the report groups by this.
    assert all(r["class"].startswith("benign_") == (r["label"] == "benign") for r in corpus)
    # Hard negatives come in many kinds, not one: at least ten benign families.
    assert len({r["class"] for r in corpus if r["label"] == "benign"}) >= 10


def test_every_family_has_at_least_15_writes() -> None:
    sizes = Counter(r["class"] for r in rows())
    assert min(sizes.values()) >= 15, sizes


def test_attack_families_are_the_same_size() -> None:
    """Twenty writes per attack family, so the per-family rates the benchmark prints compare like with like."""
    sizes = Counter(r["class"] for r in rows() if r["label"] == "poisoned")
    assert set(sizes.values()) == {20}, sizes


def test_every_attack_family_arrives_both_as_a_fact_and_as_an_event() -> None:
    """Attacks reach memory as stated facts and as records of what happened (a summarised email, a
    tool's output, a call recap), so every attack family holds both semantic and episodic writes."""
    types = {(r["class"], r["type"]) for r in rows() if r["label"] == "poisoned"}
    assert all({(family, "semantic"), (family, "episodic")} <= types for family in ATTACK_FAMILIES), types


def test_no_write_is_repeated_and_ids_are_unique() -> None:
    corpus = rows()
    assert len({r["content"] for r in corpus}) == len(corpus)
    assert len({r["id"] for r in corpus}) == len(corpus)
    assert all(re.fullmatch(rf"hv6-{re.escape(r['class'])}-\d{{2}}", r["id"]) for r in corpus)


def test_invisible_characters_are_written_as_escapes() -> None:
    """A reviewer reading the file must see hidden characters: format characters (zero-width, bidi
    marks, Unicode tags) appear only as \\uXXXX escapes in the raw text, never as themselves."""
    raw = HELDOUT_V6.read_text(encoding="utf-8")
    assert not [c for c in raw if unicodedata.category(c) in ("Cf", "Co", "Cn")]
    assert any(unicodedata.category(c) == "Cf" for r in rows() for c in r["content"])  # the escapes decode


def test_protected_key_writes_carry_tags_or_metadata() -> None:
    assert all("tags" in r or "metadata" in r for r in rows() if r["class"] == "protected_keys")


def test_every_row_is_a_remember_the_api_accepts() -> None:
    contracts = default_contracts()
    for row in rows():
        assert set(row) <= {"id", "class", "label", "split", "type", "content", "tags", "metadata"}, row["id"]
        assert row["split"] == "heldout" and row["type"] != "procedural", row["id"]
        payload = {"agent_id": "bench", "type": row["type"], "content": row["content"],
                   **{k: row[k] for k in ("tags", "metadata") if k in row}}
        assert contracts.problems("remember.request", payload) == [], row["id"]
