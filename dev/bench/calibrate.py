"""`memwarden bench calibrate`: the default relevance floor, fitted on Memwarden's own labelled set.

Data: `app/bench/data/calibration.json` (written for Memwarden, never the memorywire corpus): facts
across eighteen scopes, labelled queries with gold ids, and no-match probes (empty gold), every query
scoped to its `user_id` (null = the whole agent), as recall scopes them.

For every query, with the real embedder (in-process, no database; cosine = dot product of the
unit vectors the server stores), this computes the cosine similarity of each memory in scope,
then the two numbers recall's defaults act on:

- `similarity` of each hit: the per-hit floor (`DEFAULT_MIN_SCORE`) drops weak hits;
- `lift` of the query = best similarity in scope - beta * scope mean similarity * n / (n + n0):
  the answerability gate (`DEFAULT_MIN_LIFT`) returns nothing when even the best memory is not
  clearly closer to the query than the scope's memories are on average. The scope mean removes
  what every memory in scope shares with the query (above all the person's name: "What is
  Priya's blood type?" is 0.42 similar to "Priya works night shifts as an ICU nurse"); n0 pseudo
  rows of similarity 0 keep tiny scopes (1-3 memories) from gating themselves out.

A labelled query is handled when the gate lets it through and every gold memory clears the floor; a
probe is handled when it comes back empty. Four rules are fitted by exhaustive search, maximising
handled queries averaged over a +/-0.02 neighbourhood of each threshold (so the choice lands on a
wide plateau, not on a knife edge one query could flip), then taking the middle of that plateau (the
floor of rule 2: 0.02 below its top, the highest floor that keeps every gold memory the gate lets
through); margins are the distances to the plateau's edges: (1) a cosine floor alone; (2) floor +
gate (or keyword evidence: a fact holding every query word), beta on a 0.1 grid; (3) rule 2 plus a
generic path: a query whose shrunk scope mean is under a bound (it shares nothing with the scope,
e.g. "the user" over facts naming Ada) passes when its best similarity is a gap above that mean; (4)
rule 3 with the lift gaining weight * the best scope-residual similarity among the nearest 20
memories (`app.core.relevance`: query and memory with the scope's centroid taken away, so a shared
name counts for nothing), the weight searched too. Recall serves rule 4 where the search gives the
residual (scopes of 6 to 2,000 memories; the set's scopes all have 6 or more) and rule 3's values
elsewhere, so both are checked against its constants. Leave-one-scope-out cross-validation (fit on
the other scopes, score the held-out one) estimates how each rule does on data it was not fitted on.
Recall ships the rule with the best cross-validated score (a more complex one only when strictly
better); the chosen values are written to `app/services/memory/recall.py` by hand.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from app.bench import common

DATA = Path(__file__).resolve().parents[2] / "app" / "bench" / "data" / "calibration.json"
BETAS = tuple(round(b, 1) for b in np.arange(0.0, 1.01, 0.1))


@dataclass
class QueryStats:
    """One query's similarities, as the recall service sees them."""

    query: str
    user_id: str | None
    probe: bool
    scope_rows: int
    scope_mean: float
    best: float
    best_id: str
    gold: dict[str, float]
    keyword_full: bool = False
    """Some memory in scope holds every word of the query (recall's keyword evidence, which
    passes the gate whatever the lift)."""
    residual_best: float = 0.0
    """The best scope-residual similarity among the query's nearest `RESIDUAL_POOL` memories
    (`residual_similarity`): what stands out once what the scope shares is taken away."""

    @property
    def gold_min(self) -> float:
        return min(self.gold.values()) if self.gold else float("nan")

    def shrunk_mean(self, prior_rows: float) -> float:
        return self.scope_mean * self.scope_rows / (self.scope_rows + prior_rows)

    def lift(self, beta: float, prior_rows: float, weight: float = 0.0) -> float:
        return self.best - beta * self.shrunk_mean(prior_rows) + weight * self.residual_best

    def passes(self, gate: float | None, beta: float, prior_rows: float, generic: tuple[float, float] | None,
               weight: float = 0.0) -> bool:
        """Through the gate: keyword evidence, the lift, or (when fitted) the generic path."""
        if gate is None or self.keyword_full or self.lift(beta, prior_rows, weight) >= gate:
            return True
        mean = self.shrunk_mean(prior_rows)
        return generic is not None and mean < generic[0] and self.best - mean >= generic[1]


