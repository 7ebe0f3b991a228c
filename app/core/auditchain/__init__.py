"""Tamper-evident audit log core: entries, hash chain, Merkle tree, signed checkpoints, verifier.

Pure (no database, no web framework) so the offline verifier CLI can import it alone.

Recipe (RFC 6962/9162 hashing, C2SP signed-note and tlog-checkpoint):

* An entry is an RFC 8785 canonical JSON object, canonicalised once and stored as exact bytes:
  ``{"v":1,"origin","chain","seq","ts","type","actor","subject","data"}``.
* ``leaf_hash(e) = SHA-256(0x00 || e)``; ``node_hash(l, r) = SHA-256(0x01 || l || r)``.
* ``chain_hash(prev, leaf) = SHA-256("memwarden/v1/chain" || 0x00 || prev || leaf)``, with
  ``GENESIS`` (32 zero bytes) as the ``prev`` of seq 1. Sequence numbers start at 1, gapless.
* The Merkle root of the first n leaves is the RFC 6962 Merkle Tree Hash (tree size n = seq n).
* A checkpoint is a C2SP signed note whose body is ``origin``, size, base64 root, then
  ``chain-head <base64>`` and an optional ``ts <RFC 3339>`` line, signed with Ed25519.

``origin`` names one chain's log (e.g. ``memwarden.local/tenant:42``): it is the ``origin`` of
every entry, the first line of every checkpoint and the ``origin`` of an export manifest.

Export format (JSONL, ASCII, one object per line; `export_lines` yields lines without "\\n"):
line 1 ``{"kind":"manifest","format":"memwarden-audit-export/v1","origin","chain_id","from_seq",
"to_seq","prev_chain_hash","exported_at","vkey"}``; then ``{"kind":"entry","seq","entry"
(base64 of the exact bytes),"leaf_hash","chain_hash"}`` in seq order; ``{"kind":"checkpoint",
"note"}`` lines follow the entry at their size (those beyond the last entry come last). The
verifier accepts checkpoint lines anywhere after the manifest; one that arrives after the
stream has passed its size cannot be recomputed in bounded memory and is only counted.
"""

from __future__ import annotations

import hashlib
import itertools
import multiprocessing
import os
import stat
import threading
import uuid
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO

from .entry import ENTRY_VERSION, build_entry, parse_entry, rfc3339_datetime
from .errors import (
    AuditChainError,
    ChainError,
    CheckpointError,
    EntryError,
    ExportFormatError,
    KeyFormatError,
    NotAnExtension,
)
from .formats import (
    EXPORT_FORMAT,
    WITNESS_FORMAT,
    ExportCheckpoint,
    ExportEntry,
    ExportManifest,
    WitnessRecord,
    export_lines,
    parse_export_line,
    parse_witness_line,
    read_export,
    read_witness,
    witness_line,
)
from .merkle import (
    CHAIN_PREFIX,
    EMPTY_ROOT,
    GENESIS,
    MerkleFrontier,
    chain_hash,
    leaf_hash,
    merkle_root,
    node_hash,
)
from .note import (
    Checkpoint,
    NoteSignature,
    Signer,
    VerifierKey,
    generate_private_key_pem,
    load_private_key_pem,
    parse_checkpoint,
    parse_vkey,
    verify_checkpoint,
)
from .proofs import consistency_proof, extend_checkpoint, prove_extension, verify_consistency

__all__ = [
    "EMPTY_ROOT",
    "ENTRY_VERSION",
    "EXPORT_FORMAT",
    "GENESIS",
    "AuditChainError",
    "ChainError",
    "ChainVerifier",
    "Checkpoint",
    "CheckpointError",
    "EntryError",
    "ExportCheckpoint",
    "ExportEntry",
    "ExportFormatError",
    "ExportManifest",
    "KeyFormatError",
    "MerkleFrontier",
    "NotAnExtension",
    "NoteSignature",
    "Signer",
    "VerifierKey",
    "VerifyReport",
    "WITNESS_FORMAT",
    "WitnessRecord",
    "build_entry",
    "chain_hash",
    "consistency_proof",
    "export_lines",
    "extend_checkpoint",
    "generate_private_key_pem",
    "leaf_hash",
    "load_private_key_pem",
    "merkle_root",
    "node_hash",
    "parse_checkpoint",
    "parse_entry",
    "parse_vkey",
    "parse_witness_line",
    "prove_extension",
    "read_export",
    "read_witness",
    "verify_checkpoint",
    "verify_export",
    "verify_export_file",
    "verify_consistency",
    "verify_rows",
    "witness_line",
]


