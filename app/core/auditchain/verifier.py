"""ChainVerifier: one chain's entries checked in seq order against their stored hashes, with
O(log n) state (the chain head and a Merkle frontier).

The checks of a single entry that need no earlier entry (`inspect_entry`) are separate from the
order-dependent ones (`ChainVerifier.link`), so worker processes can run the first half.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from .entry import parse_entry, rfc3339_datetime
from .errors import AuditChainError, ChainError, EntryError
from .merkle import CHAIN_PREFIX, GENESIS, MerkleFrontier
from .note import Checkpoint

_sha256 = hashlib.sha256

_COLUMN_ALIASES = {"event_type": "type", "chain_id": "chain", "subject_type": "subject.type",
                   "subject_id": "subject.id", "actor_kind": "actor.kind", "actor_id": "actor.id"}


def _entry_value(obj: Mapping[str, Any], key: str) -> Any:
    """Value of a column key in an entry: a top-level key, an alias, or a dotted path (None if absent)."""
    value: Any = obj
    for part in _COLUMN_ALIASES.get(key, key).split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _same_value(column: object, hashed: object) -> bool:
    if isinstance(column, datetime):
        return isinstance(hashed, str) and column == rfc3339_datetime(hashed)
    if isinstance(column, uuid.UUID):
        return str(column) == hashed
    if type(column) is bool or type(hashed) is bool:
        return type(column) is type(hashed) and column == hashed
    return column == hashed


def inspect_entry(entry: bytes, stored_leaf: bytes | None) -> tuple[bytes, dict[str, Any]]:
    """Stateless checks of one entry (stored leaf hash, canonical bytes, v1 shape).

    Returns (leaf hash, parsed entry); raises `ChainError` without a seq (the caller knows it).
    Separate from the sequential part so worker processes can run it.
    """
    leaf = _sha256(b"\x00" + entry).digest()  # leaf_hash, inlined: once per entry
    if stored_leaf is not None and stored_leaf != leaf:
        raise ChainError("leaf_hash_mismatch", "stored leaf hash is not the hash of the entry bytes",
                         expected=leaf.hex(), found=bytes(stored_leaf).hex())
    try:
        return leaf, parse_entry(entry)
    except EntryError as exc:
        raise ChainError(exc.reason, exc.detail, expected=exc.expected, found=exc.found) from None


def chain_error_at(exc: AuditChainError, pos: int) -> ChainError:
    """`exc` as the `ChainError` of the entry at seq `pos` (its detail prefixed with the seq)."""
    return ChainError(exc.reason, f"seq {pos}: {exc.detail}", seq=pos, expected=exc.expected, found=exc.found)


class ChainVerifier:
    """The shared verification loop: feed entries in order, check checkpoints at their size.

    Keeps only the chain head and a Merkle frontier (O(log n) memory). Starting at seq 1 it
    recomputes Merkle roots; starting later (a range) there is no frontier unless one is given,
    so only chain heads are checked - which still authenticates the range, because the chain
    hash commits to every entry before it. Every failure raises `ChainError` carrying the first
    bad seq; do not keep using a verifier after a failure.
    """

    def __init__(self, origin: str, chain_id: str, *, start_seq: int = 1, prev_chain_hash: bytes = GENESIS,
                 frontier: MerkleFrontier | None = None,
                 project: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None):
        if start_seq < 1 or len(prev_chain_hash) != 32:
            raise ValueError("start_seq >= 1 and a 32-byte prev_chain_hash are required")
        if frontier is None and start_seq == 1:
            frontier = MerkleFrontier()
        if frontier is not None and frontier.size != start_seq - 1:
            raise ValueError(f"frontier size {frontier.size} does not match start_seq {start_seq}")
        self.origin = origin
        self.chain_id = chain_id
        self.start_seq = start_seq
        self._size = start_seq - 1
        self._head = bytes(prev_chain_hash)
        self._frontier = frontier.copy() if frontier is not None else None
        self._project = project

    @property
    def size(self) -> int:
        """Tree size reached: the seq of the last entry accepted (start_seq - 1 before any)."""
        return self._size

    @property
    def chain_head(self) -> bytes:
        """Recomputed chain hash at `size`."""
        return self._head

    @property
    def root(self) -> bytes | None:
        """Recomputed Merkle root at `size`, or None for a range without a frontier."""
        return None if self._frontier is None else self._frontier.root()

    @property
    def frontier(self) -> MerkleFrontier | None:
        """A copy of the frontier at `size` (None for a range without one)."""
        return None if self._frontier is None else self._frontier.copy()

    def add(self, entry: bytes, leaf: bytes | None = None, chain: bytes | None = None, *, seq: int | None = None,
            columns: Mapping[str, Any] | None = None) -> None:
        """Check the next entry with its stored hashes, record seq and query columns (None skips).

        Order of checks: leaf hash, canonical bytes and shape, seq, chain/origin, chain link, columns.
        """
        try:
            computed, obj = inspect_entry(entry, leaf)
        except ChainError as exc:
            raise chain_error_at(exc, self._size + 1) from None
        origin, chain_id = obj["origin"], obj["chain"]
        foreign = None if origin == self.origin and chain_id == self.chain_id else (origin, chain_id)
        link = self.link(computed, obj["seq"], foreign, chain, seq)
        if columns:
            self._check_columns(obj, columns, self._size + 1)
        self.commit(computed, link)

    def link(self, leaf: bytes, inner: int, foreign: tuple[str, str] | None, stored_chain: bytes | None,
             record_seq: int | None) -> bytes:
        """The order-dependent checks of an entry `inspect_entry` passed; returns its chain hash.

        `inner` is the seq inside the hashed entry, `foreign` its (origin, chain) if not this
        chain's, `record_seq` the seq its record claims. Call `commit` with the result.
        """
        pos = self._size + 1
        if inner != pos:
            # A duplicate of an earlier seq makes that earlier entry suspect too.
            bad = min(pos, inner) if inner >= self.start_seq else pos
            raise ChainError("seq_mismatch", f"position {pos} holds the entry with seq {inner}", seq=bad,
                             expected=pos, found=inner)
        if record_seq is not None and record_seq != inner:
            raise ChainError("seq_mismatch", f"seq {pos}: record says seq {record_seq}, the hashed entry says {inner}",
                             seq=pos, expected=inner, found=record_seq)
        if foreign is not None:
            raise ChainError("wrong_chain", f"seq {pos}: entry belongs to {foreign[0]!r} / {foreign[1]!r}", seq=pos,
                             expected=[self.origin, self.chain_id], found=list(foreign))
        link = _sha256(CHAIN_PREFIX + self._head + leaf).digest()  # chain_hash, inlined: once per entry
        if stored_chain is not None and stored_chain != link:
            raise ChainError("chain_hash_mismatch", f"seq {pos}: stored chain hash does not link to seq {pos - 1}",
                             seq=pos, expected=link.hex(), found=bytes(stored_chain).hex())
        return link

    def commit(self, leaf: bytes, link: bytes) -> None:
        """Accept the next entry: its leaf hash and the chain hash `link` returned."""
        self._size += 1
        self._head = link
        if self._frontier is not None:
            self._frontier.append(leaf)

    def _check_columns(self, obj: dict[str, Any], columns: Mapping[str, Any], pos: int) -> None:
        projected = self._project(obj) if self._project is not None else None
        for key, value in columns.items():
            hashed = projected.get(key) if projected is not None else _entry_value(obj, key)
            if not _same_value(value, hashed):
                raise ChainError("column_mismatch", f"seq {pos}: column {key!r} disagrees with the hashed entry",
                                 seq=pos, expected=hashed, found=value)

    def check_checkpoint(self, cp: Checkpoint) -> None:
        """Compare a checkpoint at exactly the current size with the recomputed state."""
        if cp.size != self._size:
            raise ValueError(f"checkpoint size {cp.size} is not the current size {self._size}")
        if cp.origin != self.origin:
            raise ChainError("wrong_chain", f"checkpoint at size {cp.size} is for origin {cp.origin!r}",
                             seq=cp.size, expected=self.origin, found=cp.origin)
        if self._frontier is not None:
            root = self._frontier.root()
            if root != cp.root:
                raise ChainError("checkpoint_root_mismatch", f"checkpoint at size {cp.size} signs a different "
                                 "Merkle root", seq=cp.size, expected=cp.root.hex(), found=root.hex())
        if self._head != cp.chain_head:
            raise ChainError("checkpoint_head_mismatch", f"checkpoint at size {cp.size} signs a different chain head",
                             seq=cp.size, expected=cp.chain_head.hex(), found=self._head.hex())
