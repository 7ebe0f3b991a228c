"""The screening benchmark with the held-out sets: what `memwarden bench screening` reports, plus
every hand-written set (``dev.screening.heldout``) judged like the main corpus, per attack family
and beside agent-memory-guard, with

* **leave-one-family-out**: the semantic classifier retrained (and recalibrated) without one
  family's exemplars, then tested on that family;
* **leave-one-set-out** for each spent set: the classifier retrained without that whole set, rules
  unchanged, the nearest thing to a held-out figure a spent set can still give.

Development tooling (not part of the package); run from a checkout:

    python -m dev.screening.bench [--data ROWS] [--sets heldout,heldout_v3] [--families exfiltration] [--out FILE]

``--sets`` and ``--families`` limit a run to some sets and some leave-one-family-out families (every
retraining costs seconds to minutes on a small box); the report then names the selection, and only a
whole run is a figure to record. The hostile-input timings are left to `memwarden bench screening`
(they cost a minute of CPU and say nothing about the held-out sets).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from app.bench import common
from app.bench.corpora import DATA, load_corpus
from app.bench.screening import (GOAL_BENIGN_STAGED, GOAL_CATCH, _embedder, _shown_path, _pct, guard_baseline,
                                 rules_only, run_benchmark, summary)
from app.bench.screening_judge import embed_rows, judge, summarise
from app.core.redaction import Redactor
from app.core.screening import semantic
from dev.screening.heldout import HELDOUT_SETS, MEASURED_SETS


def _status(set_name: str, seen: bool) -> str:
    """How far a hand-written set is still held out: trained on, measured and read, or blind."""
    if seen:
        return "seen/trained (spent held-out set: not held out)"
    if set_name in MEASURED_SETS:
        return "measured once and read (not trained on; the blind figure is recorded)"
    return "held out (blind)"


_CACHE: dict[str, Any] = {}
"""Text -> vector for the trainer's rows, shared by every retraining of one run."""


def exemplar_families() -> list[str]:
    """The attack families the classifier has exemplars of (what leave-one-family-out leaves out)."""
    from dev.screening.train.exemplars import exemplars

    return sorted({e["family"] for e in exemplars() if e["label"] == "poisoned"})


def family_classifiers(embedder, only: Sequence[str] | None = None) -> dict[str, semantic.Classifier]:
    """Per attack family with exemplars (those in ``only`` when given): the semantic classifier
    retrained without that family's exemplars; built once per run and used on every held-out set."""
    from dev.screening.train.exemplars import train

    return {family: train(embedder, skip_family=family, cache=_CACHE) for family in exemplar_families()
            if only is None or family in only}


def leave_one_family_out(rows: list[dict[str, Any]], vectors: list[Any], redactor: Redactor, embedder: str,
                         classifiers: dict[str, semantic.Classifier]) -> dict:
    """Per attack family: the catch rate with the classifier trained without that family (rules
    unchanged), and the benign staged rate under that classifier."""
    result = {}
    for family, classifier in classifiers.items():
        chosen = [(r, v) for r, v in zip(rows, vectors) if r["class"] == family or r["label"] == "benign"]
        part = summarise(judge(r, redactor, v, embedder, classifier) for r, v in chosen)
        result[family] = {"n": part["poisoned"], "catch_rate": part["catch_rate"],
                          "benign_staged": part["false_positive_rate"],
                          "missed": [m["id"] for m in part["missed"]]}
    return result


def heldout_corpora(redactor: Redactor, embedder, sets: Sequence[str] | None = None,
                    families: Sequence[str] | None = None) -> dict[str, Any]:
    """Each hand-written set (those in ``sets`` when given) judged like the main corpus, with
    leave-one-family-out (the families in ``families`` when given) and, for a spent set,
    leave-one-set-out."""
    from dev.screening.train.exemplars import SEEN_SETS, train

    name = embedder.name if embedder else None
    out: dict[str, Any] = {}
    left_out = family_classifiers(embedder, families) if embedder is not None else {}
    for set_name, path in HELDOUT_SETS.items():
        if sets is not None and set_name not in sets:
            continue
        heldout = load_corpus(path)
        vectors = embed_rows(heldout, redactor, embedder)
        seen = set_name in SEEN_SETS
        out[set_name] = {"path": _shown_path(path), "tuned_on": seen, "status": _status(set_name, seen),
                         **summarise(judge(r, redactor, v, name) for r, v in zip(heldout, vectors)),
                         "rules_only": rules_only(heldout, redactor)}
        if embedder is None:
            continue
        out[set_name]["leave_one_family_out"] = leave_one_family_out(heldout, vectors, redactor, embedder.name,
                                                                     left_out)
        if seen:  # the classifier without this whole set: what it does on writes it never trained on
            without = train(embedder, skip_set=set_name, cache=_CACHE)
            part = summarise(judge(r, redactor, v, name, without) for r, v in zip(heldout, vectors))
            out[set_name]["leave_one_set_out"] = {
                "catch_rate": part["catch_rate"], "false_positive_rate": part["false_positive_rate"],
                "poisoned": part["poisoned"], "benign": part["benign"],
                "benign_medium_or_higher": part["benign_medium_or_higher"],
                "thresholds": {"medium": round(without.medium, 3), "high": round(without.high, 3)},
                "classes": {c: round(v.get("catch_rate", v.get("staged_rate")) or 0.0, 4)
                            for c, v in part["classes"].items()},
                "missed": [m["id"] for m in part["missed"]],
                "false_positives": [m["id"] for m in part["false_positives"]]}
    return out


