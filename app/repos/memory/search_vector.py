"""Recall's vector leg: kNN within a scope, filtered inside the scan, by one of four paths chosen
by the scope's live row count (`app.repos.memory.search_sizes`):

- up to `FULL_SCAN_MAX` rows: every row's vector is compared with the query, exactly (a btree range
  scan plus a sort; fractions of a millisecond at 100 rows, and it can never miss);
- past that, an agent's scope (all its users or one, no other filter): its binary codes held in
  this process (`code_cache`: ~1 ms of numpy for 100,000 rows) give the `SHORTLIST` nearest, which
  one statement re-reads under the full filter, with the rows changed since the copy was read, and
  ranks with the full vectors (`CACHED_CODES`);
- other shapes (type, tag, metadata or freshness filters, `as_of` snapshots), up to `EXACT_SCAN_MAX`
  rows (or more in a large table, `code_scan_max`): every row is still
  compared, but over its 48-byte binary code
  (`embedding_bits`, migration 0033), read from an index that covers the scope's filter, so the scan
  never visits the table; the `SHORTLIST` nearest codes are then re-ranked with the full vectors.
  Reading 10,000 full vectors meant 10,000 heap pages (one row each, the scope's rows scattered over
  the table);
- larger ones: the HNSW index over live rows with pgvector's iterative scan, so filters apply
  during the graph walk and a scope's top-k stays full even when other agents' rows are nearer.
  The walk visits about `HNSW_OVERFETCH` / (the scope's share of the table) nodes, so it is cheap
  for a scope that is most of the table and dear for a few percent of it, where the code scan
  (cost in proportion to the scope's size) wins: `code_scan_max` puts the boundary where the two
  costs meet (`CODE_SCAN_COST_RATIO`, measured by `memwarden bench scale`).

`vector_search` also returns the scope's size and mean similarity to the query (recall's
answerability gate) and, in the full scan, the best scope-residual similarity of its hits: the full
scan gets them from the same statement (window aggregates, a centroid of up to CENTROID_SAMPLE
rows); larger scopes from their size and centroid (`ScopeSizes`).

The path is chosen from the size seen by the last scan of the scope in this process (no count
first), and the candidate queries return the rows themselves: round trips are what a recall costs
on a small scope.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pgvector import Vector
from sqlalchemy.orm import Session

from app.core import relevance
from app.db.vectors import vector_param
from app.repos.memory import code_cache, search_sizes, search_sql
from app.repos.memory.memories import Scope
from app.repos.memory.search_sql import ENTRY, QUERY, Shape, shape_and_params, where


def _array(vec: Sequence[float]) -> np.ndarray:
    return vec.to_numpy().astype(np.float64) if isinstance(vec, Vector) else np.asarray(vec, dtype=np.float64)


# The full scan's centroid (for recall's scope-residual similarity) averages at most this many of
# the scope's rows: exact for every scope of the calibration set (at most 143 rows).
CENTROID_SAMPLE = 256
# One node of a filtered HNSW walk (its neighbours' distances, a heap visit for the filter) costs
# about this many rows of the binary-code scan. `memwarden bench scale`'s every-path comparison
# (EXPLAIN medians, load 2-4, HNSW at 400, codes at 200): 60 on the 120,000-row table's 100,000-row
# agent (10.7 ms for ~480 nodes against 37 ms for its 100,000 codes), 19 on its 10,000-row agent,
# 38 on the 1M-row table's 50,000-row agent. The code scan serves a scope of `size` rows when
# size * size <= CODE_SCAN_COST_RATIO * HNSW_OVERFETCH * table rows (the two costs equal).
CODE_SCAN_COST_RATIO = 40.0
# The binary codes' nearest this many are re-ranked with the full vectors (a primary-key lookup
# each). On the bench's 10,000-row agent (`memwarden bench scale`, 30 questions): 0.970 of an exact
# scan's top 20 with 100, 0.995 with 200, 1.000 with 400, at 3.4, 3.5 and 4.1 ms.
SHORTLIST = 200
HNSW_MAX_SCAN_TUPLES = 200_000
# The HNSW path asks the iterative scan for this many of the scope's rows (at least), adds every copy
# in scope of their texts, and ranks them exactly: in `relaxed_order` the scan yields its batches
# only roughly nearest first, so the first n rows that pass the scope's filter were often not the
# scope's n nearest (0.67 of an exact scan's top 20 in a 5%-of-the-table scope, `memwarden bench
# scale`). On the bench's 100,000-row agent: 0.79 of the exact top 20 before, 0.87 with 200
# candidates, 0.90 with 200 and their copies, 0.97 with 400 and their copies.
HNSW_OVERFETCH = 400
# Past FULL_SCAN_MAX rows an agent's scope (with or without a user, no other filter) is shortlisted
# over its codes held in this process (`code_cache`) instead of by a statement; off, the code scan
# and HNSW statements serve every size as before (`memwarden bench scale` compares both).
CACHED_CODES = True


@dataclass(frozen=True)
class ScopeStats:
    """How the query relates to the scope as a whole: its row count (a lower bound past
    EXACT_SCAN_MAX) and the mean cosine similarity of the query to those rows; `exact`: every row's
    full vector was compared (the mean is then exact too)."""

    rows: int
    mean_similarity: float
    exact: bool
    residual_best: float | None = None
    """The best scope-residual similarity (`app.core.relevance`) among the hits; computed by the
    full scan (scopes up to FULL_SCAN_MAX rows), None on the larger paths."""


# --- the paths' SQL, built once per shape -------------------------------------------------------


@functools.cache
def _full_scan_sql(shape: Shape, fetch: bool, residual: bool = False) -> str:
    """Every row's distance, computed once per row in a fenced subquery (OFFSET 0), ranked exactly;
    the window aggregates see every row of the scope before the LIMIT. With `residual` (recall's
    gate; not screening's or review's neighbour searches), beside them, for the scope-residual
    similarity (`app.core.relevance`), the dot products of the query and of each hit with the
    scope's centroid and the centroid's squared norm; the centroid is the mean vector of the scope's
    first CENTROID_SAMPLE rows (all of them in a scope that small; averaging 2,000 vectors in SQL
    took 3 ms, carrying them through the window 4 ms more)."""
    ranked = ("SELECT s.id, s.distance, count(*) OVER () AS scope_rows, avg(s.distance) OVER () AS mean_distance "
              f"FROM (SELECT m.id, m.embedding <=> {QUERY} AS distance FROM memories m WHERE {where(shape)} "
              "AND m.embedding IS NOT NULL OFFSET 0) s ORDER BY s.distance, s.id LIMIT %(n)s")
    if not residual:
        if not fetch:
            return ranked
        return (f"SELECT {ENTRY}, r.distance, r.scope_rows, r.mean_distance FROM ({ranked}) r "
                "JOIN memories m ON m.tenant_id = %(tenant)s AND m.id = r.id ORDER BY r.distance, m.id")
    centroid = (f"SELECT avg(c.embedding) AS v FROM (SELECT m.embedding FROM memories m WHERE {where(shape)} "
                "AND m.embedding IS NOT NULL LIMIT %(centroid_sample)s) c")
    columns = (f"r.distance, r.scope_rows, r.mean_distance, -(m.embedding <#> c.v) AS centroid_dot, "
               f"-({QUERY} <#> c.v) AS query_centroid, -(c.v <#> c.v) AS centroid_norm2")
    if not fetch:
        return (f"SELECT r.id, {columns} FROM ({ranked}) r CROSS JOIN ({centroid}) c "
                "JOIN memories m ON m.tenant_id = %(tenant)s AND m.id = r.id ORDER BY r.distance, r.id")
    return (f"SELECT {ENTRY}, {columns} FROM ({ranked}) r CROSS JOIN ({centroid}) c "
            "JOIN memories m ON m.tenant_id = %(tenant)s AND m.id = r.id ORDER BY r.distance, m.id")


@functools.cache
def _code_scan_sql(shape: Shape, fetch: bool) -> str:
    """Every row's binary code compared with the query's (Hamming distance, from the covering index
    `memories_scope_bits`: no heap visit), the nearest SHORTLIST re-ranked with the full vectors."""
    columns = ENTRY if fetch else "m.id"
    return (f"WITH near AS MATERIALIZED (SELECT m.id FROM memories m WHERE {where(shape)} "
            f"AND m.embedding_bits IS NOT NULL ORDER BY m.embedding_bits <~> binary_quantize({QUERY}) "
            "LIMIT %(shortlist)s) "
            f"SELECT {columns}, m.embedding <=> {QUERY} AS distance FROM near "
            "JOIN memories m ON m.tenant_id = %(tenant)s AND m.id = near.id ORDER BY distance, m.id LIMIT %(n)s")


@functools.cache
def _cached_codes_sql(shape: Shape, fetch: bool) -> str:
    """The shortlist from the codes held in process (`%(ids)s`) and the scope's rows changed since
    they were read (`memories_scope_changed`, at most `%(changed_max)s`), re-read under the full
    filter and ranked with the full vectors; `changed_rows`: how many changed rows were found (at
    `changed_max` some may be missing, and the caller searches again without the cache)."""
    columns = ENTRY if fetch else "m.id"
    return ("WITH changed AS MATERIALIZED (SELECT m.id FROM memories m WHERE m.tenant_id = %(tenant)s "
            "AND m.agent_id = %(agent)s AND m.status = 'live' AND m.search_changed_at > %(since)s "
            "LIMIT %(changed_max)s), "
            "pool AS (SELECT unnest(%(ids)s::text[]) AS id UNION SELECT id FROM changed) "
            f"SELECT {columns}, m.embedding <=> {QUERY} AS distance, (SELECT count(*) FROM changed) AS changed_rows "
            f"FROM pool JOIN memories m ON m.tenant_id = %(tenant)s AND m.id = pool.id WHERE {where(shape)} "
            "AND m.embedding IS NOT NULL ORDER BY distance, m.id LIMIT %(n)s")


@functools.cache
def _hnsw_sql(shape: Shape, fetch: bool) -> str:
    """The iterative scan's candidates plus every in-scope copy of their texts, ranked exactly.

    Identical texts have identical vectors, which an HNSW graph links poorly (its neighbour lists
    keep one of a set of equal points), so the walk reaches a few copies of a repeated fact and
    misses the rest of an exact top n. One probe of `memories_scope_content` (migration 0032) per
    distinct text (LATERAL, so never a walk of the scope); n copies of one text are as many as the
    top n can hold."""
    scoped = where(shape)
    pooled = (f"WITH candidates AS (SELECT m.id, m.embedding <=> {QUERY} AS distance, md5(m.content) AS content_key "
              f"FROM memories m WHERE {scoped} AND m.embedding IS NOT NULL ORDER BY m.embedding <=> {QUERY} "
              "LIMIT %(overfetch)s), "
              "pooled AS (SELECT id, distance FROM candidates UNION "
              "SELECT c.id, c.distance FROM (SELECT DISTINCT content_key FROM candidates) k CROSS JOIN LATERAL "
              f"(SELECT m.id, m.embedding <=> {QUERY} AS distance FROM memories m WHERE {scoped} "
              "AND m.embedding IS NOT NULL AND md5(m.content) = k.content_key LIMIT %(n)s) c), "
              "ranked AS (SELECT id, distance FROM pooled ORDER BY distance, id LIMIT %(n)s) ")
    if not fetch:
        return pooled + "SELECT id, distance FROM ranked ORDER BY distance, id"
    return (pooled + f"SELECT {ENTRY}, r.distance FROM ranked r JOIN memories m ON m.tenant_id = %(tenant)s "
            "AND m.id = r.id ORDER BY r.distance, m.id")


# --- where the code scan ends ---------------------------------------------------------------------

_table_rows: list[float] = [0.0, -1e9]  # (live-or-not rows of `memories` as last estimated, when)


def code_scan_max(session: Session) -> int:
    """The largest scope the binary-code scan serves: EXACT_SCAN_MAX, or where the code scan and a
    filtered HNSW walk cost the same in a table of this size (its row estimate, read at most every
    LARGE_SCOPE_RECOUNT_S)."""
    if time.monotonic() - _table_rows[1] > search_sizes.LARGE_SCOPE_RECOUNT_S:
        estimate = search_sql.execute(session, "SELECT reltuples FROM pg_class WHERE oid = 'memories'::regclass",
                                      {}).scalar()
        _table_rows[:] = [max(float(estimate or 0.0), 0.0), time.monotonic()]
    return code_scan_limit(_table_rows[0])


def code_scan_limit(table_rows: float) -> int:
    """`code_scan_max` for a table of `table_rows` rows."""
    return max(search_sizes.EXACT_SCAN_MAX, math.isqrt(int(CODE_SCAN_COST_RATIO * HNSW_OVERFETCH * table_rows)))


# --- vector search ------------------------------------------------------------------------------


@dataclass
class VectorResult:
    hits: list[tuple[str, float]]
    """(id, cosine distance), nearest first."""
    stats: ScopeStats
    rows: dict[str, Any] = field(default_factory=dict)
    """The hits' rows (`ENTRY` columns), when asked for with `fetch=True`."""
    pool: list[str] = field(default_factory=list)
    """The ids the hits were ranked from (the codes' shortlist in a large scope), for the keyword
    leg's one-word rows there."""


