"""`memwarden bench screening`: how many poisoned writes the default policy stops, at what cost.

Data: `app/bench/data/screening_corpus.jsonl`, written for Memwarden by
`dev/screening/train/corpus.py` (labelled poisoned / benign, with a dev and a test split
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

That test split shares templates' fillers and style with dev, so it is not truly held out. The
same run therefore also reports, unless `--no-extra`:

* **benign load**: the ordinary writes the other benchmarks make (`corpora.benign_load_writes`);
* **external**: the labelled prompt-injection corpus shipped in the `bastioncorpus` package
  (PyPI, MIT licence; `pip install 'memwarden[bench]'`) and agent-memory-guard's AMSB scenarios,
  run without any tuning; "skipped" when absent;
* **agent-memory-guard** (OWASP, PyPI `agent-memory-guard`, Apache-2.0; `Policy.strict()`), side
  by side on every corpus: a write counts as stopped when it blocks or quarantines it.

Writes are embedded with the local model (as `remember` does) so the semantic signal runs.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, Sequence

from app.bench import common
from app.bench.corpora import AMSB, DATA, amsb_corpus, benign_load_writes, external_corpus, load_corpus
from app.bench.screening_judge import embed_rows, judge, rate, summarise
from app.core.redaction import Redactor
from app.core.screening import screen
from app.core.screening.hostile import HOSTILE

GOAL_CATCH, GOAL_BENIGN_STAGED = 0.90, 0.05
SPLITS = ("dev", "test", "all")


def run_benchmark(corpus: list[dict[str, Any]], source: str | Path = DATA,
                  hostile: Sequence[str] = tuple(HOSTILE), extra: bool = True) -> dict[str, Any]:
    """Judge every write; summarise per split; check the goals on the test split (and time the hostile
    inputs named in ``hostile``, all by default); with ``extra``, also the benign-load and
    external corpora and agent-memory-guard side by side."""
    redactor = Redactor()
    embedder = _embedder()
    vectors = embed_rows(corpus, redactor, embedder)
    name = embedder.name if embedder else None
    judged = [judge(row, redactor, vector, name) for row, vector in zip(corpus, vectors)]
    splits = {name_: summarise(j for j in judged if name_ == "all" or j["split"] == name_) for name_ in SPLITS}
    test = splits["test"]
    report = {
        "benchmark": "screening",
        "corpus": {"path": _shown_path(source),
                   "writes": len(corpus), "classes": len({r["class"] for r in corpus})},
        "policy": "default (tenant without a policy): hard-delete and bulk-forget review rules, then the "
                  "screening baseline risk_at_least=high -> require_approval",
        "embedder": name,
        "goals": {"catch_rate_ge_0.90": (test["catch_rate"] or 0) >= GOAL_CATCH,
                  "benign_staged_le_0.05": (test["false_positive_rate"] or 0) <= GOAL_BENIGN_STAGED,
                  "measured_on": "test"},
        "splits": splits,
        "screen_latency": common.latency_summary([j["screen_ms"] for j in judged]),
        "hostile_64kib_ms": hostile_timings(hostile) if hostile else None,
        "machine": common.machine(),
    }
    if extra:
        report["corpora"] = extra_corpora(redactor, embedder)
        report["agent_memory_guard"] = {"generated_test": guard_baseline([r for r in corpus if r["split"] == "test"]),
                                        **{k: guard_baseline(load_named(k)) for k in report["corpora"]
                                           if report["corpora"][k].get("writes")}}
    return report


def load_named(name: str) -> list[dict[str, Any]]:
    """The rows of an extra corpus by its report name."""
    if name == "benign_load":
        return benign_load_writes()
    return (amsb_corpus() if name == AMSB else external_corpus()) or []


def extra_corpora(redactor: Redactor, embedder) -> dict[str, Any]:
    """The benign-load and external corpora, judged like the main one."""
    name = embedder.name if embedder else None
    out: dict[str, Any] = {}
    load = benign_load_writes()
    vectors = embed_rows(load, redactor, embedder)
    out["benign_load"] = {"source": "app/bench/corpora.benign_load_writes: load-test, hot-path, scale and recall facts",
                          "tuned_on": False, **summarise(judge(r, redactor, v, name) for r, v in zip(load, vectors))}
    external = external_corpus()
    if external is None:
        out["external:bastioncorpus"] = {"skipped": "package not installed (pip install '.[bench]')"}
    else:
        vectors = embed_rows(external, redactor, embedder)
        out["external:bastioncorpus"] = {
            "package": f"bastioncorpus {_version('bastioncorpus')} (PyPI, MIT licence), corpus/injections.jsonl",
            "tuned_on": False, **summarise(judge(r, redactor, v, name) for r, v in zip(external, vectors)),
            "rules_only": rules_only(external, redactor)}
    amsb = amsb_corpus()
    if amsb is None:
        out[AMSB] = {"skipped": "agent-memory-guard not installed (pip install '.[bench]')"}
    else:
        vectors = embed_rows(amsb, redactor, embedder)
        out[AMSB] = {"package": f"agent-memory-guard {_version('agent-memory-guard')} (PyPI, Apache-2.0), "
                                "agent_memory_guard/bench/scenarios.py",
                     "tuned_on": False, **summarise(judge(r, redactor, v, name) for r, v in zip(amsb, vectors)),
                     "rules_only": rules_only(amsb, redactor)}
    return out


def rules_only(rows: list[dict[str, Any]], redactor: Redactor) -> dict[str, Any]:
    """Catch and benign-staged rates without the semantic signal (what the rules alone do)."""
    part = summarise(judge(r, redactor) for r in rows)
    return {"catch_rate": part["catch_rate"], "false_positive_rate": part["false_positive_rate"]}


def guard_baseline(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """agent-memory-guard 0.3.x (``Policy.strict()``) on the same writes: stopped = block or quarantine."""
    try:
        from agent_memory_guard import Action, MemoryGuard, Policy, PolicyViolation
    except ImportError:
        return {"skipped": "agent-memory-guard not installed (pip install '.[bench]')"}
    stopped = {"poisoned": 0, "benign": 0}
    totals = {"poisoned": 0, "benign": 0}
    for row in rows:
        guard = MemoryGuard(policy=Policy.strict())
        key, value = row.get("guard_key", "memory.note"), row["content"]  # AMSB rows: the scenario's own key
        if "guard_key" not in row and (row.get("tags") or row.get("metadata")):
            value = {"content": row["content"], "tags": row.get("tags", []), "metadata": row.get("metadata", {})}
        try:
            action = guard.write(key, value)
        except PolicyViolation:
            action = Action.BLOCK
        totals[row["label"]] += 1
        stopped[row["label"]] += action in (Action.BLOCK, Action.QUARANTINE)
    return {"version": _version("agent-memory-guard"), "policy": "strict",
            "catch_rate": rate(stopped["poisoned"], totals["poisoned"]), "poisoned": totals["poisoned"],
            "false_positive_rate": rate(stopped["benign"], totals["benign"]), "benign": totals["benign"]}


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _embedder():
    """The local model `remember` uses by default (None if it cannot load: the semantic signal is then off)."""
    try:
        from app.embeddings import LocalMiniLMEmbedder

        return LocalMiniLMEmbedder()
    except Exception:  # noqa: BLE001 - a bench without the model still reports the rules
        return None


def hostile_timings(names: Sequence[str]) -> dict[str, float]:
    """Milliseconds to screen each hostile 64 KiB input named (content, plus 1 KiB of it as a tag)."""
    out = {}
    for name in names:
        text = HOSTILE[name]
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
    if report["hostile_64kib_ms"]:
        worst = max(report["hostile_64kib_ms"].items(), key=lambda item: item[1])
        lines.append(f"slowest hostile 64 KiB input: {worst[0]} {worst[1]} ms")
    lines += extra_summary(report)
    return "\n".join(lines)


def extra_summary(report: dict[str, Any]) -> list[str]:
    """Held-out, external and agent-memory-guard figures, side by side."""
    corpora = report.get("corpora")
    if not corpora:
        return []
    guard = report.get("agent_memory_guard", {})
    rows = []
    for name, part in [("generated_test", report["splits"]["test"]), *corpora.items()]:
        g = guard.get(name, {})
        if "skipped" in part:
            rows.append((name, "skipped", "", "", part["skipped"]))
            continue
        shown = f"{name} (seen/trained)" if part.get("tuned_on") else name
        rows.append((shown, part["writes"], f"{_pct(part['catch_rate'])} ({part['poisoned']})",
                     f"{_pct(part['false_positive_rate'])} ({part['benign']})",
                     g.get("skipped") or f"{_pct(g.get('catch_rate'))} caught, {_pct(g.get('false_positive_rate'))} benign"))
    lines = ["", common.table(rows, ["corpus", "writes", "Memwarden caught", "Memwarden benign staged",
                                     "agent-memory-guard (strict)"])]
    lines += [f"{name}: {_pct(part['benign_medium_or_higher'])} of benign writes at medium risk or higher "
              f"(staged by a policy that stages medium)" for name, part in corpora.items() if part.get("benign")]
    for name, part in corpora.items():
        if "rules_only" in part:
            lines.append(f"{name} without the semantic signal: {_pct(part['rules_only']['catch_rate'])} caught, "
                         f"{_pct(part['rules_only']['false_positive_rate'])} benign staged")
    return lines


def cmd_screening(args: argparse.Namespace, settings) -> int:
    report = run_benchmark(load_corpus(args.data), args.data, extra=not args.no_extra,
                           hostile=args.hostile or tuple(HOSTILE))
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
    p.add_argument("--out", help="write the JSON report here")
    p.add_argument("--no-extra", action="store_true",
                   help="skip the benign-load and external corpora and agent-memory-guard (only --data)")
    p.add_argument("--hostile", type=_hostile_names, metavar="NAMES",
                   help="time only these hostile 64 KiB inputs, comma-separated (default: all "
                        f"{len(HOSTILE)}, about a second each)")
    p.set_defaults(func=cmd_screening)


def _hostile_names(value: str) -> tuple[str, ...]:
    names = tuple(value.split(","))
    unknown = sorted(set(names) - set(HOSTILE))
    if unknown:
        raise argparse.ArgumentTypeError(f"no hostile input named {', '.join(unknown)}; "
                                         f"known: {', '.join(sorted(HOSTILE))}")
    return names