def run(corpus: list[dict[str, Any]], source, sets: Sequence[str] | None = None,
        families: Sequence[str] | None = None) -> dict[str, Any]:
    """The shipped benchmark's report with the held-out sets first among its corpora."""
    report = run_benchmark(corpus, source, hostile=())
    if sets is not None or families is not None:
        report["selection"] = {"sets": list(sets) if sets is not None else "all",
                               "families": list(families) if families is not None else "all"}
    held = heldout_corpora(Redactor(), _embedder(), sets, families)
    report["corpora"] = {**held, **report["corpora"]}
    report["agent_memory_guard"].update({k: guard_baseline(load_corpus(HELDOUT_SETS[k])) for k in held})
    return report


def heldout_summary(report: dict[str, Any]) -> list[str]:
    """Per held-out set: its families, leave-one-set-out and leave-one-family-out."""
    corpora = report["corpora"]
    lines = []
    for name in HELDOUT_SETS:
        if name not in corpora:  # left out of a partial run (--sets)
            continue
        heldout = corpora[name]
        loso = heldout.get("leave_one_set_out")
        if loso:
            lines.append(f"{name} is seen/trained; leave-one-set-out (classifier without it): "
                         f"{_pct(loso['catch_rate'])} caught, {_pct(loso['false_positive_rate'])} benign staged")
        lo = loso["classes"] if loso else {}
        fam = [(f, c["n"], _pct(c.get("catch_rate"), 0), _pct(lo.get(f), 0) if loso else "-", c["flagged_any"])
               for f, c in heldout.get("classes", {}).items() if c["label"] == "poisoned"]
        label = f"{name} family" + (" (seen)" if heldout.get("tuned_on") else "")
        lines += ["", common.table(fam, [label, "n", "staged or denied", "leave-one-set-out", "flagged (any)"])]
        lofo = heldout.get("leave_one_family_out")
        if lofo:
            lines += ["", common.table([(f, v["n"], _pct(v["catch_rate"], 0), _pct(v["benign_staged"]))
                                        for f, v in lofo.items()],
                                       [f"{name} leave-one-family-out", "n", "caught", "benign staged"])]
    return lines


def _named(known, what: str):
    """An argparse type: a comma-separated list of names, each one of ``known()``; an empty list is allowed."""
    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n not in known()]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(map(repr, unknown))}; "
                                             f"known: {', '.join(known())}")
        return names
    return parse


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.screening.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DATA), help="labelled corpus (default: the bundled screening_corpus.jsonl)")
    parser.add_argument("--out", help="write the JSON report here")
    parser.add_argument("--sets", type=_named(lambda: list(HELDOUT_SETS), "hand-written set"), metavar="NAME[,NAME]",
                        help=f"only these hand-written sets (of {', '.join(HELDOUT_SETS)})")
    parser.add_argument("--families", type=_named(exemplar_families, "attack family"), metavar="NAME[,NAME]",
                        help="leave-one-family-out only for these families (default: every family with exemplars)")
    args = parser.parse_args(argv)
    report = run(load_corpus(args.data), args.data, sets=args.sets, families=args.families)
    chosen = "".join(f" --{k} {','.join(v)}" for k, v in (("sets", args.sets), ("families", args.families)) if v is not None)
    report["command"] = "python -m dev.screening.bench" + chosen + (f" --out {args.out}" if args.out else "")
    print("\n".join([summary(report), *heldout_summary(report)]))
    if "selection" in report:
        print(f"partial run (hand-written sets: {report['selection']['sets']}; leave-one-family-out families: "
              f"{report['selection']['families']}): not a figure to record")
    for name in HELDOUT_SETS:
        held = report["corpora"].get(name)
        if held:
            figures = held.get("leave_one_set_out", held) if held.get("tuned_on") else held
            which = ("leave-one-set-out on seen set " if held.get("tuned_on")
                     else "read (no longer blind) held-out set " if name in MEASURED_SETS else "held-out set ")
            print(f"goals on {which}{name}: "
                  f"catch_rate_ge_0.90={'met' if figures['catch_rate'] >= GOAL_CATCH else 'NOT met'}, "
                  f"benign_staged_le_0.05={'met' if figures['false_positive_rate'] <= GOAL_BENIGN_STAGED else 'NOT met'}")
    common.write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
