"""Candidate retrieval for recall: vector kNN and full-text, both filtered inside the scan.

The vector paths, by the scope's live row count:

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
rows); larger scopes from their size and centroid (the mean of unit vectors' cosines to the query is the query's dot
product with their mean vector), counted and averaged over a sample at most every
`LARGE_SCOPE_RECOUNT_S` per process (`ScopeSizes`).

The keyword leg in a scope past FULL_SCAN_MAX ranks the rows holding three, else two, of the
query's words (`keyword_search`); when they do not fill the n, the rest come from the vector
shortlist, and sets made only of words common in the scope (`WordCounts`) are not looked up.

Every statement is SQL text built once per shape (which of user, `as_of` and the filters a request
sets) and executed with bound parameters: building SQLAlchemy expressions and compiling them for
each request cost more CPU than the queries themselves on a small scope. Round trips are what a
recall costs on a small scope, so the path is chosen from the size seen by the last scan of the
scope in this process (no count first), and the candidate queries return the rows themselves.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pgvector import Vector
from psycopg.types.json import Jsonb
from sqlalchemy import select
from sqlalchemy.orm import Session, undefer

from app.core import relevance
from app.db import prepared
from app.db.models import Memory
from app.db.vectors import SqlVector, VectorParam, vector_param  # noqa: F401 — SqlVector: services bind it
from app.repos import code_cache
from app.repos.memories import ONCE_LIVE, Scope


def _array(vec: Sequence[float]) -> np.ndarray:
    return vec.to_numpy().astype(np.float64) if isinstance(vec, Vector) else np.asarray(vec, dtype=np.float64)


FULL_SCAN_MAX = 2_000
# The full scan's centroid (for recall's scope-residual similarity) averages at most this many of
# the scope's rows: exact for every scope of the calibration set (at most 143 rows).
CENTROID_SAMPLE = 256
EXACT_SCAN_MAX = 20_000
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
STATS_SAMPLE = 2_000
# The HNSW path asks the iterative scan for this many of the scope's rows (at least), adds every copy
# in scope of their texts, and ranks them exactly: in `relaxed_order` the scan yields its batches
# only roughly nearest first, so the first n rows that pass the scope's filter were often not the
# scope's n nearest (0.67 of an exact scan's top 20 in a 5%-of-the-table scope, `memwarden bench
# scale`). On the bench's 100,000-row agent: 0.79 of the exact top 20 before, 0.87 with 200
# candidates, 0.90 with 200 and their copies, 0.97 with 400 and their copies.
HNSW_OVERFETCH = 400
# A large scope's size (and centroid) is counted again at most this often: it only picks the path
# and estimates the scope mean, and counting a 20,000-row prefix of the scope index cost more than
# the search itself.
LARGE_SCOPE_RECOUNT_S = 30.0
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


# --- SQL, built once per shape ------------------------------------------------------------------

# The contract's Entry columns (plus the score multiplier), named as the model's attributes
# (`row.metadata_` …), so `entry_json` takes a row as it takes a `Memory`. Plain rows, not ORM
# objects: a recall fetches up to 40 candidates to return 5.
ENTRY = ("m.id, m.agent_id, m.user_id, m.type, m.content, m.metadata AS metadata_, m.tags, m.confidence, m.source, "
         "m.created_at, m.updated_at, m.expires_at, m.score_multiplier")
QUERY = "%(q)s::vector"
ANDED = "plainto_tsquery('english'::regconfig, %(text)s)"
# OR of the query's stemmed words (websearch_to_tsquery would AND them and miss paraphrases), built
# in SQL so it costs no extra round trip: plainto_tsquery ANDs the quoted lexemes with ' & ' (a
# lexeme never contains a space), so swapping the operator gives the OR query. With a constant
# config the whole expression folds to a constant at plan time.
ORED = f"replace({ANDED}::text, ' & ', ' | ')::tsquery"
ROW_WORDS = "memwarden_scoped_lexemes(m.agent_id, m.content_tsv)"
QUERY_WORDS = "memwarden_scoped_lexemes(%(agent)s::text, to_tsvector('english'::regconfig, %(text)s))"


@dataclass(frozen=True)
class Shape:
    """What decides a statement's text: which parts of the scope and which filters are set."""

    agent: bool
    user: bool
    as_of: bool
    types: bool
    tags: bool
    metadata: bool
    fresher: bool