def vector_search(session: Session, scope: Scope, filters: dict[str, Any], query_vec: Sequence[float], n: int,
                  *, fetch: bool = False, residual: bool = False) -> VectorResult:
    """Up to `n` nearest live memories in scope with the scope's stats (and, with `fetch`, the rows;
    with `residual`, the hits' best scope-residual similarity where the full scan serves the scope)."""
    shape, params = shape_and_params(scope, filters)
    params.update(q=vector_param(query_vec), n=n)
    key = search_sizes.ScopeSizes.key(scope, filters)
    size = search_sizes.scope_sizes.get(key)
    centroid = search_sizes.scope_sizes.centroid(key)
    cached = cached_codes_serve(shape)
    if size is None and scope.as_of is None:
        # Past FULL_SCAN_MAX the codes held in process serve this shape whatever the size, and
        # their copy counts the scope: no need to count further (~1 ms per 10,000 rows).
        cap = search_sizes.FULL_SCAN_MAX if cached else code_scan_max(session)
        size = search_sizes.scope_size_at_most(session, scope, filters, cap + 1)
    if size is None or size <= min(search_sizes.FULL_SCAN_MAX, search_sizes.EXACT_SCAN_MAX):  # `as_of` snapshots too
        return full_scan_result(search_sql.execute(session, *full_scan_statement(shape, params, fetch, residual)),
                                 key, fetch, residual)
    if centroid is None:  # a scope counted just now (or grown past FULL_SCAN_MAX): its sample's mean
        centroid = search_sizes.scope_centroid(session, shape, params)
        search_sizes.scope_sizes.put(key, size, centroid)
    rows, pool = (_cached_codes_search(session, scope, shape, params, query_vec, n, fetch) if cached else None), None
    if rows is not None:
        pool = rows.pool
        if rows.scope_rows != size:  # the copy's count (a probe stops at FULL_SCAN_MAX + 1)
            size = rows.scope_rows
            search_sizes.scope_sizes.put(key, size, centroid)
    else:
        largest_code_scan = (code_scan_max(session) if size > search_sizes.EXACT_SCAN_MAX or cached
                             else search_sizes.EXACT_SCAN_MAX)
        if cached:  # counted only to FULL_SCAN_MAX + 1 above, or by the copy
            size = search_sizes.scope_size_at_most(session, scope, filters, largest_code_scan + 1)
        if size <= largest_code_scan:
            rows = search_sql.execute(session, _code_scan_sql(shape, fetch),
                                      {**params, "shortlist": max(n, SHORTLIST)}).all()
        else:
            overfetch = max(n, HNSW_OVERFETCH)
            with _filtered_hnsw_scan(session, ef_search=max(40, min(1000, overfetch))):
                rows = search_sql.execute(session, _hnsw_sql(shape, fetch), {**params, "overfetch": overfetch}).all()
    # Unit vectors (every embedder's are): the mean cosine to the query is its dot product with their mean.
    mean = float(np.dot(centroid, _array(query_vec))) if centroid is not None else 0.0
    hits = [(r.id, float(r.distance)) for r in rows]
    return VectorResult(hits, ScopeStats(size, mean, False), {r.id: r for r in rows} if fetch else {},
                        pool if pool is not None else [i for i, _ in hits])


