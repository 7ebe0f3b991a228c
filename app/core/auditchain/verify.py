"""The verifier's entry points: `verify_export` (an export stream) and `verify_rows` (stored rows),
each a `VerifyRun` over a `ChainVerifier`, in bounded memory.

An export is verified in chunks: `inspect_lines` runs every check one line allows on its own
(in this process, or in workers - see `fileverify`), and `verify_export_chunks` links the
results in order and checks the checkpoints.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .errors import ChainError, CheckpointError, ExportFormatError, KeyFormatError
from .formats import ExportCheckpoint, ExportEntry, ExportManifest, parse_export_line
from .merkle import GENESIS, MerkleFrontier
from .note import Checkpoint, VerifierKey, parse_checkpoint, parse_vkey, parse_vkeys
from .report import VerifyReport, VerifyRun, beyond_to_seq_error, unusable_report
from .verifier import ChainVerifier, chain_error_at, inspect_entry

# What `inspect_lines` reports, in stream order (tuples of bytes and ints: cheap to pickle back
# from a worker):
#   (_R_RUN, first_seq, leaves, chain_hashes): consecutive entries that passed every check one line
#       allows on its own; `leaves` and `chain_hashes` are their 32-byte hashes concatenated;
#   (_R_ENTRY, leaf, seq, foreign, chain_hash, record_seq): an entry that does not continue the run
#       before it (its seq, chain or record seq is off), for `ChainVerifier.link` to report;
#   (_R_CHECKPOINT, note), (_R_BAD_ENTRY, reason, detail, expected, found),
#   (_R_MALFORMED, message, line number within the chunk).
_R_RUN, _R_ENTRY, _R_CHECKPOINT, _R_BAD_ENTRY, _R_MALFORMED = range(5)
Records = list[tuple[Any, ...]]  # what `inspect_lines` returns
Chunks = Generator[tuple[Records, int], None, None]  # (records of a chunk, lines it had), in order
_BATCH_LINES = 4096  # lines per chunk of an iterable input


def inspect_lines(lines: Sequence[str | bytes], origin: str, chain_id: str) -> Records:
    """Parse a chunk of lines and run the checks that need no earlier line; stops at a bad line.

    Entry checks: line format, leaf hash, canonical bytes, v1 shape, origin and chain, record seq
    equal to the hashed seq, each seq one more than the one before. What is left for the main
    process is where the chunk's first entry sits in the chain and the chain links.
    """
    out: Records = []
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
                leaf, obj = inspect_entry(rec.entry, rec.leaf_hash)
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

    def chunks(m: ExportManifest) -> Chunks:
        while batch := list(itertools.islice(rest, _BATCH_LINES)):
            yield inspect_lines(batch, m.origin, m.chain_id), len(batch)

    return verify_export_chunks(rest, chunks, vkeys, trusted_checkpoints)


def verify_export_chunks(lines: Iterator[str | bytes],
                   chunks: Callable[[ExportManifest], Chunks],
                   vkeys: Sequence[str | VerifierKey] | None, trusted_checkpoints: Sequence[str]) -> VerifyReport:
    """The verification loop of both entry points: the manifest from `lines`, then `chunks(manifest)`
    yields (`inspect_lines` records, lines read) for the rest of the export, in order."""
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
            keys: list[VerifierKey] | None = parse_vkeys(vkeys)
        else:
            keys = [parse_vkey(manifest.vkey)] if manifest.vkey else None
        trusted = [parse_checkpoint(n) for n in trusted_checkpoints]
    except (ExportFormatError, KeyFormatError) as exc:
        return unusable_report(str(exc))
    except CheckpointError as exc:
        return unusable_report(f"trusted checkpoint: {exc}")
    notes = []
    if vkeys is None:
        notes.append("signatures checked against the export's own vkey (not pinned)" if keys is not None
                     else "signatures NOT checked: no verifier key")
    m = manifest
    run = VerifyRun(ChainVerifier(m.origin, m.chain_id, start_seq=m.from_seq, prev_chain_hash=m.prev_chain_hash), keys)
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
            for row in records:
                if row[0] == _R_RUN:
                    run.add_run(row[1], row[2], row[3], m.to_seq)
                elif row[0] == _R_ENTRY:
                    if run.v.size >= m.to_seq:
                        raise beyond_to_seq_error(m.to_seq, row[5])
                    run.add_inspected(*row[1:])
                elif row[0] == _R_CHECKPOINT:
                    run.offer(run.open(row[1]))
                elif row[0] == _R_BAD_ENTRY:
                    raise chain_error_at(ChainError(row[1], row[2], expected=row[3], found=row[4]), run.v.size + 1)
                else:
                    raise ExportFormatError(row[1], line=lineno + row[2])
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
        keys = None if vkeys is None else parse_vkeys(vkeys)
    except KeyFormatError as exc:
        return unusable_report(str(exc))
    run = VerifyRun(ChainVerifier(origin, chain_id, start_seq=start_seq, prev_chain_hash=prev_chain_hash,
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
