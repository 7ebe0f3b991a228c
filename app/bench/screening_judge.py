"""Judging one labelled write as ``remember`` would treat it, and summarising many: shared by
`memwarden bench screening` (``app.bench.screening``) and the classifier trainers
(``dev/screening/train/exemplars.py``, ``finetune.py``), which must judge the same way without
importing the benchmark."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any, Iterable

from app.core.fsm import validate_fsm
from app.core.policy import WriteRequest, default_policy
from app.core.redaction import Redactor
from app.core.screening import screen, semantic
from app.services.memory.screening import ALLOWED_SOURCES


def judge(row: dict[str, Any], redactor: Redactor | None = None, vector: Any = None, embedder: str | None = None,
          classifier: semantic.Classifier | None = None) -> dict[str, Any]:
    """One write through redaction, screening and the default policy: its flags and outcome.

    ``vector`` is the embedding of the redacted content by the model named ``embedder`` (as
    `remember` passes it); ``classifier`` replaces the shipped semantic classifier (leave-one-out)."""
    redactor = redactor or Redactor()
    redacted = redact(row, redactor)
    live = row.get("live", [])
    procedural = row["type"] == "procedural"
    started = time.perf_counter()
    result = screen(redacted.content, memory_type=row["type"], tags=redacted.tags, metadata=redacted.metadata,
                    source=row.get("source"), live=[] if procedural else live,
                    live_fsm=live[0] if procedural and live else None, allowed_sources=ALLOWED_SOURCES,
                    embedding=vector, embedder=embedder, classifier=classifier)
    elapsed_ms = (time.perf_counter() - started) * 1000
    decision = default_policy().evaluate(WriteRequest(
        operation="remember", agent_id="bench", type=row["type"], source=row.get("source"),
        tags=tuple(redacted.tags), content=redacted.content, risk_flags=result.names, risk_level=result.risk))
    outcome = {"allow": "live", "require_approval": "staged", "deny": "denied"}[decision.action]
    return {"id": row["id"], "class": row["class"], "label": row["label"], "split": row["split"],
            "outcome": outcome, "risk": result.risk, "redacted": bool(redacted.findings),
            "flags": {f.name: f.severity for f in result.flags}, "screen_ms": elapsed_ms}


def redact(row: dict[str, Any], redactor: Redactor):
    """The row's payload after SR-1 (screening reads what would be stored)."""
    if row["type"] == "procedural" and validate_fsm(row["content"]):
        raise ValueError(f"{row['id']}: procedural content is not a valid FSM")
    return redactor.redact_payload(row["content"], row.get("tags", []), row.get("metadata", {}))


def embed_rows(rows: list[dict[str, Any]], redactor: Redactor, embedder) -> list[Any]:
    """The redacted contents' vectors (None for procedural writes, or for all without an embedder)."""
    if embedder is None:
        return [None] * len(rows)
    texts = [redact(r, redactor).content for r in rows]
    wanted = [i for i, r in enumerate(rows) if r["type"] != "procedural"]
    vectors: list[Any] = [None] * len(rows)
    if wanted:
        for i, v in zip(wanted, embedder.embed([texts[i] for i in wanted])):
            vectors[i] = v
    return vectors


def rate(part: int, whole: int) -> float | None:
    """``part / whole`` rounded to 4 places (None for an empty whole)."""
    return round(part / whole, 4) if whole else None


def summarise(judged: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Catch rate, false-positive rate, reviewer load and per-class detail for a set of judged writes."""
    judged = list(judged)
    poisoned = [j for j in judged if j["label"] == "poisoned"]
    benign = [j for j in judged if j["label"] == "benign"]
    stopped = lambda rows: sum(j["outcome"] != "live" for j in rows)  # noqa: E731
    classes: dict[str, Any] = {}
    by_class: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for j in judged:
        by_class[j["class"]].append(j)
    for name in sorted(by_class, key=lambda c: (by_class[c][0]["label"] != "poisoned", c)):
        rows = by_class[name]
        flagged = Counter(f"{flag}:{sev}" for j in rows for flag, sev in j["flags"].items())
        classes[name] = {
            "label": rows[0]["label"], "n": len(rows), "staged": sum(j["outcome"] == "staged" for j in rows),
            "denied": sum(j["outcome"] == "denied" for j in rows),
            ("catch_rate" if rows[0]["label"] == "poisoned" else "staged_rate"): rate(stopped(rows), len(rows)),
            "flagged_any": sum(bool(j["flags"]) for j in rows), "flags": dict(sorted(flagged.items())),
            "redacted_by_sr1": sum(j["redacted"] for j in rows),
        }
    return {
        "writes": len(judged), "poisoned": len(poisoned), "benign": len(benign),
        "catch_rate": rate(stopped(poisoned), len(poisoned)),
        "false_positive_rate": rate(stopped(benign), len(benign)),
        "reviewer_load": rate(sum(j["outcome"] == "staged" for j in judged), len(judged)),
        "benign_flagged_any": rate(sum(bool(j["flags"]) for j in benign), len(benign)),
        # What a tenant policy that stages medium risk would stage (the default stages high only).
        "benign_medium_or_higher": rate(sum(j["risk"] in ("medium", "high") for j in benign), len(benign)),
        "classes": classes,
        "missed": [{"id": j["id"], "flags": j["flags"]} for j in poisoned if j["outcome"] == "live"],
        "false_positives": [{"id": j["id"], "flags": j["flags"]} for j in benign if j["outcome"] != "live"],
    }
