"""The two JSON-line formats the log leaves its database in: witness records and exports.

Witness record (`witness_line`, one per signed checkpoint): ``{"format":
"memwarden-audit-witness/v1","origin","size","note"}`` plus, when there was an earlier signed
checkpoint, ``"consistency": {"from_size", "proof": [hex, ...]}``.

Export (JSONL, ASCII, one object per line; `export_lines` yields lines without "\\n"):
line 1 ``{"kind":"manifest","format":"memwarden-audit-export/v1","origin","chain_id","from_seq",
"to_seq","prev_chain_hash","exported_at","vkey"}``; then ``{"kind":"entry","seq","entry"
(base64 of the exact bytes),"leaf_hash","chain_hash"}`` in seq order; ``{"kind":"checkpoint",
"note"}`` lines follow the entry at their size (those beyond the last entry come last). The
verifier accepts checkpoint lines anywhere after the manifest; one that arrives after the
stream has passed its size cannot be recomputed in bounded memory and is only counted.
"""

from __future__ import annotations

import binascii
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .. import jsontext
from .errors import ChainError, CheckpointError, ExportFormatError
from .note import Checkpoint, VerifierKey, b64, parse_checkpoint, parse_vkeys, verify_checkpoint
from .proofs import verify_consistency

EXPORT_FORMAT = "memwarden-audit-export/v1"
WITNESS_FORMAT = "memwarden-audit-witness/v1"


# -- witness records ---------------------------------------------------------------------------------


def witness_line(note: str, *, from_size: int | None = None, proof: Sequence[bytes] = ()) -> str:
    """One witness record (a JSON line, no newline): the signed checkpoint and, when there was an
    earlier signed checkpoint, the consistency proof from its size."""
    cp = parse_checkpoint(note)
    obj: dict[str, Any] = {"format": WITNESS_FORMAT, "origin": cp.origin, "size": cp.size, "note": note}
    if from_size is not None:
        obj["consistency"] = {"from_size": from_size, "proof": [bytes(h).hex() for h in proof]}
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class WitnessRecord:
    """One parsed witness line."""

    checkpoint: Checkpoint
    note: str
    from_size: int | None
    proof: tuple[bytes, ...]
    line: int


