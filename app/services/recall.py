"""Hybrid recall: vector kNN + full-text, fused (RRF k=60 by default), behind a relevance floor.

The floor is on cosine similarity between the query and each hit (`min_score`): a no-match
query comes back empty instead of returning the k least-bad memories. Its default was
calibrated on Memwarden's own labelled set (`memwarden bench calibrate`, docs/benchmarks.md),
not on any benchmark corpus.
"""

from __future__ import annotations

import time
from typing import Any

from app.core import fusion
from app.core.access import Principal
from app.repos import memories as repo
from app.repos import search
from app.repos.memories import Scope
from app.services.context import AppContext
from app.services.memories import _as_of, entry_json, require_agent

DEFAULT_MIN_SCORE = 0.30
RRF_K = 60
WEIGHTS = (0.7, 0.3)  # vector, keyword — for fusion="weighted"


def recall(ctx: AppContext, principal: Principal, body: dict[str, Any]) -> dict[str, Any]:
    """Top-k live memories of one agent (optionally one user) for a query."""
    started = time.perf_counter()
    require_agent(principal, body["agent_id"])
    scope = Scope(principal.tenant_id, body["agent_id"], body.get("user_id"), _as_of(body))
    k = body.get("k", 5)
    min_score = body.get("min_score", DEFAULT_MIN_SCORE)
    method = body.get("fusion", "rrf")
    filters = {"types": body.get("types"), "tags": body.get("tags"), "metadata": body.get("filter"),
               "fresher_than_days": body.get("fresher_than_days")}
    query_vec = ctx.embedder.embed([body["query"]])[0].tolist()
    pool = max(2 * k, 20)

    with ctx.db.sessions.begin() as session:
        vector = search.vector_candidates(session, scope, filters, query_vec, pool)
        keyword = search.keyword_candidates(session, scope, filters, body["query"], pool)
        fused = _fuse(method, vector, keyword)
        rows = search.fetch_with_similarity(session, list(fused), query_vec)
        hits = []
        for memory, similarity in rows:
            if similarity < min_score:
                continue
            hits.append((fused[memory.id] * memory.score_multiplier, similarity, memory))
        hits.sort(key=lambda h: (-h[0], -h[1], h[2].id))
        hits = hits[:k]
        if scope.as_of is None:
            repo.record_recall(session, ids=[m.id for _, _, m in hits])
    return {
        "hits": [{**entry_json(m), "score": round(score, 6), "similarity": round(sim, 6)} for score, sim, m in hits],
        "fusion": method,
        "latency_ms": round((time.perf_counter() - started) * 1000, 3),
    }


def _fuse(method: str, vector: list[tuple[str, float]], keyword: list[tuple[str, float]]) -> dict[str, float]:
    if method == "rrf":
        return fusion.rrf([[i for i, _ in vector], [i for i, _ in keyword]], k=RRF_K)
    vector_scores = {i: 1.0 - d for i, d in vector}
    top = max((r for _, r in keyword), default=0.0)
    keyword_scores = {i: r / top for i, r in keyword} if top > 0 else {}
    if method == "max":
        return fusion.max_fusion([vector_scores, keyword_scores])
    return fusion.weighted([vector_scores, keyword_scores], WEIGHTS)
