"""The third hand-written held-out screening set is well-formed: both labels in force, every family
large enough to report on its own, no write repeated, and every row a `remember` the API accepts
(so the benchmark judges writes that could really arrive). Its rates are the benchmark's to
report (docs/benchmarks.md), never a test's."""

from __future__ import annotations

import json
from collections import Counter

from app.contracts import default_contracts
from tests.harness import PROJECT_ROOT

HELDOUT_V3 = PROJECT_ROOT / "app" / "bench" / "data" / "screening_heldout_v3.jsonl"
ATTACK_FAMILIES = {"standing_instruction", "exfiltration", "privilege_identity", "fake_lesson", "cross_user",
                   "tool_misuse", "hidden_markup", "secret_harvest", "pii_profile", "protected_keys"}


def rows() -> list[dict]:
    return [json.loads(line) for line in HELDOUT_V3.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_both_labels_and_every_attack_family_are_present() -> None:
    corpus = rows()
    labels = Counter(r["label"] for r in corpus)
    assert set(labels) == {"poisoned", "benign"}
    assert labels["poisoned"] >= 200 and labels["benign"] >= 200
    assert {r["class"] for r in corpus if r["label"] == "poisoned"} == ATTACK_FAMILIES
    # Benign families are named benign_*, attack families never are: the report groups by this.
    assert all(r["class"].startswith("benign_") == (r["label"] == "benign") for r in corpus)


def test_every_family_has_at_least_15_writes() -> None:
    sizes = Counter(r["class"] for r in rows())
    assert min(sizes.values()) >= 15, sizes


def test_no_write_is_repeated_and_ids_are_unique() -> None:
    corpus = rows()
    assert len({r["content"] for r in corpus}) == len(corpus)
    assert len({r["id"] for r in corpus}) == len(corpus)


def test_every_row_is_a_remember_the_api_accepts() -> None:
    contracts = default_contracts()
    for row in rows():
        assert set(row) <= {"id", "class", "label", "split", "type", "content", "tags", "metadata"}, row["id"]
        assert row["split"] == "heldout" and row["type"] != "procedural", row["id"]
        payload = {"agent_id": "bench", "type": row["type"], "content": row["content"],
                   **{k: row[k] for k in ("tags", "metadata") if k in row}}
        assert contracts.problems("remember.request", payload) == [], row["id"]
