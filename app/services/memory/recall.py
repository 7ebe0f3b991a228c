"""Hybrid recall: vector kNN + full-text, fused (RRF k=60 by default), behind a relevance floor.

Relevance, so that a no-match query comes back empty instead of returning the k least-bad memories:

- Per hit, a floor on cosine similarity between the query and the memory (`min_score`).
- Per query, by default, an answerability gate: the best similarity in scope must stand out from
  the scope as a whole, `lift = best - LIFT_BETA * mean * n / (n + LIFT_PRIOR_ROWS)
  + RESIDUAL_WEIGHT * residual >= DEFAULT_MIN_LIFT`, where `mean` is the query's mean similarity to
  the scope's `n` memories. What every memory in scope shares with the query (typically the
  person's name: "What is Priya's blood type?" is 0.42 similar to "Priya works night shifts as an
  ICU nurse") raises the mean along with the best hit, so subtracting part of the mean discounts
  it; the prior rows (similarity 0) keep a small scope from gating itself out. `residual` is the
  best *scope-residual similarity* among the hits (`app.core.relevance`): the cosine of query and
  memory once the scope's centroid is taken from both, which keeps the topic and drops the shared
  name ("what pets does Desmond keep?" and "Desmond breeds koi carp…" share no word and stand out
  little by cosine, but their residuals agree). The search computes it in scopes of up to
  FULL_SCAN_MAX rows; there and in scopes under RESIDUAL_MIN_ROWS the gate is the lift alone
  (`PLAIN_*`, calibration's rule 3).
- The generic path through the gate: a question that shares nothing with the scope ("what does
  the user eat?" over "Ada is vegetarian…" and Ada's other facts: shrunk mean under
  GENERIC_MAX_MEAN) passes when its best similarity is GENERIC_MIN_GAP above that mean (0.30
  against 0.05 here). One straight line in (best, mean) cannot serve both kinds of question: low
  enough for generic questions (best 0.2-0.5), it lets through questions naming a person whose
  answer is not stored (best 0.45-0.6, but mean 0.25-0.45).
- Keyword evidence passes the gate whatever the lift: a memory in scope (among the keyword
  candidates) holds every word of the query (a full-text AND match). Without it a scope where every
  memory is about the query's topic ("where are the spare fuses?" over twelve facts "Fact i: the
  i-th shelf holds spare fuses", lift 0.01) was gated out entirely: nothing stands out of it.

A request that sets `min_score` gets exactly that cosine floor and no gate (`min_score: -1` returns
the top k whatever they are).

Calibration (`python -m dev.bench calibrate`, method and numbers in docs/benchmarks/): the defaults
were fitted on Memwarden's own labelled set (`app/bench/data/calibration.json`, v3: 143 facts in 18
scopes, 123 labelled queries, 59 no-match probes, including generic "the user" questions, two
same-topic scopes and four people asked about by category), never on a benchmark corpus. For every
query the real embedder gives the gold memories' similarities, the best similarity, the scope mean,
and whether a fact holds every query word; an exhaustive search over the thresholds maximises
queries handled (labelled: passes the gate and every gold memory clears the floor; probe: comes back
empty), scoring each threshold over its +/-0.02 neighbourhood. Leave-one-scope-out cross-validation
on v3: 154/182 handled with the residual gate and the generic path, 147/182 with the lift gate and
the generic path, 137/182 with the lift gate alone, 119/182 with a cosine floor alone.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.core import fusion
from app.core.access import Principal
from app.core.timefmt import utcnow
from app.db.vectors import SqlVector
from app.errors import ReadBudgetExceeded
from app.observability import metrics
from app.repos.memory import memories as repo
from app.repos.memory import search, search_keyword, search_vector
from app.repos.memory.memories import Scope
from app.services.router import backends
from app.services.memory import early_embedding, recall_tracking
from app.services.audit import state_check, read_budgets
from app.services.runtime.context import AppContext
from app.services.memory.memories import _as_of, entry_json, require_agent

# Calibrated by `python -m dev.bench calibrate` (see the module docstring); keep in step with it.
DEFAULT_MIN_SCORE = 0.19
DEFAULT_MIN_LIFT = 0.595
LIFT_BETA = 0.3
LIFT_PRIOR_ROWS = 2.0
GENERIC_MAX_MEAN = 0.10
GENERIC_MIN_GAP = 0.095
RESIDUAL_WEIGHT = 1.0
# Past FULL_SCAN_MAX rows the search gives no residual similarity, and in a scope of fewer than
# RESIDUAL_MIN_ROWS memories the centroid is mostly the memories themselves (one memory: no residual
# at all; the calibration set's smallest scope has 6): there the gate is the lift alone, with the
# values calibrate fits for that rule (its "floor+gate+generic").
RESIDUAL_MIN_ROWS = 6
PLAIN_MIN_LIFT = 0.36
PLAIN_LIFT_BETA = 0.5
PLAIN_GENERIC_MAX_MEAN = 0.15
PLAIN_GENERIC_MIN_GAP = 0.085
RRF_K = 60
WEIGHTS = (0.7, 0.3)  # vector, keyword — for fusion="weighted"


@metrics.times_recall
def recall(ctx: AppContext, principal: Principal, body: dict[str, Any], *,
           early: early_embedding.Early | None = None) -> dict[str, Any]:
    """Top-k live memories of one agent (optionally one user) for a query.

    A read of at most three statements (the scope's size once per process, the vector and the
    keyword candidates, each with its rows), in autocommit: no BEGIN, no COMMIT. Recall counts are
    noted for `recall_tracking`, which writes them in batches."""
    started = time.perf_counter()
    require_agent(principal, body["agent_id"])
    scope = Scope(principal.tenant_id, body["agent_id"], body.get("user_id"), _as_of(body))
    k = body.get("k", 5)
    gated = body.get("min_score") is None
    min_score = DEFAULT_MIN_SCORE if gated else body["min_score"]
    method = body.get("fusion", "rrf")
    filters = {"types": body.get("types"), "tags": body.get("tags"), "metadata": body.get("filter"),
               "fresher_than_days": body.get("fresher_than_days")}
    query_vec = SqlVector(early_embedding.embed(ctx, body["query"], early))  # maybe started before auth
    pool = max(2 * k, 20)
    # The run a recall serves is recorded beside the read, not in what it asked: the same question in
    # two runs digests the same.
    run_id = body.get("run_id")
    asked = {name: value for name, value in body.items() if name != "run_id"} if run_id is not None else body

    with ctx.db.stale_reader(principal.tenant_id, principal.key_id) as conn, \
            Session(bind=conn, expire_on_commit=False) as session:
        # One round trip for both legs where the scope is small enough to scan exactly, else two.
        vector, keyword = search.recall_candidates(session, scope, filters, query_vec, body["query"], pool,
                                                   residual=gated)
        if gated and not (keyword.full_match or answerable(vector.hits, vector.stats)):
            vector.hits, keyword = [], search_keyword.KeywordResult([])  # nothing in scope answers it
        fused = _fuse(method, vector.hits, keyword.hits)
        distances = {**keyword.distances, **dict(vector.hits)}
        rows = {**keyword.rows, **vector.rows}
        hits = []
        for memory_id, fused_score in fused.items():
            similarity = 1.0 - distances[memory_id]
            if similarity < min_score:
                continue
            memory = rows[memory_id]
            hits.append((fused_score * memory.score_multiplier, similarity, memory))
        hits.sort(key=lambda h: (-h[0], -h[1], h[2].id))
        hits = hits[:k]
        supporting: dict[str, list[str]] | None = None
        if body.get("hops"):
            hits, supporting = _graph_boost(session, principal.tenant_id, hits, body["hops"])
        mismatched = state_check.served_mismatches(ctx, session, principal.tenant_id, [m.id for _, _, m in hits])
        if scope.as_of is None and hits and not mismatched:
            _track(ctx, session, principal.tenant_id, [m.id for _, _, m in hits])
        session.commit()  # sends nothing in autocommit; keeps an outer transaction's write
        routed = backends.routed_backends(ctx, principal, body["agent_id"]) if scope.as_of is None else []
        # Without memory backends and replicas, the budget is taken on the read's own connection
        # (the primary's, in autocommit): one pool checkout fewer. A refusal leaves the block
        # normally, so a bound test transaction keeps the refusal's audit entry.
        accounted, refused = not routed and not mismatched and ctx.db.replicas is None, None
        if accounted:
            try:
                read_budgets.account(ctx, principal, operation="recall", agent_id=body["agent_id"],
                                     memory_ids=[m.id for _, _, m in hits], query=asked, conn=conn,
                                     run_id=run_id)
            except ReadBudgetExceeded as exc:
                refused = exc
    if refused is not None:
        raise refused
    state_check.refuse_mismatched(ctx, principal.tenant_id, mismatched)
    out = []
    for score, sim, memory in hits:
        out.append({**entry_json(memory), "score": round(score, 6), "similarity": round(sim, 6)})
        if supporting is not None:  # asked for hops: which hits' links boosted this one
            out[-1]["supporting"] = supporting.get(memory.id, [])
    result = {
        "hits": out,
        "fusion": method,
        "latency_ms": round((time.perf_counter() - started) * 1000, 3),
    }
    if routed:
        result = backends.fused_recall(ctx, principal, body, result, routed)
    # Accounted once what is returned is known: with memory backends, fusion may bring memories
    # the built-in store's own top k did not hold.
    if not accounted:
        read_budgets.account(ctx, principal, operation="recall", agent_id=body["agent_id"],
                             memory_ids=[h["id"] for h in result["hits"]], query=asked, run_id=run_id)
    return result


def _graph_boost(session: Session, tenant_id: str, hits: list, hops: int) -> tuple[list, dict[str, list[str]]]:
    """memorywire's graph hops: hits linked to other hits of this result set by merge or supersede
    links (walked both ways, through rows outside the result set, up to `hops` links) are boosted
    and re-ranked; nothing outside the result set is added. Ended rows are never live, so present-time
    hits are rarely linked; `as_of` recalls, which show rows since merged or superseded, are."""
    ids = [m.id for _, _, m in hits]
    edges: list[tuple[str, str]] = []
    frontier, seen = set(ids), set(ids)
    for _ in range(hops):
        found = repo.links_touching(session, tenant_id=tenant_id, ids=sorted(frontier))
        edges += found
        frontier = {end for edge in found for end in edge} - seen
        seen |= frontier
        if not frontier:
            break
    boosted, supporting = fusion.graph_boost({m.id: score for score, _, m in hits}, edges, hops)
    hits = [(boosted[m.id], similarity, m) for _, similarity, m in hits]
    hits.sort(key=lambda h: (-h[0], -h[1], h[2].id))
    return hits, supporting


def _track(ctx: AppContext, session: Session, tenant_id: str, ids: list[str]) -> None:
    """Count the hits as recalled: batched off the request (see `recall_tracking`); inside an
    outer transaction (a unit of work, the tests' rolled-back one) written in it, so they share its fate."""
    if isinstance(ctx.db.sessions.kw.get("bind"), Connection):
        repo.record_recall(session, tenant_id=tenant_id, ids=ids)
    else:
        recall_tracking.tracker(ctx.db.engine).note(tenant_id, ids, utcnow())


def _shrunk_mean(stats: search_vector.ScopeStats) -> float:
    """The scope's mean similarity to the query, pulled towards 0 by the prior rows."""
    return stats.mean_similarity * stats.rows / (stats.rows + LIFT_PRIOR_ROWS)


def _plain(stats: search_vector.ScopeStats) -> bool:
    """No residual similarity for this scope (large, or too small for a centroid): lift alone."""
    return stats.residual_best is None or stats.rows < RESIDUAL_MIN_ROWS


def lift(best_similarity: float, stats: search_vector.ScopeStats) -> float:
    """How far the best memory stands out from the scope's average one, plus (where the search
    gives it) the best scope-residual similarity (see the module docstring)."""
    if _plain(stats):
        return best_similarity - PLAIN_LIFT_BETA * _shrunk_mean(stats)
    return best_similarity - LIFT_BETA * _shrunk_mean(stats) + RESIDUAL_WEIGHT * stats.residual_best


def answerable(vector: list[tuple[str, float]], stats: search_vector.ScopeStats) -> bool:
    """The default gate: does anything in scope answer the query at all? (Keyword evidence, the
    other way through, is checked by the caller.)"""
    if not vector:
        return False
    best = 1.0 - vector[0][1]
    plain = _plain(stats)
    if lift(best, stats) >= (PLAIN_MIN_LIFT if plain else DEFAULT_MIN_LIFT):
        return True
    mean = _shrunk_mean(stats)  # the generic path: a question sharing nothing with the scope
    if plain:
        return mean < PLAIN_GENERIC_MAX_MEAN and best - mean >= PLAIN_GENERIC_MIN_GAP
    return mean < GENERIC_MAX_MEAN and best - mean >= GENERIC_MIN_GAP


def _fuse(method: str, vector: list[tuple[str, float]], keyword: list[tuple[str, float]]) -> dict[str, float]:
    if method == "rrf":
        return fusion.rrf([[i for i, _ in vector], [i for i, _ in keyword]], k=RRF_K)
    vector_scores = {i: 1.0 - d for i, d in vector}
    top = max((r for _, r in keyword), default=0.0)
    keyword_scores = {i: r / top for i, r in keyword} if top > 0 else {}
    if method == "max":
        return fusion.max_fusion([vector_scores, keyword_scores])
    return fusion.weighted([vector_scores, keyword_scores], WEIGHTS)
