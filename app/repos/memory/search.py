"""Candidate retrieval for recall, screening's and review's neighbours: the vector leg
(`app.repos.memory.search_vector`: kNN by a path chosen from the scope's size, `app.repos.memory.search_sizes`)
and the keyword leg (`app.repos.memory.search_keyword`: full-text), both filtered inside the scan, over
statements built once per shape (`app.repos.memory.search_sql`).

Round trips are what a recall costs on a small scope: where the full scan serves the scope, both
legs' statements go out in one pipeline (`recall_candidates`), and the candidate queries return the
rows themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, undefer

from app.db import prepared
from app.db.models import Memory
from app.db.vectors import vector_param
from app.repos.memory import search_keyword, search_sizes, search_vector
from app.repos.memory.memories import Scope
from app.repos.memory.search_sql import shape_and_params


def vector_candidates(session: Session, scope: Scope, filters: dict[str, Any], query_vec: Sequence[float],
                      n: int) -> list[tuple[str, float]]:
    """Up to `n` (id, cosine distance) nearest to `query_vec` within scope, nearest first."""
    return search_vector.vector_search(session, scope, filters, query_vec, n).hits


def vector_candidates_with_stats(session: Session, scope: Scope, filters: dict[str, Any],
                                 query_vec: Sequence[float], n: int
                                 ) -> tuple[list[tuple[str, float]], search_vector.ScopeStats]:
    """`vector_candidates`, plus the scope's size and mean similarity to the query."""
    found = search_vector.vector_search(session, scope, filters, query_vec, n)
    return found.hits, found.stats


def keyword_candidates(session: Session, scope: Scope, filters: dict[str, Any], query: str,
                       n: int, query_vec: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Up to `n` (id, ts_rank_cd) whose text shares any stemmed word with `query`, best first.

    Equal ranks are common (every memory of "alice" matches the word "alice" once); with
    `query_vec` they are ordered by vector distance, otherwise by id, never by physical row order
    (which every UPDATE changes, so RRF would otherwise see a different keyword list each time)."""
    return search_keyword.keyword_search(session, scope, filters, query, n, query_vec).hits


def recall_candidates(session: Session, scope: Scope, filters: dict[str, Any], query_vec: Sequence[float],
                      query: str, n: int, *, residual: bool
                      ) -> tuple[search_vector.VectorResult, search_keyword.KeywordResult]:
    """Recall's two legs: `vector_search` (with the rows) and `keyword_search` (with the rows and
    their distances to `query_vec`).

    Where the full scan serves the scope (an `as_of` snapshot, or a scope this process last counted
    at most min(FULL_SCAN_MAX, EXACT_SCAN_MAX) rows) the keyword statement needs nothing from the
    vector leg's answer, so both statements go out in one pipeline: one round trip instead of two.
    Otherwise (a scope not counted yet, or large: the keyword leg then uses the vector leg's
    shortlist) one after the other."""
    key = search_sizes.ScopeSizes.key(scope, filters)
    size = search_sizes.scope_sizes.get(key)
    small = (size <= min(search_sizes.FULL_SCAN_MAX, search_sizes.EXACT_SCAN_MAX) if size is not None
             else scope.as_of is not None)
    if small and query.strip():
        shape, params = shape_and_params(scope, filters)
        params.update(q=vector_param(query_vec), n=n)
        words = {**params, "text": query}
        vector_sql, vector_params = search_vector.full_scan_statement(shape, params, True, residual)
        vector_rows, keyword_rows = prepared.fetch_rows_together(session.connection(), [
            (prepared.Statement(vector_sql), vector_params),
            (prepared.Statement(search_keyword.keyword_sql(shape, True, True)), words)])
        return (search_vector.full_scan_result(vector_rows, key, True, residual),
                search_keyword.keyword_result(keyword_rows, True))
    vector = search_vector.vector_search(session, scope, filters, query_vec, n, fetch=True, residual=residual)
    # Equal keyword ranks are ordered by vector distance in exactly-scanned scopes (cheap
    # there); past EXACT_SCAN_MAX a common word can match tens of thousands of rows, so by id,
    # and the rows holding only one of the query's words come from the vector leg's shortlist.
    keyword = search_keyword.keyword_search(session, scope, filters, query, n,
                                            query_vec if vector.stats.exact else None, fetch=query_vec,
                                            large=not vector.stats.exact, among=vector.pool,
                                            scope_rows=vector.stats.rows)
    return vector, keyword


def fetch_with_similarity(session: Session, tenant_id: str, ids: Sequence[str],
                          query_vec: Sequence[float], *, vectors: bool = False) -> list[tuple[Memory, float]]:
    """The tenant's rows for `ids` with their cosine similarity to the query; with `vectors`, the
    rows' (deferred) embeddings are loaded in the same statement."""
    if not ids:
        return []
    similarity = (1 - Memory.embedding.cosine_distance(query_vec)).label("similarity")
    statement = select(Memory, similarity).where(Memory.tenant_id == tenant_id, Memory.id.in_(list(ids)))
    if vectors:
        statement = statement.options(undefer(Memory.embedding))
    rows = session.execute(statement).all()
    return [(r[0], float(r[1]) if r[1] is not None else 0.0) for r in rows]