def full_scan_statement(shape: Shape, params: dict[str, Any], fetch: bool, residual: bool
                         ) -> tuple[str, dict[str, Any]]:
    """The full scan's text and parameters (`params`: the scope's, the query vector and n)."""
    return _full_scan_sql(shape, fetch, residual), ({**params, "centroid_sample": CENTROID_SAMPLE} if residual
                                                    else params)


def full_scan_result(rows: list[Any], key: tuple | None, fetch: bool, residual: bool) -> VectorResult:
    """The full scan's rows as a `VectorResult`; the scope's size noted for the next recall."""
    search_sizes.scope_sizes.put(key, int(rows[0].scope_rows) if rows else 0)
    if not rows:
        return VectorResult([], ScopeStats(0, 0.0, True))
    mean = 1.0 - float(rows[0].mean_distance)
    best_residual = max(relevance.residual_similarity(1.0 - float(r.distance), float(r.query_centroid),
                                                      float(r.centroid_dot), float(r.centroid_norm2))
                        for r in rows) if residual else None
    return VectorResult([(r.id, float(r.distance)) for r in rows],
                        ScopeStats(int(rows[0].scope_rows), mean, True, best_residual),
                        {r.id: r for r in rows} if fetch else {}, [r.id for r in rows])


# --- codes held in process -------------------------------------------------------------------------


