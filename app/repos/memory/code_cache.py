"""Large scopes' binary codes held in this process, so recall compares the query with them in numpy.

Past `search_sizes.FULL_SCAN_MAX` rows recall shortlists a scope by the Hamming distance between the
query's binary code and every row's (`embedding_bits`, migration 0033) and re-ranks the shortlist
with the full vectors. In PostgreSQL that scan reads each row's index entry through the executor:
12-19 ms for 50,000 rows in a 1M-row table and ~37 ms for 100,000 (`memwarden bench scale`), most
of a recall. The same comparison over a copy of the codes in memory is an XOR and a popcount per
row: ~0.3 ms of CPU for 100,000 rows. 82 bytes a row (the 48-byte code, the id as bytes, the user
as a number): `CAPACITY_ROWS` (1M rows, ~82 MB per server process) bounds the whole cache, least
recently used scopes dropped first; scopes up to FULL_SCAN_MAX rows are never held. Reading a copy
costs 50-60 ms for 50,000 rows, 100-120 ms for 100,000 (`dev/bench-records/scale-recall-parts.py`).

The copy is never trusted for what it cannot know:

- every shortlisted row is re-read under the request's full filter (live, not expired, scope), so a
  row deleted, expired or moved since the copy was taken is simply not returned;
- rows inserted or changed since (migration 0034: `search_changed_at`, set by a trigger on every
  insert and every change of status, embedding or scope, whoever writes) are read from the table by
  each search and ranked with the shortlist. "Since" is the start of the oldest transaction that had
  written something when the copy was read (it may commit after), or the copy's time; less
  `CHANGE_MARGIN_S` when some writer cannot be seen (another role's session, or on a replica);
- past `RELOAD_S`, or once `CHANGED_MAX` changed rows have accumulated, the copy is read again.

A replica's copy is as stale as the replica; the margin covers a replay lag shorter than it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from sqlalchemy.orm import Session

CODE_BYTES = 48  # 384 dimensions, one bit each
RELOAD_S = 300.0
CHANGE_MARGIN_S = 120.0
CHANGED_MAX = 2_000
CAPACITY_ROWS = 1_000_000

_LOAD_SQL = ("SELECT m.id, m.user_id, m.embedding_bits FROM memories m WHERE m.tenant_id = %s AND m.agent_id = %s "
             "AND m.status = 'live' AND m.embedding_bits IS NOT NULL")
# The copy's "since": rows written by a transaction still open when the copy is read may commit
# after it, so since is no later than the start of the oldest open transaction that has written
# (pg_stat_activity shows it for the app's own role). When some writer cannot be seen (another
# role's session without pg_read_all_stats, or a replica, whose writers are on the primary), the
# copy's time less CHANGE_MARGIN_S instead.
_SINCE_SQL = ("SELECT least(statement_timestamp() - CASE WHEN pg_is_in_recovery() OR EXISTS (SELECT 1 FROM "
              "pg_stat_activity WHERE backend_type = 'client backend' AND state IS NULL) "
              "THEN make_interval(secs => %s) ELSE interval '0' END, "
              "(SELECT min(xact_start) FROM pg_stat_activity WHERE backend_xid IS NOT NULL))")


@dataclass
class ScopeCodes:
    """One agent's live rows' codes as read at `loaded` (monotonic); rows changed after `since`
    (the database's clock) are not trusted to be in it."""

    ids: np.ndarray
    users: np.ndarray
    user_index: dict[str | None, int]
    bits: np.ndarray
    """(6, rows) uint64: the codes' 64-bit words, word by word."""
    since: datetime
    loaded: float
    stale: bool = False

    def rows_of(self, user_id: str | None = None) -> int:
        """How many rows the copy holds (of one user when `user_id` is given)."""
        if user_id is None:
            return len(self.ids)
        code = self.user_index.get(user_id)
        return 0 if code is None else int(np.count_nonzero(self.users == code))

    def nearest(self, query_vec: np.ndarray, shortlist: int, user_id: str | None = None) -> list[str]:
        """The ids of the (up to) `shortlist` rows whose codes are nearest the query's, of one user
        when `user_id` is given; in no particular order (the caller re-ranks them exactly)."""
        query = np.packbits(np.asarray(query_vec) > 0).view(np.uint64)  # binary_quantize: the sign bits
        # Hamming distance, one 64-bit word of every row at a time (the words are stored column by
        # column): 0.3 ms of CPU for 100,000 rows, against 1.7 ms summing a (rows, 6) array by row.
        distance = np.bitwise_count(self.bits[0] ^ query[0]).astype(np.int16)
        for word in range(1, len(query)):
            distance += np.bitwise_count(self.bits[word] ^ query[word])
        rows = None
        if user_id is not None:
            code = self.user_index.get(user_id)
            if code is None:
                return []
            rows = np.flatnonzero(self.users == code)
            distance = distance[rows]
        if len(distance) > shortlist:
            picked = np.argpartition(distance, shortlist - 1)[:shortlist]
        else:
            picked = np.arange(len(distance))
        return [i.decode() for i in self.ids[picked if rows is None else rows[picked]].tolist()]


class CodeCache:
    """ScopeCodes by (tenant, agent), least recently used dropped past CAPACITY_ROWS rows in all."""

    def __init__(self, capacity_rows: int = CAPACITY_ROWS):
        self.capacity_rows = capacity_rows
        self._scopes: OrderedDict[tuple[str, str], ScopeCodes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session: Session, tenant_id: str, agent_id: str) -> ScopeCodes | None:
        """The agent's codes, read now if never read, stale or older than RELOAD_S; None when the
        scope alone would not fit in the cache."""
        key = (tenant_id, agent_id)
        with self._lock:
            codes = self._scopes.get(key)
            if codes is not None and not codes.stale and time.monotonic() - codes.loaded <= RELOAD_S:
                self._scopes.move_to_end(key)
                return codes
        codes = load(session, tenant_id, agent_id)  # outside the lock: a slow read stalls no other scope
        if len(codes.ids) > self.capacity_rows:
            return None
        with self._lock:
            self._scopes[key] = codes
            self._scopes.move_to_end(key)
            total = sum(len(c.ids) for c in self._scopes.values())
            while total > self.capacity_rows:
                _, dropped = self._scopes.popitem(last=False)
                total -= len(dropped.ids)
        return codes

    def clear(self) -> None:
        with self._lock:
            self._scopes.clear()


def load(session: Session, tenant_id: str, agent_id: str) -> ScopeCodes:
    """Read one agent's live rows' codes (an index-only scan of `memories_scope_bits`), in binary:
    a `bit(384)` value arrives as its length (4 bytes) and 48 bytes of bits."""
    driver = session.connection().connection.dbapi_connection
    with driver.cursor() as cur:
        since = cur.execute(_SINCE_SQL, (CHANGE_MARGIN_S,)).fetchone()[0]
    with driver.cursor(binary=True) as cur:
        rows = cur.execute(_LOAD_SQL, (tenant_id, agent_id)).fetchall()
    loaded = time.monotonic()
    ids = np.array([r[0].encode() for r in rows], dtype=np.bytes_)  # ~30 bytes an id, not a Python str's ~80
    user_index: dict[str | None, int] = {}
    users = np.fromiter((user_index.setdefault(r[1], len(user_index)) for r in rows), dtype=np.int32, count=len(rows))
    raw = b"".join(bytes(r[2])[-CODE_BYTES:] for r in rows)
    bits = np.ascontiguousarray(np.frombuffer(raw, dtype=np.uint64).reshape(len(rows), CODE_BYTES // 8).T)
    if since is None:  # no clock read (cannot happen on PostgreSQL); trust nothing older than the margin
        since = datetime.now().astimezone() - timedelta(seconds=CHANGE_MARGIN_S)
    return ScopeCodes(ids, users, user_index, bits, since, loaded)


cache = CodeCache()
