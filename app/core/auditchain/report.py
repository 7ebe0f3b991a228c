"""One verification run: a ChainVerifier plus the bookkeeping of the checkpoints offered to it
(checked at their size, held until the stream reaches it, or counted as unrecomputable), and the
`VerifyReport` it ends in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import AuditChainError, ChainError, ExportFormatError
from .merkle import GENESIS
from .note import Checkpoint, VerifierKey, parse_checkpoint, verify_checkpoint
from .verifier import ChainVerifier

_MAX_PENDING_CHECKPOINTS = 100_000


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


class VerifyRun:
    """One verification: a ChainVerifier plus checkpoint bookkeeping, shared by every entry point."""

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
        """Parse a checkpoint note, checking its signature when the run has keys."""
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
        """Check and accept the next entry (`ChainVerifier.add`)."""
        self.v.add(entry, leaf, chain, seq=seq, columns=columns)
        self._entry_done()

    def add_inspected(self, leaf: bytes, inner: int, foreign: tuple[str, str] | None, stored_chain: bytes,
                      record_seq: int) -> None:
        """Accept the next entry, already through `inspect_entry` (see `ChainVerifier.link`)."""
        self.v.commit(leaf, self.v.link(leaf, inner, foreign, stored_chain, record_seq))
        self._entry_done()

    def add_run(self, first_seq: int, leaves: bytes, stored_chains: bytes, to_seq: int) -> None:
        """Link a run of entries `inspect_lines` passed (seqs first_seq, first_seq + 1, ...) in order.

        Per entry only what needs the entries before it is left: its position (at most `to_seq`)
        and its chain link; `link` reports either exactly as `add` would.
        """
        v = self.v
        for i in range(0, len(leaves), 32):
            seq = first_seq + i // 32
            if v.size >= to_seq:
                raise beyond_to_seq_error(to_seq, seq)
            leaf = leaves[i:i + 32]
            v.commit(leaf, v.link(leaf, seq, None, stored_chains[i:i + 32], seq))
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
        """The report of the run: intact, or the `error` that ended it; `notes` are appended to the detail."""
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


def unusable_report(detail: str) -> VerifyReport:
    """The report of input that could not be verified at all (no manifest, a bad key, ...)."""
    return VerifyReport(ok=False, status="unusable", reason="malformed", first_bad_seq=None, detail=detail,
                        entries=0, checkpoints_verified=0, verified_through=None, tree_size=0, root=None,
                        chain_head=GENESIS.hex(), signatures_checked=False)


def beyond_to_seq_error(to_seq: int, record_seq: int) -> ChainError:
    """The error for an entry past the last seq an export's manifest promised."""
    return ChainError("seq_mismatch", f"entry after the manifest's to_seq {to_seq}", seq=to_seq + 1,
                      expected=to_seq, found=record_seq)