# PostgreSQL's English stop words that appear in questions; with the suffix stripping below, an
# approximation of `to_tsvector('english', ...)` good enough for short questions and facts.
STOP_WORDS = frozenset(
    "a about an and are as at be been by can could did do does doing for from had has have he her "
    "him his how i if in into is it its me my no not of on or our she should so than that the their "
    "them then there these they this those to too was we were what when where which who whom why "
    "will with would you your any all".split())


def lexemes(text: str) -> set[str]:
    """The content words of `text`, crudely stemmed (what a full-text match would compare)."""
    out = set()
    for word in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower()):
        word = word.split("'")[0]
        if word in STOP_WORDS:
            continue
        for suffix in ("ing", "es", "ed", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        out.add(word)
    return out


CATEGORY_SCOPES = ("bruno", "ingrid", "desmond", "yuki")  # v3: asked about by category
RESIDUAL_POOL = 20  # recall ranks the scope's nearest max(2k, 20) memories: 20 at the default k


def query_stats(embedder, facts: Sequence[dict], queries: Sequence[dict]) -> list[QueryStats]:
    from app.core.relevance import residual_similarity

    fact_vecs = np.asarray(embedder.embed([f["content"] for f in facts]))
    query_vecs = np.asarray(embedder.embed([q["query"] for q in queries]))
    out = []
    for q, qv in zip(queries, query_vecs):
        scope = [i for i, f in enumerate(facts) if q.get("user_id") is None or f["user_id"] == q["user_id"]]
        sims = fact_vecs[scope] @ qv
        centroid = fact_vecs[scope].mean(axis=0)
        near = np.argsort(-sims, kind="stable")[:RESIDUAL_POOL]
        residual = max(residual_similarity(float(sims[i]), float(sims.mean()), float(fact_vecs[scope[i]] @ centroid),
                                           float(centroid @ centroid)) for i in near)
        by_id = {facts[i]["id"]: float(s) for i, s in zip(scope, sims)}
        best = int(np.argmax(sims))
        words = lexemes(q["query"])
        full = bool(words) and any(words <= lexemes(facts[i]["content"]) for i in scope)
        out.append(QueryStats(q["query"], q.get("user_id"), not q["gold_ids"], len(scope), float(sims.mean()),
                              float(sims[best]), facts[scope[best]]["id"],
                              {g: by_id[g] for g in q["gold_ids"]}, full, float(residual)))
    return out


def evaluate(stats: Sequence[QueryStats], floor: float, gate: float | None = None, beta: float = 0.0,
             prior_rows: float = 2.0, generic: tuple[float, float] | None = None, weight: float = 0.0) -> dict[str, int]:
    """How many labelled queries keep all their gold, and how many probes come back empty."""
    kept = empty = 0
    for s in stats:
        passes = s.passes(gate, beta, prior_rows, generic, weight)
        if s.probe:
            empty += int(not (passes and s.best >= floor))
        else:
            kept += int(passes and s.gold_min >= floor)
    labelled = sum(not s.probe for s in stats)
    return {"handled": kept + empty, "of": len(stats), "gold_kept": kept, "labelled": labelled,
            "probes_empty": empty, "probes": len(stats) - labelled}


STEP = 0.005
SMOOTH = 4  # grid steps either side: a threshold is scored by its +/-0.02 neighbourhood
FLOOR_GRID = np.round(np.arange(-0.2, 1.0 + 1e-9, STEP), 3)
LIFT_GRID = np.round(np.arange(-0.2, 0.8 + 1e-9, STEP), 3)


def _arrays(stats: Sequence[QueryStats]):
    probe = np.array([s.probe for s in stats])
    keyword_full = np.array([s.keyword_full for s in stats])
    best = np.array([s.best for s in stats])
    gold_min = np.array([np.inf if s.probe else s.gold_min for s in stats])
    return probe, best, gold_min, keyword_full


def _smooth(handled: np.ndarray) -> np.ndarray:
    """Mean over the +/-SMOOTH neighbourhood along every axis (edges padded): prefers wide plateaus
    to knife-edge optima, so the chosen value is not one a single query could flip."""
    out = handled.astype(float)
    for axis in range(out.ndim):
        padded = np.concatenate([np.repeat(np.take(out, [0], axis), SMOOTH, axis), out,
                                 np.repeat(np.take(out, [-1], axis), SMOOTH, axis)], axis)
        cums = np.cumsum(np.insert(padded, 0, 0.0, axis=axis), axis=axis)
        width = 2 * SMOOTH + 1
        out = (np.take(cums, range(width, cums.shape[axis]), axis) - np.take(cums, range(0, cums.shape[axis] - width), axis)) / width
    return out


def fit_floor(stats: Sequence[QueryStats]) -> dict[str, Any]:
    """Rule 1: a cosine floor alone."""
    probe, best, gold_min, _ = _arrays(stats)
    kept = (gold_min[None, :] >= FLOOR_GRID[:, None]) & ~probe[None, :]
    empty = (best[None, :] < FLOOR_GRID[:, None]) & probe[None, :]
    handled = (kept | empty).sum(axis=1)
    i = int(np.argmax(_smooth(handled)))
    plateau = _plateau(FLOOR_GRID, handled, i)
    floor = _centre(plateau)
    return {"rule": "floor", "min_score": floor, "plateau": plateau, "margin": round((plateau[1] - plateau[0]) / 2, 3),
            "result": evaluate(stats, floor)}


def _centre(plateau: list[float]) -> float:
    return round(round((plateau[0] + plateau[1]) / 2 / STEP) * STEP, 3)


def _plateau(grid: np.ndarray, handled: np.ndarray, i: int) -> list[float]:
    """The run of thresholds around grid[i] scoring what grid[i] scores (how far it may move)."""
    lo = hi = i
    while lo > 0 and handled[lo - 1] == handled[i]:
        lo -= 1
    while hi < len(grid) - 1 and handled[hi + 1] == handled[i]:
        hi += 1
    return [float(grid[lo]), float(grid[hi])]


def fit_gate(stats: Sequence[QueryStats], prior_rows: float = 2.0, betas: Sequence[float] = BETAS) -> dict[str, Any]:
    """Rule 2: per-hit cosine floor + per-query lift gate; exhaustive over (beta, gate, floor)."""
    probe, best, gold_min, keyword_full = _arrays(stats)
    chosen = None
    for beta in betas:
        lifts = np.array([s.lift(beta, prior_rows) for s in stats])
        passes = (lifts[None, :] >= LIFT_GRID[:, None]) | keyword_full     # [gate, query]
        kept = passes[:, None, :] & (gold_min[None, None, :] >= FLOOR_GRID[None, :, None]) & ~probe
        empty = ~(passes[:, None, :] & (best[None, None, :] >= FLOOR_GRID[None, :, None])) & probe
        handled = (kept | empty).sum(axis=2)                                # [gate, floor]
        smooth = _smooth(handled)
        g, f = np.unravel_index(int(np.argmax(smooth)), smooth.shape)
        # Gold-kept and probes-empty say nothing against a higher floor until it starts dropping
        # gold, so the floor is the highest on the optimal plateau at this gate (best precision).
        top = smooth[g].max()
        f = int(np.flatnonzero(smooth[g] >= top - 1e-9)[-1])
        key = (float(top), -abs(beta - 0.5))
        if chosen is None or key > chosen[0]:
            chosen = (key, float(beta), g, f, lifts, handled)
    _, beta, g, f, lifts, handled = chosen
    # The gate sits mid-plateau (as far as possible from flipping a query either way); the floor
    # SMOOTH steps below the top of its plateau (the highest that keeps every gated-through gold).
    gate_plateau = _plateau(LIFT_GRID, handled[:, f], g)
    gate = _centre(gate_plateau)
    g = int(np.argmin(np.abs(LIFT_GRID - gate)))
    floor_plateau = _plateau(FLOOR_GRID, handled[g], f)
    floor = round(max(floor_plateau[0], floor_plateau[1] - SMOOTH * STEP), 3)
    return {"rule": "floor+gate", "beta": beta, "prior_rows": prior_rows,
            "min_lift": gate, "min_lift_plateau": gate_plateau,
            "min_lift_margin": round(min(gate - gate_plateau[0], gate_plateau[1] - gate), 3),
            "min_score": floor, "min_score_plateau": floor_plateau,
            "min_score_margin": round(floor_plateau[1] - floor, 3),
            "result": evaluate(stats, floor, gate, beta, prior_rows)}


GENERIC_BETAS = tuple(round(b, 1) for b in np.arange(0.3, 0.71, 0.1))
GENERIC_MEANS = np.round(np.arange(0.05, 0.30 + 1e-9, 0.01), 3)
GAP_GRID = np.round(np.arange(0.05, 0.40 + 1e-9, STEP), 3)
GENERIC_FLOORS = np.round(np.arange(0.15, 0.35 + 1e-9, 0.01), 3)


def fit_generic(stats: Sequence[QueryStats], prior_rows: float = 2.0, weights: Sequence[float] = (0.0,),
                betas: Sequence[float] = GENERIC_BETAS) -> dict[str, Any]:
    """Rule 3: rule 2's floor and lift gate, plus a generic path: a query whose (shrunk) scope mean
    is under `max_mean` (it shares nothing with the scope, e.g. "the user" over facts naming Ada)
    passes when best - mean >= `min_gap`. Exhaustive over (beta, max_mean, floor) with the
    (gate, gap) plane smoothed like rule 2; gate and gap taken mid-plateau. With `weights` (rule
    4) the lift also gains weight * the best scope-residual similarity, the weight searched too."""
    probe, best, gold_min, keyword_full = _arrays(stats)
    mean = np.array([s.shrunk_mean(prior_rows) for s in stats])
    residual = np.array([s.residual_best for s in stats])
    gap = (best - mean)[None, :] >= GAP_GRID[:, None]                       # [gap, query]
    chosen = None
    for weight, beta in ((w, b) for w in weights for b in betas):
        lifted = (best - beta * mean + weight * residual)[None, :] >= LIFT_GRID[:, None]  # [gate, query]
        for max_mean in GENERIC_MEANS:
            generic = gap & (mean < max_mean)
            passes = lifted[:, None, :] | generic[None, :, :] | keyword_full   # [gate, gap, query]
            for floor in GENERIC_FLOORS:
                handled = ((passes & (gold_min >= floor) & ~probe) |
                           (~(passes & (best >= floor)) & probe)).sum(axis=2)
                smooth = _smooth(handled)
                g, c = np.unravel_index(int(np.argmax(smooth)), smooth.shape)
                key = (float(smooth[g, c]), float(floor), -abs(beta - 0.5), -weight)
                if chosen is None or key > chosen[0]:
                    chosen = (key, float(beta), float(max_mean), float(floor), g, c, handled, float(weight))
    _, beta, max_mean, floor, g, c, handled, weight = chosen
    gate_plateau = _plateau(LIFT_GRID, handled[:, c], g)
    gate = _centre(gate_plateau)
    g = int(np.argmin(np.abs(LIFT_GRID - gate)))
    gap_plateau = _plateau(GAP_GRID, handled[g], c)
    min_gap = _centre(gap_plateau)
    rule = {"rule": "floor+gate+generic", "beta": beta, "prior_rows": prior_rows,
            "min_lift": gate, "min_lift_plateau": gate_plateau, "min_score": floor,
            "generic_max_mean": max_mean, "generic_min_gap": min_gap, "generic_min_gap_plateau": gap_plateau,
            "result": evaluate(stats, floor, gate, beta, prior_rows, (max_mean, min_gap), weight)}
    if weights != (0.0,):
        rule.update(rule="floor+residual gate+generic", residual_weight=weight)
    return rule


RESIDUAL_WEIGHTS = (0.5, 1.0)
RESIDUAL_BETAS = (0.3, 0.5, 0.7)


def fit_residual(stats: Sequence[QueryStats], prior_rows: float = 2.0) -> dict[str, Any]:
    """Rule 4: rule 3 with the scope-residual similarity added to the lift (a weight > 0)."""
    return fit_generic(stats, prior_rows, RESIDUAL_WEIGHTS, RESIDUAL_BETAS)


def cross_validate(stats: Sequence[QueryStats], fit) -> dict[str, int]:
    """Leave one scope out: fit on the others, score the held-out scope; summed over scopes."""
    total = {"handled": 0, "of": 0, "gold_kept": 0, "labelled": 0, "probes_empty": 0, "probes": 0}
    for scope in sorted({str(s.user_id) for s in stats}):
        train = [s for s in stats if str(s.user_id) != scope]
        test = [s for s in stats if str(s.user_id) == scope]
        fitted = fit(train)
        generic = (fitted["generic_max_mean"], fitted["generic_min_gap"]) if "generic_min_gap" in fitted else None
        result = evaluate(test, fitted["min_score"], fitted.get("min_lift"), fitted.get("beta", 0.0),
                          fitted.get("prior_rows", 2.0), generic, fitted.get("residual_weight", 0.0))
        for key in total:
            total[key] += result[key]
    return total


def roc_area(stats: Sequence[QueryStats], score) -> float:
    """How well `score` ranks labelled queries above probes: the chance a random labelled query
    scores higher than a random probe (ties half), no threshold involved."""
    labelled = np.array([score(s) for s in stats if not s.probe])
    probes = np.array([score(s) for s in stats if s.probe])
    wins = (labelled[:, None] > probes[None, :]).sum() + 0.5 * (labelled[:, None] == probes[None, :]).sum()
    return round(float(wins / (len(labelled) * len(probes))), 3)


def _dist(values: Sequence[float]) -> dict[str, float]:
    v = np.asarray(values, dtype=float)
    return {name: round(float(np.percentile(v, p)), 3) for name, p in
            (("min", 0), ("p05", 5), ("p25", 25), ("p50", 50), ("p75", 75), ("p95", 95), ("max", 100))}


def calibrate(data: dict[str, Any], embedder) -> dict[str, Any]:
    stats = query_stats(embedder, data["facts"], data["queries"])
    fits = {"floor": fit_floor, "floor+gate": fit_gate, "floor+gate+generic": fit_generic,
            "floor+residual gate+generic": fit_residual}
    rules = {name: fit(stats) for name, fit in fits.items()}
    for name, fit in fits.items():
        rules[name]["cross_validated"] = cross_validate(stats, fit)
    # The simplest rule wins ties: a rule ships only when it handles more queries cross-validated.
    chosen = rules["floor"]
    for rule in list(rules.values())[1:]:
        if rule["cross_validated"]["handled"] > chosen["cross_validated"]["handled"]:
            chosen = rule
    beta, prior = chosen.get("beta", rules["floor+gate"]["beta"]), rules["floor+gate"]["prior_rows"]
    weight = chosen.get("residual_weight", 0.0)
    name = f"beta_{beta}" + (f"_residual_{weight}" if weight else "")
    labelled = [s for s in stats if not s.probe]
    probes = [s for s in stats if s.probe]
    return {
        "benchmark": "calibrate",
        "data": {"name": data.get("name"), "facts": len(data["facts"]), "labelled_queries": len(labelled),
                 "no_match_probes": len(probes), "scopes": len({str(s.user_id) for s in stats})},
        "embedder": getattr(embedder, "name", "?"),
        "distributions": {
            "gold_similarity": _dist([v for s in labelled for v in s.gold.values()]),
            "probe_best_similarity": _dist([s.best for s in probes]),
            "labelled_residual_best": _dist([s.residual_best for s in labelled]),
            "probe_residual_best": _dist([s.residual_best for s in probes]),
            f"labelled_lift_{name}": _dist([s.lift(beta, prior, weight) for s in labelled]),
            f"probe_lift_{name}": _dist([s.lift(beta, prior, weight) for s in probes]),
        },
        "roc_area": {part: {"best": roc_area(subset, lambda s: s.best),
                            "lift_beta_0.5": roc_area(subset, lambda s: s.lift(0.5, prior)),
                            "residual_best": roc_area(subset, lambda s: s.residual_best),
                            "lift_beta_0.5_plus_residual": roc_area(subset, lambda s: s.lift(0.5, prior, 1.0))}
                     for part, subset in (("all", stats),
                                          ("category", [s for s in stats if s.user_id in CATEGORY_SCOPES]))},
        "rules": rules,
        "chosen": chosen,
        "queries": [{**asdict(s), "lift": round(s.lift(beta, prior, weight), 4)} for s in stats],
    }


def summary(report: dict[str, Any]) -> str:
    rows = []
    for name, rule in report["rules"].items():
        r, cv = rule["result"], rule["cross_validated"]
        span = lambda p: f"[{p[0]:.3f}, {p[1]:.3f}]"  # noqa: E731
        params = (f"min_score={rule['min_score']:.3f} (optimal {span(rule['plateau'])})" if name == "floor" else
                  f"min_score={rule['min_score']:.3f}"
                  + (f" (optimal {span(rule['min_score_plateau'])})" if "min_score_plateau" in rule else "")
                  + f", beta={rule['beta']}, min_lift={rule['min_lift']:.3f} (optimal {span(rule['min_lift_plateau'])})"
                  + (f", generic: mean<{rule['generic_max_mean']:.2f}, gap>={rule['generic_min_gap']:.3f} "
                     f"(optimal {span(rule['generic_min_gap_plateau'])})" if "generic_min_gap" in rule else "")
                  + (f", residual weight={rule['residual_weight']}" if "residual_weight" in rule else ""))
        rows.append((name, params, f"{r['handled']}/{r['of']} ({r['gold_kept']}/{r['labelled']} gold, "
                     f"{r['probes_empty']}/{r['probes']} empty)",
                     f"{cv['handled']}/{cv['of']} ({cv['gold_kept']} gold, {cv['probes_empty']} empty)"))
    lines = [common.table(rows, ["rule", "fitted values", "in-sample", "leave-one-scope-out"])]
    d = report["distributions"]
    for key, dist in d.items():
        lines.append(f"  {key:40s} " + "  ".join(f"{k}={v:.3f}" for k, v in dist.items()))
    for part, areas in report.get("roc_area", {}).items():
        lines.append(f"  ROC area ({part:8s})                      " + "  ".join(f"{k}={v:.3f}" for k, v in areas.items()))
    return "\n".join(lines)


def current_defaults() -> dict[str, float]:
    from app.services.memory import recall

    return {name: getattr(recall, name) for name in ("DEFAULT_MIN_SCORE", "DEFAULT_MIN_LIFT", "LIFT_BETA",
                                                     "LIFT_PRIOR_ROWS", "GENERIC_MAX_MEAN", "GENERIC_MIN_GAP",
                                                     "RESIDUAL_WEIGHT", "PLAIN_MIN_LIFT", "PLAIN_LIFT_BETA",
                                                     "PLAIN_GENERIC_MAX_MEAN", "PLAIN_GENERIC_MIN_GAP")
            if hasattr(recall, name)}


def cmd_calibrate(args: argparse.Namespace, settings) -> int:
    from app.embeddings import get_embedder

    data = json.loads(Path(args.data).read_text(encoding="utf-8"))
    report = calibrate(data, get_embedder(settings.embedder))
    chosen = report["chosen"]
    defaults = current_defaults()
    wanted = {"DEFAULT_MIN_SCORE": chosen["min_score"]}
    if chosen["rule"] != "floor":
        wanted.update(DEFAULT_MIN_LIFT=chosen["min_lift"], LIFT_BETA=chosen["beta"], LIFT_PRIOR_ROWS=chosen["prior_rows"])
    if "generic_min_gap" in chosen:
        wanted.update(GENERIC_MAX_MEAN=chosen["generic_max_mean"], GENERIC_MIN_GAP=chosen["generic_min_gap"])
    wanted["RESIDUAL_WEIGHT"] = chosen.get("residual_weight", 0.0)
    if "residual_weight" in chosen:  # large scopes (no residual in the search) keep the lift-only rule 3
        plain = report["rules"]["floor+gate+generic"]
        wanted.update(PLAIN_MIN_LIFT=plain["min_lift"], PLAIN_LIFT_BETA=plain["beta"],
                      PLAIN_GENERIC_MAX_MEAN=plain["generic_max_mean"], PLAIN_GENERIC_MIN_GAP=plain["generic_min_gap"])
    report["recall_defaults"] = {"current": defaults, "calibrated": wanted,
                                 "up_to_date": all(abs(defaults.get(k, -9) - v) < 1e-9 for k, v in wanted.items())}
    report["command"] = "memwarden bench calibrate" + (f" --out {args.out}" if args.out else "")
    print(summary(report))
    print(f"chosen rule: {chosen['rule']} -> " + ", ".join(f"{k}={v}" for k, v in wanted.items()))
    print("app/services/memory/recall.py defaults " + ("match" if report["recall_defaults"]["up_to_date"] else
                                                 f"DIFFER (current {defaults})"))
    common.write_json(args.out, report)
    return 0


def add_parser(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser("calibrate", help="fit the default relevance floor on Memwarden's own labelled set",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(DATA), help="labelled set (default: the bundled calibration.json)")
    p.add_argument("--out", help="write the JSON report here (e.g. docs/bench/calibration.json)")
    p.set_defaults(func=cmd_calibrate)
