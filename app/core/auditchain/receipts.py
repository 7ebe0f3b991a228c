"""Erasure receipts: a signed statement that one store no longer holds one memory.

A receipt is a C2SP signed note (the same Ed25519 key and key name as the log's checkpoints) whose
text is one line of canonical JSON (sorted keys, ASCII only, so no store name can break a line):

    {"audit_seq":..,"backend_id":..,"confirmed_at":..,"event":..,"kind":"memwarden/erasure-receipt/v1",
     "memory_id":..,"origin":..,"store":..}

`origin` is the chain's log (`<audit origin>/tenant:<id>`), `audit_seq` the entry of that chain
whose event ended the memory (`event`, one of `ERASING_EVENTS`), `confirmed_at` when the store was
read back after its delete and no longer returned the item. Ids only: never content.

Offline, a receipt is checked twice: its signature (`verify_receipt`) and, against a verified
export of the chain, that `audit_seq` is there and is an ending event of that very memory
(`check_against_entry`). Pure: no database, so the offline verifier imports it alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .entry import parse_entry
from .errors import AuditChainError, CheckpointError, ExportFormatError
from .note import Signer, VerifierKey, _parse_signatures, parse_vkeys

RECEIPT_KIND = "memwarden/erasure-receipt/v1"
ERASING_EVENTS = frozenset({
    "memory.forgotten", "memory.hard_deleted", "memory.merged_into", "memory.expired.forget",
    "memory.expired.archive", "memory.superseded", "memory.quarantined",
})
"""Audit events after which a memory is no longer live, so every store must give it up."""

_FIELDS = frozenset({"kind", "origin", "memory_id", "store", "backend_id", "confirmed_at", "audit_seq", "event"})
_MAX_NOTE_CHARS = 1 << 14


class ReceiptError(AuditChainError):
    """`receipt_malformed`, `receipt_unknown_key`, `receipt_bad_signature`, `receipt_seq_missing`,
    `receipt_not_an_ending` (the cited entry is not an ending event of the receipt's memory)."""


@dataclass(frozen=True)
class Receipt:
    origin: str
    memory_id: str
    store: str
    backend_id: str
    confirmed_at: str
    audit_seq: int
    event: str
    note: str

    def to_json(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id, "store": self.store, "backend_id": self.backend_id,
                "confirmed_at": self.confirmed_at, "audit_seq": self.audit_seq, "event": self.event,
                "origin": self.origin, "note": self.note}


def receipt_text(*, origin: str, memory_id: str, store: str, backend_id: str, confirmed_at: str, audit_seq: int,
                 event: str) -> str:
    """The signed text of a receipt (one line, ending in a newline)."""
    doc = {"kind": RECEIPT_KIND, "origin": origin, "memory_id": memory_id, "store": store, "backend_id": backend_id,
           "confirmed_at": confirmed_at, "audit_seq": audit_seq, "event": event}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n"


def sign_receipt(signer: Signer, **fields: Any) -> str:
    """A signed receipt note (fields as `receipt_text` takes them)."""
    return signer.sign_note(receipt_text(**fields))


def parse_receipt(note: str) -> Receipt:
    """Parse a receipt note strictly, without checking its signature; raises `ReceiptError`."""
    if not isinstance(note, str) or len(note) > _MAX_NOTE_CHARS:
        raise ReceiptError("receipt_malformed", "a receipt is a string of at most 16 KiB")
    split = note.find("\n\n")
    if split < 0:
        raise ReceiptError("receipt_malformed", "no blank line between text and signatures")
    text = note[: split + 1]
    try:
        doc = json.loads(text)
    except ValueError:
        raise ReceiptError("receipt_malformed", "the receipt text is not JSON") from None
    if type(doc) is not dict or doc.keys() != _FIELDS or doc["kind"] != RECEIPT_KIND:
        raise ReceiptError("receipt_malformed", f"the receipt text must be a {RECEIPT_KIND} object")
    if type(doc["audit_seq"]) is not int or not all(type(doc[k]) is str for k in _FIELDS - {"audit_seq"}):
        raise ReceiptError("receipt_malformed", "audit_seq must be an integer and every other field a string")
    fields = {k: doc[k] for k in _FIELDS - {"kind"}}
    if receipt_text(**fields) != text:
        raise ReceiptError("receipt_malformed", "the receipt text is not in canonical form")
    return Receipt(**fields, note=note)


def verify_receipt(note: str, vkeys: Iterable[str | VerifierKey]) -> Receipt:
    """Parse a receipt and check it carries a valid signature by a trusted key (C2SP: signatures
    by other keys are ignored; a bad one by a trusted key is an error)."""
    receipt = parse_receipt(note)
    keys = parse_vkeys(vkeys)
    split = note.find("\n\n")
    try:
        signatures = _parse_signatures(note[split + 2:], 0)
    except CheckpointError as exc:
        raise ReceiptError("receipt_malformed", exc.detail) from None
    message = note[: split + 1].encode("utf-8")
    verified = 0
    for sig in signatures:
        for key in keys:
            if key.name == sig.name and key.key_id == sig.key_id:
                if not key.verify(sig.signature, message):
                    raise ReceiptError("receipt_bad_signature", f"signature by {key.name}+{key.key_id.hex()} "
                                                                "does not verify", seq=receipt.audit_seq)
                verified += 1
    if not verified:
        raise ReceiptError("receipt_unknown_key", "no signature by a trusted key", seq=receipt.audit_seq)
    return receipt


def check_against_entry(receipt: Receipt, origin: str, entry: bytes | None) -> None:
    """Hold a (verified) receipt to the chain it cites: `entry` is the exact bytes of the entry at
    `receipt.audit_seq` of the verified export whose origin is `origin` (None: not in the export)."""
    if receipt.origin != origin:
        raise ReceiptError("receipt_malformed", f"the receipt is of {receipt.origin}, the log of {origin}",
                           seq=receipt.audit_seq)
    if entry is None:
        raise ReceiptError("receipt_seq_missing", f"seq {receipt.audit_seq} is not in the export",
                           seq=receipt.audit_seq)
    parsed = parse_entry(entry)
    subject = parsed["subject"]
    if (parsed["type"] != receipt.event or parsed["type"] not in ERASING_EVENTS
            or subject.get("type") != "memory" or subject.get("id") != receipt.memory_id):
        raise ReceiptError("receipt_not_an_ending", f"seq {receipt.audit_seq} is {parsed['type']} of "
                                                    f"{subject.get('id')}, not an ending of {receipt.memory_id}",
                           seq=receipt.audit_seq)


def read_receipt_lines(lines: Iterable[str | bytes]) -> list[tuple[int, str | None, str | None]]:
    """(line number, note, None) for each `{"kind": "erasure_receipt", "note": ...}` line, or
    (line number, None, why) for a line that is not one; blank lines are skipped."""
    out: list[tuple[int, str | None, str | None]] = []
    for lineno, raw in enumerate(lines, 1):
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError:
            out.append((lineno, None, "not a JSON line"))
            continue
        if type(obj) is not dict or obj.keys() != {"kind", "note"} or obj["kind"] != "erasure_receipt" \
                or type(obj["note"]) is not str:
            out.append((lineno, None, "not an erasure_receipt line (exactly kind and note)"))
            continue
        out.append((lineno, obj["note"], None))
    return out


def check_receipts(receipt_lines: Iterable[str | bytes], export_lines: Iterable[str | bytes],
                   vkeys: Iterable[str | VerifierKey] | None = None) -> dict[str, Any]:
    """Check every receipt of a receipts file against a chain export that verified: the signature
    (by `vkeys`, else the export's own key) and the cited entry. A report: `ok`, `checked` and
    each `failures` item's line, memory id, reason code and detail."""
    from .formats import ExportEntry, ExportManifest, read_export

    parsed = read_receipt_lines(receipt_lines)
    records = iter(read_export(export_lines))
    manifest = next(records)
    if not isinstance(manifest, ExportManifest):  # read_export yields the manifest first or raises
        raise ExportFormatError("the export does not start with its manifest")
    keys = list(vkeys) if vkeys else ([manifest.vkey] if manifest.vkey else [])
    failures: list[dict[str, Any]] = []
    good: list[tuple[int, Receipt]] = []
    for lineno, note, why in parsed:
        if note is None:
            failures.append({"line": lineno, "memory_id": None, "reason": "receipt_malformed", "detail": why})
            continue
        try:
            good.append((lineno, verify_receipt(note, keys)))
        except (ReceiptError, ValueError) as exc:
            failures.append({"line": lineno, "memory_id": None, "reason": getattr(exc, "reason", "receipt_malformed"),
                             "detail": getattr(exc, "detail", str(exc))})
    wanted = {r.audit_seq for _, r in good}
    entries: dict[int, bytes] = {}
    for record in records:
        if isinstance(record, ExportEntry) and record.seq in wanted:
            entries[record.seq] = record.entry
    for lineno, receipt in good:
        try:
            check_against_entry(receipt, manifest.origin, entries.get(receipt.audit_seq))
        except AuditChainError as exc:
            failures.append({"line": lineno, "memory_id": receipt.memory_id, "reason": exc.reason,
                             "detail": exc.detail})
    failures.sort(key=lambda f: f["line"])
    return {"ok": not failures, "checked": len(parsed), "confirmed": len(parsed) - len(failures),
            "failures": failures}