def shape_and_params(scope: Scope, filters: dict[str, Any]) -> tuple[Shape, dict[str, Any]]:
    """The statement shape of a scope and filters, and their bound parameters."""
    types, tags, metadata = filters.get("types"), filters.get("tags"), filters.get("metadata")
    fresher = filters.get("fresher_than_days")
    shape = Shape(scope.agent_id is not None, scope.user_id is not None, scope.as_of is not None,
                  bool(types), bool(tags), bool(metadata), fresher is not None)
    params = {"tenant": scope.tenant_id, "agent": scope.agent_id, "user": scope.user_id, "as_of": scope.as_of,
              "types": list(types) if types else None, "tags": list(tags) if tags else None,
              "metadata": Jsonb(metadata) if metadata else None,
              "fresher_s": float(fresher) * 86400 if fresher is not None else None}
    return shape, params


@functools.cache
def _where(shape: Shape, *, live_only: bool = False) -> str:
    """`memories.visible` and `memories.apply_filters` as SQL over alias `m`. `live_only`: live rows,
    expiry left out (the size probe: index-only on the scope index)."""
    conds = ["m.tenant_id = %(tenant)s"]
    if not live_only:
        conds.append("(m.expires_at IS NULL OR m.expires_at > statement_timestamp())")
    if shape.agent:
        conds.append("m.agent_id = %(agent)s")
    if shape.user:
        conds.append("m.user_id = %(user)s")
    if not shape.as_of or live_only:
        conds.append("m.status = 'live'")
    else:
        statuses = ", ".join(f"'{s}'" for s in ONCE_LIVE)
        conds += [f"m.status IN ({statuses})", "m.hard_deleted IS false", "m.live_from <= %(as_of)s::timestamptz",
                  "(m.ended_at IS NULL OR m.ended_at > %(as_of)s::timestamptz)"]
    if shape.types:
        conds.append("m.type = ANY(%(types)s::text[])")
    if shape.tags:
        conds.append("m.tags @> %(tags)s::text[]")
    if shape.metadata:
        conds.append("m.metadata @> %(metadata)s::jsonb")
    if shape.fresher:
        conds.append("m.created_at >= statement_timestamp() - make_interval(secs => %(fresher_s)s::float8)")
    return " AND ".join(conds)


@functools.cache
def _size_sql(shape: Shape) -> str:
    return f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {_where(shape, live_only=True)} LIMIT %(cap)s) s"