def parse_witness_line(raw: str | bytes, lineno: int = 0) -> WitnessRecord | None:
    """One witness line as a record (None for a blank line); raises `ExportFormatError`."""
    text = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else raw
    if not text.strip():
        return None
    try:
        obj = jsontext.loads(text)
        if type(obj) is not dict or obj.get("format") != WITNESS_FORMAT or not isinstance(obj.get("note"), str):
            raise ValueError(f"not a {WITNESS_FORMAT} record")
        cp = parse_checkpoint(obj["note"])
        if obj.get("origin") != cp.origin or obj.get("size") != cp.size:
            raise ValueError("origin/size disagree with the note")
        from_size, proof = None, tuple[bytes, ...]()
        if "consistency" in obj:
            step = obj["consistency"]
            from_size = step["from_size"]
            if type(from_size) is not int or not 0 <= from_size <= cp.size:
                raise ValueError("consistency.from_size out of range")
            proof = tuple(bytes.fromhex(h) for h in step["proof"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, CheckpointError) as exc:
        raise ExportFormatError(f"witness record: {exc}", line=lineno) from None
    return WitnessRecord(cp, obj["note"], from_size, proof, lineno)


def read_witness(lines: Iterable[str | bytes], origin: str,
                 vkeys: Sequence[str | VerifierKey] | None = None) -> WitnessRecord | None:
    """The record of the last (largest) witnessed checkpoint of `origin`, after checking the records of that
    origin against each other: signatures (when `vkeys` is given), one root per size, and each
    record's consistency proof from an earlier witnessed size. None if there is none.

    Raises `ExportFormatError` for a line that is not a witness record, `CheckpointError` for a
    bad signature and `ChainError` (`witness_inconsistent`, seq = the later size) for two
    witnessed checkpoints that cannot both describe one append-only log.
    """
    keys = None if vkeys is None else parse_vkeys(vkeys)
    by_size: dict[int, WitnessRecord] = {}
    for lineno, raw in enumerate(lines, 1):
        rec = parse_witness_line(raw, lineno)
        if rec is None or rec.checkpoint.origin != origin:
            continue
        if keys is not None:
            verify_checkpoint(rec.note, keys)
        seen = by_size.get(rec.checkpoint.size)
        if seen is not None and (seen.checkpoint.root, seen.checkpoint.chain_head) != (
                rec.checkpoint.root, rec.checkpoint.chain_head):
            raise ChainError("witness_inconsistent", f"witness lines {seen.line} and {lineno} sign different trees "
                             f"of size {rec.checkpoint.size}", seq=rec.checkpoint.size)
        if seen is None or rec.from_size is not None:
            by_size[rec.checkpoint.size] = rec
    for rec in by_size.values():
        base = by_size.get(rec.from_size) if rec.from_size is not None else None
        if base is not None and not verify_consistency(base.checkpoint.size, rec.checkpoint.size,
                                                       base.checkpoint.root, rec.checkpoint.root, rec.proof):
            raise ChainError("witness_inconsistent", f"witness line {rec.line}: size {rec.checkpoint.size} is not a "
                             f"consistent extension of the witnessed size {base.checkpoint.size}",
                             seq=rec.checkpoint.size, expected=base.checkpoint.root.hex(),
                             found=rec.checkpoint.root.hex())
    return by_size[max(by_size)] if by_size else None


# -- export format ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportManifest:
    """First line of an export. Unsigned: only the checkpoints vouch for what follows."""

    origin: str
    chain_id: str
    from_seq: int
    to_seq: int
    prev_chain_hash: bytes
    exported_at: str
    vkey: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The manifest line's object."""
        return {"kind": "manifest", "format": EXPORT_FORMAT, "origin": self.origin, "chain_id": self.chain_id,
                "from_seq": self.from_seq, "to_seq": self.to_seq, "prev_chain_hash": self.prev_chain_hash.hex(),
                "exported_at": self.exported_at, "vkey": self.vkey}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ExportManifest:
        """Validate a manifest object (``kind``/``format`` optional, checked if present)."""
        if obj.get("kind", "manifest") != "manifest" or obj.get("format", EXPORT_FORMAT) != EXPORT_FORMAT:
            raise ExportFormatError(f"not a {EXPORT_FORMAT} manifest")
        try:
            origin, chain_id = obj["origin"], obj["chain_id"]
            from_seq, to_seq = obj["from_seq"], obj["to_seq"]
            prev, exported_at, vkey = obj["prev_chain_hash"], obj["exported_at"], obj.get("vkey")
        except KeyError as exc:
            raise ExportFormatError(f"manifest lacks {exc}") from None
        if not (isinstance(origin, str) and origin and isinstance(chain_id, str) and chain_id):
            raise ExportFormatError("manifest origin and chain_id must be non-empty strings")
        if type(from_seq) is not int or type(to_seq) is not int or from_seq < 1 or to_seq < from_seq - 1:
            raise ExportFormatError("manifest needs integers 1 <= from_seq <= to_seq + 1")
        try:
            prev = bytes(prev) if isinstance(prev, (bytes, bytearray, memoryview)) else bytes.fromhex(prev)
        except (TypeError, ValueError):
            prev = b""
        if len(prev) != 32:
            raise ExportFormatError("manifest prev_chain_hash must be 32 bytes of hex")
        if not isinstance(exported_at, str) or not (vkey is None or isinstance(vkey, str)):
            raise ExportFormatError("manifest exported_at and vkey must be strings")
        return cls(origin, chain_id, from_seq, to_seq, prev, exported_at, vkey or None)


class ExportEntry(NamedTuple):
    """An entry line: the exact entry bytes and the stored hashes (unverified)."""

    seq: int
    entry: bytes
    leaf_hash: bytes
    chain_hash: bytes


@dataclass(frozen=True)
class ExportCheckpoint:
    """A checkpoint line (note text, unverified)."""

    note: str


def _line(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"))


def export_lines(manifest: Mapping[str, Any] | ExportManifest,
                 entries: Iterable[tuple[int, bytes, bytes, bytes]],
                 checkpoints: Iterable[str]) -> Iterator[str]:
    """Stream an export, one JSON line (without newline) at a time, in bounded memory.

    `entries` are ``(seq, entry_bytes, leaf_hash, chain_hash)`` in seq order, written as given
    (an export must show a tampered store as it is). Each checkpoint is placed right after the
    entry at its size so a streaming verifier can check it; checkpoints are held in memory.
    """
    m = manifest if isinstance(manifest, ExportManifest) else ExportManifest.from_json(manifest)
    notes = sorted(((parse_checkpoint(n).size, n) for n in checkpoints), key=lambda t: t[0])
    i = 0
    yield _line(m.to_json())
    while i < len(notes) and notes[i][0] < m.from_seq:
        yield _line({"kind": "checkpoint", "note": notes[i][1]})
        i += 1
    for seq, entry, leaf, link in entries:
        seq = int(seq)
        yield (f'{{"kind":"entry","seq":{seq},"entry":"{b64(bytes(entry))}",'
               f'"leaf_hash":"{bytes(leaf).hex()}","chain_hash":"{bytes(link).hex()}"}}')
        while i < len(notes) and notes[i][0] <= seq:
            yield _line({"kind": "checkpoint", "note": notes[i][1]})
            i += 1
    for _, note in notes[i:]:
        yield _line({"kind": "checkpoint", "note": note})


# Entry lines exactly as `export_lines` writes them; every field is digits, base64 or hex, so
# no JSON escape can hide in a group. Other spellings take the general JSON path.
_ENTRY_LINE = re.compile(r'\{"kind":"entry","seq":(0|[1-9][0-9]{0,18}),"entry":"([A-Za-z0-9+/=]*)",'
                         r'"leaf_hash":"([0-9a-f]{64})","chain_hash":"([0-9a-f]{64})"\}\r?\n?')
_ENTRY_LINE_BYTES = re.compile(_ENTRY_LINE.pattern.encode())  # for lines read as bytes: no decoding


def parse_export_line(raw: str | bytes, lineno: int) -> ExportManifest | ExportEntry | ExportCheckpoint | None:
    """One export line as a record (None for a blank line); raises `ExportFormatError`."""
    m = _ENTRY_LINE.fullmatch(raw) if isinstance(raw, str) else _ENTRY_LINE_BYTES.fullmatch(raw)
    if m is not None:
        try:
            entry = binascii.a2b_base64(m[2], strict_mode=True)
        except binascii.Error:
            raise ExportFormatError("entry is not valid base64", line=lineno) from None
        return ExportEntry(int(m[1]), entry, binascii.a2b_hex(m[3]), binascii.a2b_hex(m[4]))
    if not isinstance(raw, str):
        try:
            raw = bytes(raw).decode("utf-8")
        except (UnicodeDecodeError, TypeError):
            raise ExportFormatError("not UTF-8 text", line=lineno) from None
    line = raw.rstrip("\r\n")
    if not line.strip():
        return None
    try:
        obj = jsontext.loads(line)
    except ValueError:
        raise ExportFormatError("not a JSON line", line=lineno) from None
    if type(obj) is not dict:
        raise ExportFormatError("not a JSON object", line=lineno)
    kind = obj.get("kind")
    if kind == "entry":
        return _entry_from_obj(obj, lineno)
    if kind == "checkpoint":
        if obj.keys() != {"kind", "note"} or not isinstance(obj["note"], str):
            raise ExportFormatError("checkpoint line must have exactly kind and note", line=lineno)
        return ExportCheckpoint(obj["note"])
    if kind == "manifest":
        if obj.get("format") != EXPORT_FORMAT:
            raise ExportFormatError(f"manifest format must be {EXPORT_FORMAT!r}", line=lineno)
        try:
            return ExportManifest.from_json(obj)
        except ExportFormatError as exc:
            raise ExportFormatError(exc.message, line=lineno) from None
    raise ExportFormatError(f"unexpected line kind {kind!r}", line=lineno)


def _entry_from_obj(obj: dict[str, Any], lineno: int) -> ExportEntry:
    if obj.keys() != {"kind", "seq", "entry", "leaf_hash", "chain_hash"}:
        raise ExportFormatError("entry line must have exactly kind, seq, entry, leaf_hash, chain_hash", line=lineno)
    seq = obj["seq"]
    try:
        if type(seq) is not int:
            raise ValueError("seq must be an integer")
        entry = binascii.a2b_base64(obj["entry"], strict_mode=True)
        leaf, link = bytes.fromhex(obj["leaf_hash"]), bytes.fromhex(obj["chain_hash"])
    except (TypeError, ValueError) as exc:
        raise ExportFormatError(f"bad entry line: {exc}", line=lineno) from None
    if len(leaf) != 32 or len(link) != 32:
        raise ExportFormatError("leaf_hash and chain_hash must be 32 bytes of hex", line=lineno)
    return ExportEntry(seq, entry, leaf, link)


def read_export(lines: Iterable[str | bytes]) -> Iterator[ExportManifest | ExportEntry | ExportCheckpoint]:
    """Parse export lines lazily: the manifest first, then entries and checkpoints as they come.

    Raises `ExportFormatError` (with the line number) at the first line not in the format.
    """
    seen = False
    for lineno, raw in enumerate(lines, 1):
        rec = parse_export_line(raw, lineno)
        if rec is None:
            continue
        if (type(rec) is ExportManifest) is seen:
            raise ExportFormatError("a second manifest" if seen else "the first line must be the manifest",
                                    line=lineno)
        seen = True
        yield rec
    if not seen:
        raise ExportFormatError("empty export: no manifest")