_sha256 = hashlib.sha256
_MAX_PENDING_CHECKPOINTS = 100_000


# -- the verifier -------------------------------------------------------------------------------------

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


def _same_value(column: Any, hashed: Any) -> bool:
    if isinstance(column, datetime):
        return isinstance(hashed, str) and column == rfc3339_datetime(hashed)
    if isinstance(column, uuid.UUID):
        return str(column) == hashed
    if type(column) is bool or type(hashed) is bool:
        return type(column) is type(hashed) and column == hashed
    return column == hashed


def _inspect_entry(entry: bytes, stored_leaf: bytes | None) -> tuple[bytes, dict[str, Any]]:
    """Stateless checks of one entry (stored leaf hash, canonical bytes, v1 shape).

    Returns (leaf hash, parsed entry); raises `ChainError` without a seq (the caller knows it).
    Separate from the sequential part so worker processes can run it.
    """
    leaf = _sha256(b"\x00" + entry).digest()
    if stored_leaf is not None and stored_leaf != leaf:
        raise ChainError("leaf_hash_mismatch", "stored leaf hash is not the hash of the entry bytes",
                         expected=leaf.hex(), found=bytes(stored_leaf).hex())
    try:
        return leaf, parse_entry(entry)
    except EntryError as exc:
        raise ChainError(exc.reason, exc.detail, expected=exc.expected, found=exc.found) from None


def _at(exc: AuditChainError, pos: int) -> ChainError:
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
            computed, obj = _inspect_entry(entry, leaf)
        except ChainError as exc:
            raise _at(exc, self._size + 1) from None
        origin, chain_id = obj["origin"], obj["chain"]
        foreign = None if origin == self.origin and chain_id == self.chain_id else (origin, chain_id)
        link = self._link(computed, obj["seq"], foreign, chain, seq)
        if columns:
            self._check_columns(obj, columns, self._size + 1)
        self._commit(computed, link)

    def _link(self, leaf: bytes, inner: int, foreign: tuple[str, str] | None, stored_chain: bytes | None,
              record_seq: int | None) -> bytes:
        """The order-dependent checks of an inspected entry; returns its chain hash."""
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
        link = _sha256(CHAIN_PREFIX + self._head + leaf).digest()
        if stored_chain is not None and stored_chain != link:
            raise ChainError("chain_hash_mismatch", f"seq {pos}: stored chain hash does not link to seq {pos - 1}",
                             seq=pos, expected=link.hex(), found=bytes(stored_chain).hex())
        return link

    def _commit(self, leaf: bytes, link: bytes) -> None:
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