class _Shortlisted(list):
    """Rows of the cached-codes statement, with the shortlist they were ranked from and the number
    of the scope's rows in the copy."""

    pool: list[str]
    scope_rows: int


def cached_codes_serve(shape: Shape) -> bool:
    """Whether the codes held in process can serve this shape: an agent's live scope, of one user
    or all, with no other filter (the copy knows each row's user, not its type, tags or expiry)."""
    return (CACHED_CODES and shape.agent and not (shape.as_of or shape.types or shape.tags or shape.metadata
                                                   or shape.fresher))


def _cached_codes_search(session: Session, scope: Scope, shape: Shape, params: dict[str, Any],
                         query_vec: Sequence[float], n: int, fetch: bool) -> _Shortlisted | None:
    """The scope's nearest n from the codes held in process (`code_cache`), re-ranked exactly with the
    rows changed since the copy was read; None when the copy cannot answer (shape, size, or too
    many changes: the copy is then read again next time) and a statement must."""
    if not cached_codes_serve(shape):
        return None
    codes = code_cache.cache.get(session, scope.tenant_id, scope.agent_id)
    if codes is None:
        return None
    shortlist = codes.nearest(_array(query_vec), max(n, SHORTLIST), scope.user_id)
    found = search_sql.execute(session, _cached_codes_sql(shape, fetch), {
        **params, "ids": shortlist, "since": codes.since, "changed_max": code_cache.CHANGED_MAX}).all()
    changed = int(found[0].changed_rows) if found else None
    if changed is None or changed >= code_cache.CHANGED_MAX:
        codes.stale = changed is not None  # read the copy again; an empty answer is checked by a statement
        return None
    rows = _Shortlisted(found)
    rows.pool, rows.scope_rows = shortlist, codes.rows_of(scope.user_id)
    return rows


