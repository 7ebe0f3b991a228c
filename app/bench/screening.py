"""`memwarden bench screening`: how many poisoned writes the default policy stops, at what cost.

Data: `app/bench/data/screening_corpus.jsonl`, written for Memwarden by
`app/bench/make_screening_corpus.py` (labelled poisoned / benign, with a dev and a test split
assigned per sentence template). Every write goes through the same steps as `remember`, in-process
and without a database: the FSM check for procedural writes, SR-1 redaction with the built-in
patterns (the write is screened redacted, as the service does), `app.core.screening.screen` with
the row's live neighbours (or live FSM) and the key's allowed sources, and the default policy
(`app.core.policy.default_policy()`, which ends with the high-risk screening baseline). The
outcome of each write is the policy's: `live` (201), `staged` (202) or `denied` (403).

Reported per split and per class: the catch rate (poisoned writes staged or denied), the
false-positive rate (benign writes staged or denied), the reviewer load (share of all writes
staged), which flags fired, and the ids of every miss and false positive. The goal is >= 90 %
of poisoned writes caught with <= 5 % of benign writes staged on the **test** split; the detector
thresholds were calibrated on the dev split only. Screening time per write is measured too.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable

from app.bench import common
from app.core.fsm import validate_fsm
from app.core.policy import WriteRequest, default_policy
from app.core.redaction import Redactor
from app.core.screening import screen
from app.core.screening.hostile import HOSTILE
from app.services.screening import ALLOWED_SOURCES

DATA = Path(__file__).resolve().parent / "data" / "screening_corpus.jsonl"
GOAL_CATCH, GOAL_BENIGN_STAGED = 0.90, 0.05
SPLITS = ("dev", "test", "all")


def load_corpus(path: str | Path = DATA) -> list[dict[str, Any]]:
    """The labelled writes, one JSON object per line."""
    with Path(path).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def judge(row: dict[str, Any], redactor: Redactor | None = None) -> dict[str, Any]:
    """One write through redaction, screening and the default policy: its flags and outcome."""
    redactor = redactor or Redactor()
    if row["type"] == "procedural" and validate_fsm(row["content"]):
        raise ValueError(f"{row['id']}: procedural content is not a valid FSM")
    redacted = redactor.redact_payload(row["content"], row.get("tags", []), row.get("metadata", {}))
    live = row.get("live", [])
    procedural = row["type"] == "procedural"
    started = time.perf_counter()
    result = screen(redacted.content, memory_type=row["type"], tags=redacted.tags, metadata=redacted.metadata,
                    source=row.get("source"), live=[] if procedural else live,
                    live_fsm=live[0] if procedural and live else None, allowed_sources=ALLOWED_SOURCES)
    elapsed_ms = (time.perf_counter() - started) * 1000
    decision = default_policy().evaluate(WriteRequest(
        operation="remember", agent_id="bench", type=row["type"], source=row.get("source"),
        tags=tuple(redacted.tags), content=redacted.content, risk_flags=result.names, risk_level=result.risk))
    outcome = {"allow": "live", "require_approval": "staged", "deny": "denied"}[decision.action]
    return {"id": row["id"], "class": row["class"], "label": row["label"], "split": row["split"],
            "outcome": outcome, "risk": result.risk, "redacted": bool(redacted.findings),
            "flags": {f.name: f.severity for f in result.flags}, "screen_ms": elapsed_ms}


def _rate(part: int, whole: int) -> float | None:
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
            ("catch_rate" if rows[0]["label"] == "poisoned" else "staged_rate"): _rate(stopped(rows), len(rows)),
            "flagged_any": sum(bool(j["flags"]) for j in rows), "flags": dict(sorted(flagged.items())),
            "redacted_by_sr1": sum(j["redacted"] for j in rows),
        }
    return {
        "writes": len(judged), "poisoned": len(poisoned), "benign": len(benign),
        "catch_rate": _rate(stopped(poisoned), len(poisoned)),
        "false_positive_rate": _rate(stopped(benign), len(benign)),
        "reviewer_load": _rate(sum(j["outcome"] == "staged" for j in judged), len(judged)),
        "benign_flagged_any": _rate(sum(bool(j["flags"]) for j in benign), len(benign)),
        "classes": classes,
        "missed": [{"id": j["id"], "flags": j["flags"]} for j in poisoned if j["outcome"] == "live"],
        "false_positives": [{"id": j["id"], "flags": j["flags"]} for j in benign if j["outcome"] != "live"],
    }


def run_benchmark(corpus: list[dict[str, Any]], source: str | Path = DATA, hostile: bool = True) -> dict[str, Any]:
    """Judge every write; summarise per split; check the goals on the test split (and time hostile inputs)."""
    redactor = Redactor()
    judged = [judge(row, redactor) for row in corpus]
    splits = {name: summarise(j for j in judged if name == "all" or j["split"] == name) for name in SPLITS}
    test = splits["test"]
    return {
        "benchmark": "screening",
        "corpus": {"path": _shown_path(source),
                   "writes": len(corpus), "classes": len({r["class"] for r in corpus}),
                   "generator": "app/bench/make_screening_corpus.py"},
        "policy": "default (tenant without a policy): hard-delete and bulk-forget review rules, then the "
                  "screening baseline risk_at_least=high -> require_approval",
        "goals": {"catch_rate_ge_0.90": (test["catch_rate"] or 0) >= GOAL_CATCH,
                  "benign_staged_le_0.05": (test["false_positive_rate"] or 0) <= GOAL_BENIGN_STAGED,
                  "measured_on": "test"},
        "splits": splits,
        "screen_latency": common.latency_summary([j["screen_ms"] for j in judged]),
        "hostile_64kib_ms": hostile_timings() if hostile else None,
        "machine": common.machine(),
    }


def hostile_timings() -> dict[str, float]:
    """Milliseconds to screen each hostile 64 KiB input (content, plus 1 KiB of it as a tag)."""
    out = {}
    for name, text in HOSTILE.items():
        started = time.perf_counter()
        screen(text, memory_type="semantic", tags=[text[:1024]])
        out[name] = round((time.perf_counter() - started) * 1000, 1)
    return out


def _shown_path(path: str | Path) -> str:
    resolved = Path(path).resolve()
    root = DATA.parents[2]
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(resolved)


def _pct(rate: float | None, digits: int = 1) -> str:
    return "n/a" if rate is None else f"{rate:.{digits}%}"


def summary(report: dict[str, Any]) -> str:
    rows = []
    for name in SPLITS:
        s = report["splits"][name]
        rows.append((name, s["writes"], f"{_pct(s['catch_rate'])} ({s['poisoned']})",
                     f"{_pct(s['false_positive_rate'])} ({s['benign']})", _pct(s["reviewer_load"])))
    lines = [common.table(rows, ["split", "writes", "poisoned caught", "benign staged", "reviewer load"]), ""]
    test = report["splits"]["test"]["classes"]
    class_rows = [(name, c["label"], c["n"], _pct(c.get("catch_rate", c.get("staged_rate")), 0), c["flagged_any"])
                  for name, c in test.items()]
    lines.append(common.table(class_rows, ["class (test split)", "label", "n", "staged or denied", "flagged (any)"]))
    lat = report["screen_latency"]
    lines.append(f"screening per write: p50 {lat['p50_ms']} ms, p95 {lat['p95_ms']} ms, p99 {lat['p99_ms']} ms")
    worst = max(report["hostile_64kib_ms"].items(), key=lambda item: item[1])
    lines.append(f"slowest hostile 64 KiB input: {worst[0]} {worst[1]} ms")
    return "\n".join(lines)


def cmd_screening(args: argparse.Namespace, settings) -> int:
    report = run_benchmark(load_corpus(args.data), args.data)
    report["command"] = "memwarden bench screening" + (f" --out {args.out}" if args.out else "")
    print(summary(report))
    goals = report["goals"]
    print("goals on the test split: " + ", ".join(f"{k}={'met' if v else 'NOT met'}"
                                                  for k, v in goals.items() if k != "measured_on"))
    common.write_json(args.out, report)
    return 0


def add_parser(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser("screening", help="catch rate and reviewer load of write screening on a labelled corpus",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(DATA), help="labelled corpus (default: the bundled screening_corpus.jsonl)")
    p.add_argument("--out", help="write the JSON report here (e.g. docs/bench/screening.json)")
    p.set_defaults(func=cmd_screening)
