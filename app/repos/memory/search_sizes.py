"""How large a scope is, as this process last saw it: the count that picks recall's vector path
(`app.repos.memory.search_vector`), and for a large scope the centroid that estimates its mean similarity.

The path is chosen from the size seen by the last scan of the scope in this process (no count
first): round trips are what a recall costs on a small scope. Larger scopes' size and centroid
(the mean of unit vectors' cosines to the query is the query's dot product with their mean
vector) are counted and averaged over a sample at most every `LARGE_SCOPE_RECOUNT_S` per process
(`ScopeSizes`).
"""

from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.repos.memory import search_sql
from app.repos.memory.memories import Scope
from app.repos.memory.search_sql import Shape, shape_and_params, where

# Up to this many rows every row's vector is compared with the query, exactly (the full scan).
FULL_SCAN_MAX = 2_000
# Up to this many rows (or more in a large table: `search_vector.code_scan_max`) a filtered scope is
# scanned over its binary codes; past it, the HNSW index serves it.
EXACT_SCAN_MAX = 20_000
STATS_SAMPLE = 2_000
# A large scope's size (and centroid) is counted again at most this often: it only picks the path
# and estimates the scope mean, and counting a 20,000-row prefix of the scope index cost more than
# the search itself.
LARGE_SCOPE_RECOUNT_S = 30.0


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


def scope_size_at_most(session: Session, scope: Scope, filters: dict[str, Any], cap: int) -> int:
    """Count the scope's live rows, stopping at `cap`; only picks the path.

    Expiry is left out on purpose: without it (and without request filters) this is an
    index-only scan of `memories_scope`, ~1 ms at 20,000 rows instead of ~15 ms with a heap visit
    per row. Expired rows not yet swept are counted, which can only tip a scope onto a (still
    filtered, still correct) larger-scope path a little early."""
    shape, params = shape_and_params(scope, filters)
    return search_sql.execute(session, _size_sql(shape), {**params, "cap": cap}).scalar() or 0


def scope_centroid(session: Session, shape: Shape, params: dict[str, Any]) -> np.ndarray | None:
    """The mean of up to STATS_SAMPLE of the scope's vectors (the scope index's first rows)."""
    text = search_sql.execute(session, _centroid_sql(shape), {**params, "sample": STATS_SAMPLE}).scalar()
    return None if text is None else np.array(text[1:-1].split(","), dtype=np.float64)


@functools.cache
def _size_sql(shape: Shape) -> str:
    return f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {where(shape, live_only=True)} LIMIT %(cap)s) s"


@functools.cache
def _centroid_sql(shape: Shape) -> str:
    return (f"SELECT avg(s.embedding)::text FROM (SELECT m.embedding FROM memories m WHERE {where(shape)} "
            "AND m.embedding IS NOT NULL LIMIT %(sample)s) s")