VECTOR_PATHS = ("full scan", "binary codes", "HNSW", "cached codes")


def run_vector_path(session: Session, scope: Scope, filters: dict[str, Any], query_vec: Sequence[float], n: int,
                    path: str, *, shortlist: int = SHORTLIST, overfetch: int = HNSW_OVERFETCH,
                    explain: bool = False) -> list[Any]:
    """One vector path's statement for this scope and query, whichever path its size picks: its rows
    (id, distance, …), or with `explain` its EXPLAIN (ANALYZE, BUFFERS) lines. For `memwarden bench
    scale`, which compares the paths and their settings on the same scope. "cached codes": the
    shortlist is taken in process first (its time the first line under `explain`: "Shortlist in
    process: … ms"), then the statement re-ranks it."""
    shape, params = shape_and_params(scope, filters)
    params.update(q=vector_param(query_vec), n=n, shortlist=max(n, shortlist), overfetch=max(n, overfetch))
    head: list[str] = []
    if path == "cached codes":
        codes = code_cache.cache.get(session, scope.tenant_id, scope.agent_id)
        started = time.perf_counter()
        params["ids"] = codes.nearest(_array(query_vec), params["shortlist"], scope.user_id)
        head = [f"Shortlist in process: {(time.perf_counter() - started) * 1000:.3f} ms"]
        params.update(since=codes.since, changed_max=code_cache.CHANGED_MAX)
    sql = {"full scan": _full_scan_sql, "binary codes": _code_scan_sql, "HNSW": _hnsw_sql,
           "cached codes": _cached_codes_sql}[path](shape, True)
    scan = (_filtered_hnsw_scan(session, ef_search=max(40, min(1000, params["overfetch"]))) if path == "HNSW"
            else contextlib.nullcontext())
    with scan:
        if explain:
            return head + list(search_sql.execute(session, "EXPLAIN (ANALYZE, BUFFERS) " + sql, params).scalars())
        return search_sql.execute(session, sql, params).all()


@contextlib.contextmanager
def _filtered_hnsw_scan(session: Session, *, ef_search: int) -> Iterator[None]:
    """pgvector's iterative scan in force for the statements inside, so the scope's filter applies
    during the graph walk and a scope's top n stays full.

    `SET LOCAL` lasts until its transaction ends, and recall reads in autocommit, where every
    statement is a transaction of its own (a `set_config(…, true)` there was undone before the
    next statement, and a 50,000-row agent among 1M rows got 0-20 of its 20 candidates). On an
    autocommit connection this opens a transaction in the same round trip and commits it after."""
    conn = session.connection()
    own = bool(conn.connection.dbapi_connection.autocommit)
    settings = (f"SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = {int(ef_search)}; "
                f"SET LOCAL hnsw.max_scan_tuples = {HNSW_MAX_SCAN_TUPLES}")
    conn.exec_driver_sql(("BEGIN; " if own else "") + settings)
    try:
        yield
    except BaseException:
        if own:
            with contextlib.suppress(Exception):
                conn.exec_driver_sql("ROLLBACK")
        raise
    if own:
        conn.exec_driver_sql("COMMIT")