@functools.cache
def _centroid_sql(shape: Shape) -> str:
    return (f"SELECT avg(s.embedding)::text FROM (SELECT m.embedding FROM memories m WHERE {_where(shape)} "
            "AND m.embedding IS NOT NULL LIMIT %(sample)s) s")


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
              f"FROM (SELECT m.id, m.embedding <=> {QUERY} AS distance FROM memories m WHERE {_where(shape)} "
              "AND m.embedding IS NOT NULL OFFSET 0) s ORDER BY s.distance, s.id LIMIT %(n)s")
    if not residual:
        if not fetch:
            return ranked
        return (f"SELECT {ENTRY}, r.distance, r.scope_rows, r.mean_distance FROM ({ranked}) r "
                "JOIN memories m ON m.tenant_id = %(tenant)s AND m.id = r.id ORDER BY r.distance, m.id")
    centroid = (f"SELECT avg(c.embedding) AS v FROM (SELECT m.embedding FROM memories m WHERE {_where(shape)} "
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
    return (f"WITH near AS MATERIALIZED (SELECT m.id FROM memories m WHERE {_where(shape)} "
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
            f"FROM pool JOIN memories m ON m.tenant_id = %(tenant)s AND m.id = pool.id WHERE {_where(shape)} "
            "AND m.embedding IS NOT NULL ORDER BY distance, m.id LIMIT %(n)s")


@functools.cache
def _hnsw_sql(shape: Shape, fetch: bool) -> str:
    """The iterative scan's candidates plus every in-scope copy of their texts, ranked exactly.

    Identical texts have identical vectors, which an HNSW graph links poorly (its neighbour lists
    keep one of a set of equal points), so the walk reaches a few copies of a repeated fact and
    misses the rest of an exact top n. One probe of `memories_scope_content` (migration 0032) per
    distinct text (LATERAL, so never a walk of the scope); n copies of one text are as many as the
    top n can hold."""
    where = _where(shape)
    pooled = (f"WITH candidates AS (SELECT m.id, m.embedding <=> {QUERY} AS distance, md5(m.content) AS content_key "
              f"FROM memories m WHERE {where} AND m.embedding IS NOT NULL ORDER BY m.embedding <=> {QUERY} "
              "LIMIT %(overfetch)s), "
              "pooled AS (SELECT id, distance FROM candidates UNION "
              "SELECT c.id, c.distance FROM (SELECT DISTINCT content_key FROM candidates) k CROSS JOIN LATERAL "
              f"(SELECT m.id, m.embedding <=> {QUERY} AS distance FROM memories m WHERE {where} "
              "AND m.embedding IS NOT NULL AND md5(m.content) = k.content_key LIMIT %(n)s) c), "
              "ranked AS (SELECT id, distance FROM pooled ORDER BY distance, id LIMIT %(n)s) ")
    if not fetch:
        return pooled + "SELECT id, distance FROM ranked ORDER BY distance, id"
    return (pooled + f"SELECT {ENTRY}, r.distance FROM ranked r JOIN memories m ON m.tenant_id = %(tenant)s "
            "AND m.id = r.id ORDER BY r.distance, m.id")


@functools.cache
def _keyword_sql(shape: Shape, fetch: bool, tie_by_distance: bool, pairs: int = 0, among: bool = False) -> str:
    """Rows sharing a stemmed word with the query, best cover-density rank first (equal ranks by
    distance to the query vector or by id, never by physical row order, which every UPDATE changes);
    `pairs` > 0: only rows holding one of that many pairs of the query's words (`%(pair_i)s`);
    `among`: only rows whose id is in `%(among)s` (primary-key lookups, however common the words)."""
    columns = f"{ENTRY}, m.embedding <=> {QUERY} AS distance" if fetch else "m.id"
    conds = [_where(shape)]
    if shape.agent:
        # The same match keyed by agent, so a large scope's matches come from
        # `memories_agent_lexemes_live` (migration 0015). `IS TRUE` keeps the planner off the
        # table-wide word index, where a common word matches tens of thousands of other agents'
        # rows; small scopes still walk their ~100 rows on the scope index.
        conds.append(f"(m.content_tsv @@ {ORED}) IS TRUE")
        if among:
            pass  # the rows of `%(among)s`, joined below by primary key
        elif pairs:
            conds.append("(" + " OR ".join(f"{ROW_WORDS} @> %(pair_{i})s::text[]" for i in range(pairs)) + ")")
        else:
            conds.append(f"{ROW_WORDS} && {QUERY_WORDS}")
    else:
        conds.append(f"m.content_tsv @@ {ORED}")
    tie = f"m.embedding <=> {QUERY}" if tie_by_distance else "m.id"
    # Rows holding every query word rank at the top (ts_rank_cd counts the words matched), so
    # checking the n returned for a full AND match is enough.
    # `among` as a join, not `m.id = ANY(…)`: the planner took that as a filter on the scope index,
    # reading every index entry of the scope (5.5 ms for 10,000 rows) instead of 200 key lookups.
    rows = ("unnest(%(among)s::text[]) AS a(id) JOIN memories m ON m.tenant_id = %(tenant)s AND m.id = a.id"
            if among else "memories m")
    return (f"SELECT {columns}, ts_rank_cd(m.content_tsv, {ORED}) AS rank, (m.content_tsv @@ {ANDED}) AS full "
            f"FROM {rows} WHERE {' AND '.join(conds)} ORDER BY rank DESC, {tie}, m.id LIMIT %(n)s")


class _Rows(list):
    """A statement's rows (named tuples), read as SQLAlchemy's result would be."""

    def all(self) -> list[Any]:
        return self

    def scalar(self) -> Any:
        return self[0][0] if self else None

    def scalars(self) -> list[Any]:
        return [row[0] for row in self]


def _execute(session: Session, sql: str, params: dict[str, Any]) -> _Rows:
    """Run a pre-built statement on the session's psycopg connection, in its transaction
    (`app.db.prepared`: psycopg binds the parameters; ~0.1 ms of CPU less per statement than
    SQLAlchemy's execution context and result wrapping, on a path that runs one to three per request)."""
    return _Rows(prepared.fetch_rows(session.connection(), prepared.Statement(sql), params, prepare=None))


# --- scope sizes --------------------------------------------------------------------------------


class ScopeSizes:
    """Each scope's live row count as this process last saw it (bounded LRU), and for scopes past
    FULL_SCAN_MAX the mean of a sample of its vectors (the centroid).

    The count only chooses the path; every path returns correct results, so a stale size costs at
    most slower queries: a full scan of a scope that has grown counts it (window aggregate) and the
    next recall takes the path for its size; a large size is forgotten after LARGE_SCOPE_RECOUNT_S,
    so a scope that shrank is counted again. Scopes never seen are counted first."""

    def __init__(self, capacity: int = 50_000):
        self.capacity = capacity
        self._sizes: OrderedDict[tuple, tuple[int, float, np.ndarray | None]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(scope: Scope, filters: dict[str, Any]) -> tuple | None:
        """None for what is not cached: `as_of` reads (a snapshot, not the live scope)."""
        if scope.as_of is not None:
            return None
        return (scope.tenant_id, scope.agent_id, scope.user_id, repr(sorted(filters.items())))

    def _found(self, key: tuple | None) -> tuple[int, float, np.ndarray | None] | None:
        if key is None:
            return None
        with self._lock:
            found = self._sizes.get(key)
            if found is None:
                return None
            if found[0] > min(FULL_SCAN_MAX, EXACT_SCAN_MAX) and time.monotonic() - found[1] > LARGE_SCOPE_RECOUNT_S:
                del self._sizes[key]
                return None
            self._sizes.move_to_end(key)
            return found

    def get(self, key: tuple | None) -> int | None:
        found = self._found(key)
        return None if found is None else found[0]

    def centroid(self, key: tuple | None) -> np.ndarray | None:
        found = self._found(key)
        return None if found is None else found[2]

    def put(self, key: tuple | None, size: int, centroid: np.ndarray | None = None) -> None:
        if key is None:
            return
        with self._lock:
            self._sizes[key] = (size, time.monotonic(), centroid)
            self._sizes.move_to_end(key)
            while len(self._sizes) > self.capacity:
                self._sizes.popitem(last=False)


scope_sizes = ScopeSizes()
_table_rows: list[float] = [0.0, -1e9]  # (live-or-not rows of `memories` as last estimated, when)


def code_scan_max(session: Session) -> int:
    """The largest scope the binary-code scan serves: EXACT_SCAN_MAX, or where the code scan and a
    filtered HNSW walk cost the same in a table of this size (its row estimate, read at most every
    LARGE_SCOPE_RECOUNT_S)."""
    if time.monotonic() - _table_rows[1] > LARGE_SCOPE_RECOUNT_S:
        estimate = _execute(session, "SELECT reltuples FROM pg_class WHERE oid = 'memories'::regclass", {}).scalar()
        _table_rows[:] = [max(float(estimate or 0.0), 0.0), time.monotonic()]
    return code_scan_limit(_table_rows[0])


def code_scan_limit(table_rows: float) -> int:
    """`code_scan_max` for a table of `table_rows` rows."""
    return max(EXACT_SCAN_MAX, math.isqrt(int(CODE_SCAN_COST_RATIO * HNSW_OVERFETCH * table_rows)))


def scope_size_at_most(session: Session, scope: Scope, filters: dict[str, Any], cap: int) -> int:
    """Count the scope's live rows, stopping at `cap`; only picks the path.

    Expiry is left out on purpose: without it (and without request filters) this is an
    index-only scan of `memories_scope`, ~1 ms at 20,000 rows instead of ~15 ms with a heap visit
    per row. Expired rows not yet swept are counted, which can only tip a scope onto a (still
    filtered, still correct) larger-scope path a little early."""
    shape, params = shape_and_params(scope, filters)
    return _execute(session, _size_sql(shape), {**params, "cap": cap}).scalar() or 0


def _scope_centroid(session: Session, shape: Shape, params: dict[str, Any]) -> np.ndarray | None:
    """The mean of up to STATS_SAMPLE of the scope's vectors (the scope index's first rows)."""
    text = _execute(session, _centroid_sql(shape), {**params, "sample": STATS_SAMPLE}).scalar()
    return None if text is None else np.array(text[1:-1].split(","), dtype=np.float64)


# --- vector search ------------------------------------------------------------------------------


def vector_candidates(session: Session, scope: Scope, filters: dict[str, Any], query_vec: Sequence[float],
                      n: int) -> list[tuple[str, float]]:
    """Up to `n` (id, cosine distance) nearest to `query_vec` within scope, nearest first."""
    return vector_search(session, scope, filters, query_vec, n).hits


def vector_candidates_with_stats(session: Session, scope: Scope, filters: dict[str, Any],
                                 query_vec: Sequence[float], n: int) -> tuple[list[tuple[str, float]], ScopeStats]:
    """`vector_candidates`, plus the scope's size and mean similarity to the query."""
    found = vector_search(session, scope, filters, query_vec, n)
    return found.hits, found.stats


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
    key = ScopeSizes.key(scope, filters)
    size = scope_sizes.get(key)
    centroid = scope_sizes.centroid(key)
    cached = cached_codes_serve(shape)
    if size is None and scope.as_of is None:
        # Past FULL_SCAN_MAX the codes held in process serve this shape whatever the size, and
        # their copy counts the scope: no need to count further (~1 ms per 10,000 rows).
        cap = FULL_SCAN_MAX if cached else code_scan_max(session)
        size = scope_size_at_most(session, scope, filters, cap + 1)
    if size is None or size <= min(FULL_SCAN_MAX, EXACT_SCAN_MAX):  # `as_of` snapshots too
        return _full_scan_result(_execute(session, *_full_scan_statement(shape, params, fetch, residual)),
                                 key, fetch, residual)
    if centroid is None:  # a scope counted just now (or grown past FULL_SCAN_MAX): its sample's mean
        centroid = _scope_centroid(session, shape, params)
        scope_sizes.put(key, size, centroid)
    rows, pool = (_cached_codes_search(session, scope, shape, params, query_vec, n, fetch) if cached else None), None
    if rows is not None:
        pool = rows.pool
        if rows.scope_rows != size:  # the copy's count (a probe stops at FULL_SCAN_MAX + 1)
            size = rows.scope_rows
            scope_sizes.put(key, size, centroid)
    else:
        largest_code_scan = code_scan_max(session) if size > EXACT_SCAN_MAX or cached else EXACT_SCAN_MAX
        if cached:  # counted only to FULL_SCAN_MAX + 1 above, or by the copy
            size = scope_size_at_most(session, scope, filters, largest_code_scan + 1)
        if size <= largest_code_scan:
            rows = _execute(session, _code_scan_sql(shape, fetch), {**params, "shortlist": max(n, SHORTLIST)}).all()
        else:
            overfetch = max(n, HNSW_OVERFETCH)
            with _filtered_hnsw_scan(session, ef_search=max(40, min(1000, overfetch))):
                rows = _execute(session, _hnsw_sql(shape, fetch), {**params, "overfetch": overfetch}).all()
    # Unit vectors (every embedder's are): the mean cosine to the query is its dot product with their mean.
    mean = float(np.dot(centroid, _array(query_vec))) if centroid is not None else 0.0
    hits = [(r.id, float(r.distance)) for r in rows]
    return VectorResult(hits, ScopeStats(size, mean, False), {r.id: r for r in rows} if fetch else {},
                        pool if pool is not None else [i for i, _ in hits])


def _full_scan_statement(shape: Shape, params: dict[str, Any], fetch: bool, residual: bool
                         ) -> tuple[str, dict[str, Any]]:
    """The full scan's text and parameters (`params`: the scope's, the query vector and n)."""
    return _full_scan_sql(shape, fetch, residual), ({**params, "centroid_sample": CENTROID_SAMPLE} if residual
                                                    else params)


def _full_scan_result(rows: list[Any], key: tuple | None, fetch: bool, residual: bool) -> VectorResult:
    """The full scan's rows as a `VectorResult`; the scope's size noted for the next recall."""
    scope_sizes.put(key, int(rows[0].scope_rows) if rows else 0)
    if not rows:
        return VectorResult([], ScopeStats(0, 0.0, True))
    mean = 1.0 - float(rows[0].mean_distance)
    best_residual = max(relevance.residual_similarity(1.0 - float(r.distance), float(r.query_centroid),
                                                      float(r.centroid_dot), float(r.centroid_norm2))
                        for r in rows) if residual else None
    return VectorResult([(r.id, float(r.distance)) for r in rows],
                        ScopeStats(int(rows[0].scope_rows), mean, True, best_residual),
                        {r.id: r for r in rows} if fetch else {}, [r.id for r in rows])


def recall_candidates(session: Session, scope: Scope, filters: dict[str, Any], query_vec: Sequence[float],
                      query: str, n: int, *, residual: bool) -> tuple[VectorResult, KeywordResult]:
    """Recall's two legs: `vector_search` (with the rows) and `keyword_search` (with the rows and
    their distances to `query_vec`).

    Where the full scan serves the scope (an `as_of` snapshot, or a scope this process last counted
    at most min(FULL_SCAN_MAX, EXACT_SCAN_MAX) rows) the keyword statement needs nothing from the
    vector leg's answer, so both statements go out in one pipeline: one round trip instead of two.
    Otherwise (a scope not counted yet, or large: the keyword leg then uses the vector leg's
    shortlist) one after the other."""
    key = ScopeSizes.key(scope, filters)
    size = scope_sizes.get(key)
    small = size <= min(FULL_SCAN_MAX, EXACT_SCAN_MAX) if size is not None else scope.as_of is not None
    if small and query.strip():
        shape, params = shape_and_params(scope, filters)
        params.update(q=vector_param(query_vec), n=n)
        words = {**params, "text": query}
        vector_sql, vector_params = _full_scan_statement(shape, params, True, residual)
        vector_rows, keyword_rows = prepared.fetch_rows_together(session.connection(), [
            (prepared.Statement(vector_sql), vector_params),
            (prepared.Statement(_keyword_sql(shape, True, True)), words)])
        return _full_scan_result(vector_rows, key, True, residual), _keyword_result(keyword_rows, True)
    vector = vector_search(session, scope, filters, query_vec, n, fetch=True, residual=residual)
    # Equal keyword ranks are ordered by vector distance in exactly-scanned scopes (cheap
    # there); past EXACT_SCAN_MAX a common word can match tens of thousands of rows, so by id,
    # and the rows holding only one of the query's words come from the vector leg's shortlist.
    keyword = keyword_search(session, scope, filters, query, n, query_vec if vector.stats.exact else None,
                             fetch=query_vec, large=not vector.stats.exact, among=vector.pool,
                             scope_rows=vector.stats.rows)
    return vector, keyword


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
    found = _execute(session, _cached_codes_sql(shape, fetch), {
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
            return head + list(_execute(session, "EXPLAIN (ANALYZE, BUFFERS) " + sql, params).scalars())
        return _execute(session, sql, params).all()


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


# --- keyword search -----------------------------------------------------------------------------


def keyword_candidates(session: Session, scope: Scope, filters: dict[str, Any], query: str,
                       n: int, query_vec: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Up to `n` (id, ts_rank_cd) whose text shares any stemmed word with `query`, best first.

    Equal ranks are common (every memory of "alice" matches the word "alice" once); with
    `query_vec` they are ordered by vector distance, otherwise by id, never by physical row order
    (which every UPDATE changes, so RRF would otherwise see a different keyword list each time)."""
    return keyword_search(session, scope, filters, query, n, query_vec).hits


@dataclass
class KeywordResult:
    hits: list[tuple[str, float]]
    """(id, ts_rank_cd), best first."""
    rows: dict[str, Any] = field(default_factory=dict)
    distances: dict[str, float] = field(default_factory=dict)
    """With `fetch`: each hit's row and cosine distance to `fetch`'s query vector."""
    full_match: bool = False
    """Some returned row holds every word of the query (a full-text AND match)."""


KEYWORD_PAIR_WORDS = 6  # at most 20 triples and 15 pairs (index lookups) for a long question
# A word held by more of an agent's rows than this is common there: a set of the query's words made
# only of common words is not looked up over the whole scope ("book" and "read" are each in ~3,200 of
# the 1M-row bench table's 50,000-row agent; ranking the rows holding both took 70-80 ms). A set
# with a rarer word ranks at most this many rows. A first name there is in ~530 rows, so it stays a
# word worth looking up.
COMMON_WORD_ROWS = 1000
WORD_RECOUNT_S = 300.0
# Words are counted only in scopes this large: in a smaller one a set of words ranks a few hundred
# rows at most (~5 ms), and counting would cost more CPU than it saves.
COUNT_WORDS_PAST = 10 * COMMON_WORD_ROWS


class WordCounts:
    """How many of an agent's live rows hold a word, up to COMMON_WORD_ROWS + 1, as last counted by
    this process (bounded LRU; a count older than WORD_RECOUNT_S is counted again).

    Counting reads a heap page per row (up to 1,001: ~2 ms from shared buffers, 7-70 ms from the OS
    cache on a loaded box), so it happens off the request, on a background thread with its own
    connection: a word not counted yet is taken as not common (looked up, as before this existed)."""

    def __init__(self, capacity: int = 100_000, background: bool = True):
        self.capacity = capacity
        self.background = background
        self._counts: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()
        self._pending: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._worker: Any = None

    def common(self, session: Session, shape: Shape, params: dict[str, Any], words: list[str]) -> set[str]:
        """The words of `words` (scoped lexemes) known to be common in the agent's scope."""
        now, tenant, counts, missing = time.monotonic(), params["tenant"], {}, []
        with self._lock:
            for word in words:
                found = self._counts.get((tenant, word))
                if found is not None:
                    counts[word] = found[0]
                    self._counts.move_to_end((tenant, word))
                if (found is None or now - found[1] > WORD_RECOUNT_S) and (tenant, word) not in self._pending:
                    missing.append(word)
                    self._pending.add((tenant, word))
        if missing:
            job = {"tenant": tenant, "agent": params["agent"], "words": missing, "cap": COMMON_WORD_ROWS + 1}
            if self.background:
                self._submit(session.connection().engine, job)
            else:
                counts.update(self._count(session.connection(), job))
        return {word for word, count in counts.items() if count > COMMON_WORD_ROWS}

    def _submit(self, engine: Any, job: dict[str, Any]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with self._lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="word-counts")
        self._worker.submit(self._count_on, engine, job)

    def _count_on(self, engine: Any, job: dict[str, Any]) -> None:
        try:
            with engine.connect() as conn:
                self._count(conn, job)
                conn.commit()
        except Exception:  # a count is only an optimisation: forget the attempt, try again later
            with self._lock:
                self._pending -= {(job["tenant"], word) for word in job["words"]}

    def _count(self, conn: Any, job: dict[str, Any]) -> dict[str, int]:
        fresh = dict(conn.exec_driver_sql(_word_counts_sql(), job).all())
        counts = {word: int(fresh.get(word, 0)) for word in job["words"]}
        now = time.monotonic()
        with self._lock:
            for word, count in counts.items():
                self._counts[(job["tenant"], word)] = (count, now)
                self._pending.discard((job["tenant"], word))
            while len(self._counts) > self.capacity:
                self._counts.popitem(last=False)
        return counts


word_counts = WordCounts()


@functools.cache
def _word_counts_sql() -> str:
    """Each scoped word's live rows in the agent (the agent-keyed word index), counted up to `%(cap)s`."""
    return ("SELECT w.word, (SELECT count(*) FROM (SELECT 1 FROM memories m WHERE m.tenant_id = %(tenant)s "
            f"AND m.agent_id = %(agent)s AND m.status = 'live' AND {ROW_WORDS} @> ARRAY[w.word] LIMIT %(cap)s) s) "
            "FROM unnest(%(words)s::text[]) AS w(word)")


def keyword_search(session: Session, scope: Scope, filters: dict[str, Any], query: str, n: int,
                   query_vec: Sequence[float] | None = None, *, fetch: Sequence[float] | None = None,
                   large: bool = False, among: Sequence[str] | None = None,
                   scope_rows: int = 0) -> KeywordResult:
    """`keyword_candidates`; with `fetch` (the query vector) also the rows and their distances to
    it, in the same statement.

    `large` (an agent's scope past FULL_SCAN_MAX): ranking every row that shares one word with the
    query reads and ranks thousands of rows there (a common word such as "feel" is in a tenth of an
    agent's memories: 77 ms for a 100,000-row agent). So the rows sharing at least three of its
    words, then at least two, are ranked first, from the agent-keyed word index (each set of words
    an index lookup); when they fill the n, they are the top n (a row's cover-density rank counts
    the query words it holds, so a row holding fewer ranks below them, bar a word repeated in it).
    Otherwise, with `among` (the vector leg's shortlist), the rest of the n are the rows of that
    shortlist holding one of the words, ranked as before (a bounded set of primary-key lookups);
    without it the full one-word match runs. The three-word tier is for questions whose
    two common words are everywhere: "What kind of books does Sara read?" holds "book" and "read"
    in 6,000 of a 100,000-row agent's memories, Sara's reading facts all three. Ranking every
    one-word match instead ("What does Karim do for a living?": `karim`, `live`) read thousands of
    rows for places 10-20 of the list, mostly ties broken by id: 50-260 ms in a 50,000-row agent of
    the 1M-row table."""
    if not query.strip():
        return KeywordResult([])
    shape, params = shape_and_params(scope, filters)
    vec = fetch if fetch is not None else query_vec
    params.update(text=query, n=n, q=vector_param(vec) if vec is not None else None)
    tie = query_vec is not None  # with `fetch` as well, the same vector is bound once
    rows, full_match = None, False
    if large and shape.agent:
        rows, full_match = _rows_sharing_most_words(session, shape, params, fetch is not None, tie, n, among,
                                                    count_words=scope_rows > COUNT_WORDS_PAST)
    if rows is None:
        rows = _execute(session, _keyword_sql(shape, fetch is not None, tie), params).all()
    return _keyword_result(rows, fetch is not None, full_match)


def _keyword_result(rows: list[Any], fetch: bool, full_match: bool = False) -> KeywordResult:
    """The keyword statement's rows as a `KeywordResult` (with `fetch`: their rows and distances)."""
    full_match = full_match or any(r.full for r in rows)
    if not fetch:
        return KeywordResult([(r.id, float(r.rank)) for r in rows], full_match=full_match)
    return KeywordResult([(r.id, float(r.rank)) for r in rows], {r.id: r for r in rows},
                         {r.id: float(r.distance) if r.distance is not None else 1.0 for r in rows}, full_match)


def _rows_sharing_most_words(session: Session, shape: Shape, params: dict[str, Any], fetch: bool, tie: bool,
                             n: int, among: Sequence[str] | None = None,
                             count_words: bool = False) -> tuple[list[Any] | None, bool]:
    """The top n among the scope's rows holding at least three, else at least two, of the query's
    words; when fewer than n rows hold two, those rows and then `among`'s rows holding one word, or
    (no `among`) None: the caller then ranks every one-word match. With `among`, sets made only of
    words common in the scope (`COMMON_WORD_ROWS`; counted with `count_words`, i.e. past
    COUNT_WORDS_PAST rows) are not looked up: their rows come from `among`.
    Also whether a row of the scope holds every word, when the rows returned cannot tell."""
    words = _execute(session, f"SELECT {QUERY_WORDS}", params).scalar()
    words = sorted(words or [])[:KEYWORD_PAIR_WORDS]
    common = (word_counts.common(session, shape, params, words) if count_words and among is not None and len(words) > 1
              else set())
    best: list[Any] = []
    for size in (3, 2):
        sets = [group for group in itertools.combinations(words, size) if not set(group) <= common]
        if not sets:
            continue
        set_params = {f"pair_{i}": list(group) for i, group in enumerate(sets)}
        rows = _execute(session, _keyword_sql(shape, fetch, tie, len(sets)), {**params, **set_params}).all()
        if len(rows) >= n:
            return rows, False
        best = rows  # the two-word rows include the three-word ones
    if among is None or not words:
        return None, False
    # Every row holding two or more words (bar sets of common words) is in `best` (fewer than n), so
    # one holding every word is too unless every word is common; the word index answers otherwise.
    seen = {r.id for r in best}
    rest = _execute(session, _keyword_sql(shape, fetch, tie, among=True),
                    {**params, "among": [i for i in among if i not in seen]}).all()
    rows = best + rest[:n - len(best)]
    full = (len(words) == 1 or set(words) <= common) and not any(r.full for r in rows) and bool(
        _execute(session, _word_exists_sql(shape), {**params, "pair_0": words}).scalar())
    return rows, full


@functools.cache
def _word_exists_sql(shape: Shape) -> str:
    """Whether a row of the agent's scope holds the words `%(pair_0)s` (the agent-keyed word index;
    stops at the first)."""
    return (f"SELECT EXISTS (SELECT 1 FROM memories m WHERE {_where(shape)} AND (m.content_tsv @@ {ANDED}) IS TRUE "
            f"AND {ROW_WORDS} @> %(pair_0)s::text[])")


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