@dataclass(frozen=True)
class VerifyReport:
    """Outcome of a verification. `status` is "intact", "tampered" or "unusable" (`ok` iff intact).

    `verified_through` is the largest seq vouched for by a checkpoint that matched the
    recomputed state; `tree_size`, `root` and `chain_head` (hex) describe the last good state.
    """

    ok: bool
    status: str
    reason: str | None
    first_bad_seq: int | None
    detail: str
    entries: int
    checkpoints_verified: int
    verified_through: int | None
    tree_size: int
    root: str | None
    chain_head: str
    signatures_checked: bool

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict of every field."""
        return {"ok": self.ok, "status": self.status, "reason": self.reason, "first_bad_seq": self.first_bad_seq,
                "detail": self.detail, "entries": self.entries, "checkpoints_verified": self.checkpoints_verified,
                "verified_through": self.verified_through, "tree_size": self.tree_size, "root": self.root,
                "chain_head": self.chain_head, "signatures_checked": self.signatures_checked}


class _Run:
    """One verification: a ChainVerifier plus checkpoint bookkeeping, shared by both entry points."""

    def __init__(self, verifier: ChainVerifier, keys: list[VerifierKey] | None):
        self.v = verifier
        self.keys = keys
        self.pending: dict[int, list[Checkpoint]] = {}
        self.n_pending = 0
        self.verified = 0
        self.verified_through: int | None = None
        self.unchecked = 0
        self.entries = 0

    def open(self, note: str) -> Checkpoint:
        return parse_checkpoint(note) if self.keys is None else verify_checkpoint(note, self.keys)

    def offer(self, cp: Checkpoint) -> None:
        """Check a checkpoint now, when the stream reaches its size, or count it as unrecomputable."""
        if cp.origin != self.v.origin:
            raise ChainError("wrong_chain", f"checkpoint at size {cp.size} is for origin {cp.origin!r}",
                             seq=cp.size, expected=self.v.origin, found=cp.origin)
        if cp.size == self.v.size:
            self._check(cp)
        elif cp.size > self.v.size:
            self.n_pending += 1
            if self.n_pending > _MAX_PENDING_CHECKPOINTS:
                raise ExportFormatError("too many checkpoints ahead of the entries")
            self.pending.setdefault(cp.size, []).append(cp)
        else:
            self.unchecked += 1

    def _check(self, cp: Checkpoint) -> None:
        self.v.check_checkpoint(cp)
        self.verified += 1
        self.verified_through = max(self.verified_through or 0, cp.size)

    def add(self, entry: bytes, leaf: bytes | None, chain: bytes | None, seq: int | None,
            columns: Mapping[str, Any] | None = None) -> None:
        self.v.add(entry, leaf, chain, seq=seq, columns=columns)
        self._entry_done()

    def add_inspected(self, leaf: bytes, inner: int, foreign: tuple[str, str] | None, stored_chain: bytes,
                      record_seq: int) -> None:
        self.v._commit(leaf, self.v._link(leaf, inner, foreign, stored_chain, record_seq))
        self._entry_done()

    def add_run(self, first_seq: int, leaves: bytes, stored_chains: bytes, to_seq: int) -> None:
        """Link a run of entries `_inspect_lines` passed (seqs first_seq, first_seq + 1, ...) in order.

        Per entry only what needs the entries before it is left: its position (at most `to_seq`)
        and its chain link; `_link` reports either exactly as `add` would.
        """
        v = self.v
        for i in range(0, len(leaves), 32):
            seq = first_seq + i // 32
            if v.size >= to_seq:
                raise _beyond_to_seq(to_seq, seq)
            leaf = leaves[i:i + 32]
            v._commit(leaf, v._link(leaf, seq, None, stored_chains[i:i + 32], seq))
            self._entry_done()

    def _entry_done(self) -> None:
        self.entries += 1
        if self.pending:
            for cp in self.pending.pop(self.v.size, ()):
                self.n_pending -= 1
                self._check(cp)

    def finish(self, require_coverage: bool, what: str) -> None:
        """End-of-stream checks: checkpoints beyond the data, then (optionally) signed coverage."""
        if self.pending:
            beyond = min(self.pending)
            raise ChainError("truncated", f"a checkpoint covers {beyond} entries but the data ends at seq "
                             f"{self.v.size}", seq=self.v.size + 1, expected=beyond, found=self.v.size)
        if require_coverage and self.entries and (self.verified_through or 0) < self.v.size:
            start = self.verified_through + 1 if self.verified_through is not None else self.v.start_seq
            raise ChainError("no_checkpoint", f"{what} {start}..{self.v.size} are not covered by a verified "
                             "signed checkpoint", seq=start, expected=self.v.size, found=self.verified_through)

    def report(self, error: AuditChainError | None = None, notes: Sequence[str] = ()) -> VerifyReport:
        v = self.v
        if error is None:
            status, reason, first_bad = "intact", None, None
            parts = [f"{self.entries} entries (seq {v.start_seq}..{v.size})" if self.entries else "no entries",
                     f"{self.verified} checkpoint(s) matched"]
            if self.verified_through is not None:
                parts.append(f"verified through seq {self.verified_through}")
        else:
            status = "unusable" if isinstance(error, ExportFormatError) else "tampered"
            reason, detail = error.reason, error.detail
            first_bad = error.seq if status == "tampered" else None
            if reason in ("checkpoint_root_mismatch", "checkpoint_head_mismatch"):
                if self.verified_through is not None:
                    detail += (f"; entries up to seq {self.verified_through} match an earlier verified checkpoint, "
                               f"so the change lies in seq {self.verified_through + 1}..{first_bad}")
                else:
                    detail += f"; the change lies at or before seq {first_bad}"
            parts = [detail]
        return VerifyReport(
            ok=error is None, status=status, reason=reason, first_bad_seq=first_bad, detail="; ".join(parts + [*notes]),
            entries=self.entries, checkpoints_verified=self.verified, verified_through=self.verified_through,
            tree_size=v.size, root=None if v.root is None else v.root.hex(), chain_head=v.chain_head.hex(),
            signatures_checked=self.keys is not None)


def _unusable(detail: str) -> VerifyReport:
    return VerifyReport(ok=False, status="unusable", reason="malformed", first_bad_seq=None, detail=detail,
                        entries=0, checkpoints_verified=0, verified_through=None, tree_size=0, root=None,
                        chain_head=GENESIS.hex(), signatures_checked=False)


# What `_inspect_lines` reports, in stream order (tuples of bytes and ints: cheap to pickle back
# from a worker):
#   (_R_RUN, first_seq, leaves, chain_hashes): consecutive entries that passed every check one line
#       allows on its own; `leaves` and `chain_hashes` are their 32-byte hashes concatenated;
#   (_R_ENTRY, leaf, seq, foreign, chain_hash, record_seq): an entry that does not continue the run
#       before it (its seq, chain or record seq is off), for the main process's `_link` to report;
#   (_R_CHECKPOINT, note), (_R_BAD_ENTRY, reason, detail, expected, found),
#   (_R_MALFORMED, message, line number within the chunk).
_R_RUN, _R_ENTRY, _R_CHECKPOINT, _R_BAD_ENTRY, _R_MALFORMED = range(5)
_Records = list[tuple[Any, ...]]
_Chunks = Generator[tuple[_Records, int], None, None]  # (records of a chunk, lines it had), in order
_BATCH_LINES = 4096  # lines per chunk of an iterable input
_RANGE_BYTES = 1 << 20  # bytes per chunk of a file
_MIN_RANGES_FOR_WORKERS = 4  # below, starting worker processes costs about what they would save


def _inspect_lines(lines: Sequence[str | bytes], origin: str, chain_id: str) -> _Records:
    """Parse a chunk of lines and run the checks that need no earlier line; stops at a bad line.

    Entry checks: line format, leaf hash, canonical bytes, v1 shape, origin and chain, record seq
    equal to the hashed seq, each seq one more than the one before. What is left for the main
    process is where the chunk's first entry sits in the chain and the chain links.
    """
    out: _Records = []
    leaves, links = bytearray(), bytearray()
    first_seq = next_seq = 0

    def end_run() -> None:
        if leaves:
            out.append((_R_RUN, first_seq, bytes(leaves), bytes(links)))
            leaves.clear()
            links.clear()

    for lineno, raw in enumerate(lines, 1):
        try:
            rec = parse_export_line(raw, lineno)
        except ExportFormatError as exc:
            end_run()
            out.append((_R_MALFORMED, exc.message, lineno))
            break
        if type(rec) is ExportEntry:
            try:
                leaf, obj = _inspect_entry(rec.entry, rec.leaf_hash)
            except ChainError as exc:
                end_run()
                out.append((_R_BAD_ENTRY, exc.reason, exc.detail, exc.expected, exc.found))
                break
            seq, own = obj["seq"], obj["origin"] == origin and obj["chain"] == chain_id
            if own and rec.seq == seq and (seq == next_seq or not leaves):
                if not leaves:
                    first_seq = seq
                leaves += leaf
                links += rec.chain_hash
                next_seq = seq + 1
            else:
                end_run()
                out.append((_R_ENTRY, leaf, seq, None if own else (obj["origin"], obj["chain"]), rec.chain_hash,
                            rec.seq))
        elif type(rec) is ExportCheckpoint:
            end_run()
            out.append((_R_CHECKPOINT, rec.note))
        elif rec is not None:
            end_run()
            out.append((_R_MALFORMED, "a second manifest", lineno))
            break
    end_run()
    return out


def _inspect_range(fd: int, start: int, end: int, origin: str, chain_id: str) -> tuple[_Records, int]:
    """`_inspect_lines` over bytes start..end of an open file; returns (records, lines read).

    Reads with `os.pread`, so forked workers share the parent's descriptor without moving its offset.
    """
    lines = os.pread(fd, end - start, start).split(b"\n")
    if not lines[-1]:  # the range ends with a newline (only the file's last line may lack one)
        lines.pop()
    return _inspect_lines(lines, origin, chain_id), len(lines)


def _line_ranges(fh: BinaryIO, start: int, end: int) -> list[tuple[int, int]]:
    """Split bytes start..end of a file into ranges of about `_RANGE_BYTES`, each ending after a newline."""
    bounds = [start]
    while end - bounds[-1] > _RANGE_BYTES:
        fh.seek(bounds[-1] + _RANGE_BYTES - 1)
        fh.readline()  # to the end of the line holding the cut (just the cut if it follows a newline)
        bounds.append(min(fh.tell(), end))
    if bounds[-1] < end:
        bounds.append(end)
    return list(itertools.pairwise(bounds))


def _can_fork() -> bool:
    # Forking a multi-threaded process (e.g. a web server) can deadlock the child.
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def _file_chunks(fh: BinaryIO, start: int, end: int, origin: str, chain_id: str,
                 workers: int) -> _Chunks:
    """`_inspect_range` over the file's ranges, in order; in worker processes for a larger file.

    At most 2 ranges per worker are in flight, so memory stays bounded however large the file.
    """
    ranges = _line_ranges(fh, start, end)
    fd = fh.fileno()
    if workers < 2 or len(ranges) < _MIN_RANGES_FOR_WORKERS or not _can_fork():
        for lo, hi in ranges:
            yield _inspect_range(fd, lo, hi, origin, chain_id)
        return
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))
    window: deque[Future[tuple[_Records, int]]] = deque()
    try:
        for lo, hi in ranges:
            window.append(pool.submit(_inspect_range, fd, lo, hi, origin, chain_id))
            if len(window) >= 2 * workers:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _default_workers() -> int:
    return 2 if (os.cpu_count() or 1) >= 2 else 0


def _beyond_to_seq(to_seq: int, record_seq: int) -> ChainError:
    return ChainError("seq_mismatch", f"entry after the manifest's to_seq {to_seq}", seq=to_seq + 1,
                      expected=to_seq, found=record_seq)


def verify_export(lines: Iterable[str | bytes], vkeys: Sequence[str | VerifierKey] | None = None,
                  trusted_checkpoints: Sequence[str] = ()) -> VerifyReport:
    """Verify an export stream in this process, in bounded memory (a frontier and a head, never all leaves).

    Checks every entry (leaf hash, canonical bytes, seq, chain/origin, chain link) and every
    checkpoint at its size: Merkle root and chain head when the export starts at seq 1; for a
    range export (from_seq > 1) the root cannot be recomputed, so only the chain head - which
    commits to every earlier entry - is checked. `vkeys` pins the signing key(s); without them
    the manifest's `vkey` is used (integrity, not authenticity) and with neither, signatures are
    not checked. With a key, every entry must be covered by a matching signed checkpoint
    (exports always end with one), else `no_checkpoint`. `trusted_checkpoints` are notes the
    caller already trusts (signatures not required): each must match the recomputed state at
    its size, and one beyond the last entry means `truncated`.

    On a checkpoint mismatch `first_bad_seq` is the checkpoint's size (the entries themselves
    are consistent, so the exact edit cannot be located); `verified_through` and the detail
    bound it from below when an earlier checkpoint matched. For a file, `verify_export_file`
    gives the same report using worker processes.
    """
    rest = iter(lines)

    def chunks(m: ExportManifest) -> _Chunks:
        while batch := list(itertools.islice(rest, _BATCH_LINES)):
            yield _inspect_lines(batch, m.origin, m.chain_id), len(batch)

    return _verify_export(rest, chunks, vkeys, trusted_checkpoints)


def verify_export_file(path: str | os.PathLike[str], vkeys: Sequence[str | VerifierKey] | None = None,
                       trusted_checkpoints: Sequence[str] = (), *, workers: int | None = None) -> VerifyReport:
    """`verify_export` of an export file (JSON lines, each ending with a newline), the same report.

    `workers` (default: 2 on a multi-core machine) processes each read their own byte ranges of
    the file and run the per-line checks, so this process only links the entries in order and
    checks the checkpoints. A file that cannot be split (a pipe) is read as a stream. Raises
    `OSError` if the file cannot be read.
    """
    with open(path, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            return verify_export(fh, vkeys, trusted_checkpoints)

        def chunks(m: ExportManifest) -> _Chunks:
            return _file_chunks(fh, fh.tell(), info.st_size, m.origin, m.chain_id,
                                _default_workers() if workers is None else workers)

        return _verify_export(iter(fh.readline, b""), chunks, vkeys, trusted_checkpoints)


def _verify_export(lines: Iterator[str | bytes],
                   chunks: Callable[[ExportManifest], _Chunks],
                   vkeys: Sequence[str | VerifierKey] | None, trusted_checkpoints: Sequence[str]) -> VerifyReport:
    """The verification loop of both entry points: the manifest from `lines`, then `chunks(manifest)`
    yields (`_inspect_lines` records, lines read) for the rest of the export, in order."""
    try:
        manifest, lineno = None, 0
        for lineno, raw in enumerate(lines, 1):
            rec = parse_export_line(raw, lineno)
            if rec is not None:
                if type(rec) is not ExportManifest:
                    raise ExportFormatError("the first line must be the manifest", line=lineno)
                manifest = rec
                break
        if manifest is None:
            raise ExportFormatError("empty export: no manifest")
        if vkeys is not None:
            keys: list[VerifierKey] | None = [k if isinstance(k, VerifierKey) else parse_vkey(k) for k in vkeys]
        else:
            keys = [parse_vkey(manifest.vkey)] if manifest.vkey else None
        trusted = [parse_checkpoint(n) for n in trusted_checkpoints]
    except (ExportFormatError, KeyFormatError) as exc:
        return _unusable(str(exc))
    except CheckpointError as exc:
        return _unusable(f"trusted checkpoint: {exc}")
    notes = []
    if vkeys is None:
        notes.append("signatures checked against the export's own vkey (not pinned)" if keys is not None
                     else "signatures NOT checked: no verifier key")
    m = manifest
    run = _Run(ChainVerifier(m.origin, m.chain_id, start_seq=m.from_seq, prev_chain_hash=m.prev_chain_hash), keys)
    results = chunks(m)
    try:
        if m.from_seq == 1 and m.prev_chain_hash != GENESIS:
            raise ChainError("chain_hash_mismatch", "an export from seq 1 must start at the genesis hash", seq=1,
                             expected=GENESIS.hex(), found=m.prev_chain_hash.hex())
        for cp in trusted:
            if cp.origin != m.origin:
                raise ChainError("wrong_chain", f"trusted checkpoint is for origin {cp.origin!r}", seq=m.from_seq,
                                 expected=m.origin, found=cp.origin)
            run.offer(cp)
        if run.unchecked:
            notes.append(f"{run.unchecked} trusted checkpoint(s) precede the export and were not checked")
            run.unchecked = 0
        for records, n_lines in results:
            for rec in records:
                if rec[0] == _R_RUN:
                    run.add_run(rec[1], rec[2], rec[3], m.to_seq)
                elif rec[0] == _R_ENTRY:
                    if run.v.size >= m.to_seq:
                        raise _beyond_to_seq(m.to_seq, rec[5])
                    run.add_inspected(*rec[1:])
                elif rec[0] == _R_CHECKPOINT:
                    run.offer(run.open(rec[1]))
                elif rec[0] == _R_BAD_ENTRY:
                    raise _at(ChainError(rec[1], rec[2], expected=rec[3], found=rec[4]), run.v.size + 1)
                else:
                    raise ExportFormatError(rec[1], line=lineno + rec[2])
            lineno += n_lines
        if run.unchecked:
            notes.append(f"{run.unchecked} checkpoint line(s) came after their size had passed and were not "
                         "recomputed")
        if run.v.size < m.to_seq and not run.pending:
            raise ChainError("truncated", f"the manifest promises entries through seq {m.to_seq}",
                             seq=run.v.size + 1, expected=m.to_seq, found=run.v.size)
        run.finish(keys is not None, "entries")
    except (ChainError, CheckpointError, ExportFormatError) as exc:
        return run.report(exc, notes)
    finally:
        results.close()
    return run.report(notes=notes)


def verify_rows(rows: Iterable[tuple[int, bytes, bytes, bytes, Mapping[str, Any] | None]], chain_id: str,
                origin: str, checkpoints: Iterable[str] = (), vkeys: Sequence[str | VerifierKey] | None = None, *,
                start_seq: int = 1, prev_chain_hash: bytes = GENESIS, frontier: MerkleFrontier | None = None,
                project: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None,
                require_checkpoint: bool = False) -> VerifyReport:
    """Verify stored rows ``(seq, entry, leaf_hash, chain_hash, columns)`` in seq order.

    The same loop as `verify_export`, plus each row's query `columns` must equal the values
    inside the hashed bytes (`column_mismatch`). A column key is an entry key, a dotted path
    (``"subject.id"``) or an alias (``event_type``, ``chain_id``, ``subject_type``,
    ``subject_id``, ``actor_kind``, ``actor_id``); a missing path reads as
    None; a datetime column compares with the entry's RFC 3339 `ts`. For derived columns pass
    `project(entry) -> {column: expected value}` instead. `checkpoints` (notes in ascending
    size order, consumed lazily) are signature-checked when `vkeys` is given and compared at
    their size; one beyond the last row means `truncated`. Rows after the last checkpoint are
    normal in a live log, so coverage is only enforced with `require_checkpoint`.
    """
    try:
        keys = None if vkeys is None else [k if isinstance(k, VerifierKey) else parse_vkey(k) for k in vkeys]
    except KeyFormatError as exc:
        return _unusable(str(exc))
    run = _Run(ChainVerifier(origin, chain_id, start_seq=start_seq, prev_chain_hash=prev_chain_hash,
                             frontier=frontier, project=project), keys)
    notes: list[str] = [] if keys is not None else ["signatures NOT checked: no verifier key"]
    notes_iter = iter(checkpoints)

    def next_checkpoint() -> Checkpoint | None:
        note = next(notes_iter, None)
        return None if note is None else run.open(note)

    try:
        nxt = next_checkpoint()
        while nxt is not None and nxt.size <= run.v.size:
            run.offer(nxt)
            nxt = next_checkpoint()
        for seq, entry, leaf, link, columns in rows:
            run.add(bytes(entry), None if leaf is None else bytes(leaf), None if link is None else bytes(link), seq,
                    columns)
            while nxt is not None and nxt.size <= run.v.size:
                run.offer(nxt)
                nxt = next_checkpoint()
        while nxt is not None:
            run.offer(nxt)
            nxt = next_checkpoint()
        if run.unchecked:
            notes.append(f"{run.unchecked} checkpoint(s) out of size order were not recomputed")
        run.finish(require_checkpoint, "rows")
        if run.verified_through is not None and run.verified_through < run.v.size:
            notes.append(f"rows {run.verified_through + 1}..{run.v.size} are not yet covered by a checkpoint")
    except (ChainError, CheckpointError, ExportFormatError) as exc:
        return run.report(exc, notes)
    return run.report(notes=notes)
