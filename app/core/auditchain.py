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

import base64
import binascii
import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .canonical import CanonicalizationError, NotCanonicalError, canonical_json, parse_canonical

__all__ = [
    "GENESIS", "EMPTY_ROOT", "ENTRY_VERSION", "EXPORT_FORMAT",
    "AuditChainError", "EntryError", "CheckpointError", "ChainError", "NotAnExtension",
    "ExportFormatError", "KeyFormatError",
    "build_entry", "parse_entry", "leaf_hash", "node_hash", "chain_hash", "merkle_root", "MerkleFrontier",
    "NoteSignature", "Checkpoint", "VerifierKey", "Signer", "generate_private_key_pem",
    "load_private_key_pem", "parse_vkey", "parse_checkpoint", "verify_checkpoint", "extend_checkpoint",
    "ExportManifest", "ExportEntry", "ExportCheckpoint", "export_lines", "read_export",
    "ChainVerifier", "VerifyReport", "verify_export", "verify_rows",
]

ENTRY_VERSION = 1
GENESIS = bytes(32)
EMPTY_ROOT = hashlib.sha256(b"").digest()
EXPORT_FORMAT = "memwarden-audit-export/v1"

_sha256 = hashlib.sha256
_CHAIN_PREFIX = b"memwarden/v1/chain\x00"
_ENTRY_KEYS = frozenset({"v", "origin", "chain", "seq", "ts", "type", "actor", "subject", "data"})
_SIG_PREFIX = "\u2014 "  # em dash + space, as in C2SP signed-note
_ALG_ED25519 = 0x01
_MAX_NOTE_CHARS = 1 << 20
_MAX_SIGNATURES = 100
_MAX_PENDING_CHECKPOINTS = 100_000
_MAX_SEQ = 2**63 - 1
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})")
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")
_HEX8 = re.compile(r"[0-9a-f]{8}")


# -- errors ---------------------------------------------------------------------------------------


class AuditChainError(ValueError):
    """Base error: a stable `reason` code, human `detail`, and evidence (`seq`, `expected`, `found`)."""

    def __init__(self, reason: str, detail: str, *, seq: int | None = None, expected: Any = None,
                 found: Any = None):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.seq = seq
        self.expected = expected
        self.found = found


class EntryError(AuditChainError):
    """An entry cannot be built or parsed (`not_canonical`, `entry_invalid`)."""


class CheckpointError(AuditChainError):
    """`checkpoint_malformed`, `checkpoint_unknown_key` or `checkpoint_bad_signature`."""


class ChainError(AuditChainError):
    """Verification found evidence of tampering; `seq` is the first bad sequence number."""


class NotAnExtension(AuditChainError):
    """The state to be signed does not extend the last signed checkpoint (`not_an_extension`)."""

    def __init__(self, detail: str, **evidence: Any):
        super().__init__("not_an_extension", detail, **evidence)


class ExportFormatError(AuditChainError):
    """An export line is not in the export format (`malformed`); `line` is its 1-based number."""

    def __init__(self, detail: str, *, line: int | None = None):
        super().__init__("malformed", f"line {line}: {detail}" if line else detail)
        self.line = line


class KeyFormatError(ValueError):
    """A key name, verifier key or private key is not usable."""


# -- entries --------------------------------------------------------------------------------------


def build_entry(*, origin: str, chain_id: str, seq: int, ts: str, event_type: str, actor: dict[str, Any],
                subject: dict[str, Any], data: dict[str, Any]) -> bytes:
    """Canonical bytes of one audit entry. Store these bytes; never re-encode them.

    Raises `EntryError` (`entry_invalid`) for a bad field, including values RFC 8785 cannot
    represent (non-finite floats, integers beyond 2**53, non-string keys).
    """
    for name, value in (("origin", origin), ("chain_id", chain_id), ("event_type", event_type)):
        if not isinstance(value, str) or not value or "\n" in value:
            raise EntryError("entry_invalid", f"{name} must be a non-empty single-line string", found=value)
    if type(seq) is not int or not 1 <= seq <= _MAX_SEQ:
        raise EntryError("entry_invalid", "seq must be an integer >= 1", found=seq)
    if not isinstance(ts, str) or not _is_rfc3339(ts):
        raise EntryError("entry_invalid", "ts must be an RFC 3339 timestamp with offset", found=ts)
    for name, value in (("actor", actor), ("subject", subject), ("data", data)):
        if not isinstance(value, dict):
            raise EntryError("entry_invalid", f"{name} must be an object", found=type(value).__name__)
    obj = {"v": ENTRY_VERSION, "origin": origin, "chain": chain_id, "seq": seq, "ts": ts, "type": event_type,
           "actor": actor, "subject": subject, "data": data}
    try:
        return canonical_json(obj)
    except CanonicalizationError as exc:
        raise EntryError("entry_invalid", f"not representable in RFC 8785: {exc}") from None


def parse_entry(b: bytes) -> dict[str, Any]:
    """Parse stored entry bytes, requiring the exact canonical encoding and the v1 shape.

    Raises `EntryError` with reason `not_canonical` (bytes are not RFC 8785 canonical JSON, so
    they were not produced by `build_entry`) or `entry_invalid` (canonical, but not a v1 entry).
    """
    try:
        obj = parse_canonical(b)
    except NotCanonicalError as exc:
        raise EntryError("not_canonical", str(exc)) from None
    # One expression for the common case; the slow diagnosis below only runs on failure.
    if (type(obj) is dict and obj.keys() == _ENTRY_KEYS and type(obj["v"]) is int and obj["v"] == ENTRY_VERSION
            and type(obj["seq"]) is int and obj["seq"] >= 1 and type(obj["origin"]) is str and obj["origin"]
            and type(obj["chain"]) is str and obj["chain"] and type(obj["ts"]) is str and obj["ts"]
            and type(obj["type"]) is str and obj["type"] and type(obj["actor"]) is dict
            and type(obj["subject"]) is dict and type(obj["data"]) is dict):
        return obj
    raise _entry_shape_error(obj)


def _entry_shape_error(obj: Any) -> EntryError:
    if type(obj) is not dict or obj.keys() != _ENTRY_KEYS:
        found = sorted(obj) if type(obj) is dict else type(obj).__name__
        return EntryError("entry_invalid", "not a v1 entry object", expected=sorted(_ENTRY_KEYS), found=found)
    if type(obj["v"]) is not int or obj["v"] != ENTRY_VERSION:
        return EntryError("entry_invalid", "unsupported entry version", expected=ENTRY_VERSION, found=obj["v"])
    if type(obj["seq"]) is not int or obj["seq"] < 1:
        return EntryError("entry_invalid", "seq must be an integer >= 1", found=obj["seq"])
    for key in ("origin", "chain", "ts", "type"):
        if type(obj[key]) is not str or not obj[key]:
            return EntryError("entry_invalid", f"{key} must be a non-empty string", found=obj[key])
    bad = next(key for key in ("actor", "subject", "data") if type(obj[key]) is not dict)
    return EntryError("entry_invalid", f"{bad} must be an object", found=type(obj[bad]).__name__)


def _is_rfc3339(ts: str) -> bool:
    m = _RFC3339.fullmatch(ts)
    if not m:
        return False
    frac = m.group(1) or ""
    text = ts[:19] + frac[:7] + ("+00:00" if m.group(2) == "Z" else m.group(2))
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


# -- hashes and the Merkle tree --------------------------------------------------------------------


def leaf_hash(entry: bytes) -> bytes:
    """RFC 6962 leaf hash: SHA-256(0x00 || entry)."""
    return _sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 interior node hash: SHA-256(0x01 || left || right)."""
    return _sha256(b"\x01" + left + right).digest()


def chain_hash(prev: bytes, leaf: bytes) -> bytes:
    """Link hash: SHA-256("memwarden/v1/chain" || 0x00 || prev || leaf); prev of seq 1 is GENESIS."""
    if len(prev) != 32 or len(leaf) != 32:
        raise ValueError("chain_hash takes two 32-byte hashes")
    return _sha256(_CHAIN_PREFIX + prev + leaf).digest()


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """RFC 6962 Merkle Tree Hash over leaf hashes (outputs of `leaf_hash`); SHA-256("") if empty."""
    if not leaves:
        return EMPTY_ROOT

    def mth(lo: int, hi: int) -> bytes:
        if hi - lo == 1:
            return leaves[lo]
        k = 1 << ((hi - lo - 1).bit_length() - 1)  # largest power of two < n
        return node_hash(mth(lo, lo + k), mth(lo + k, hi))

    return mth(0, len(leaves))


class MerkleFrontier:
    """Compact range of an RFC 6962 tree: the roots of its perfect subtrees, largest first.

    Holds O(log n) hashes, so a signer can extend the last checkpoint's frontier with only the
    new leaves, and a verifier can stream a chain without keeping its leaves.
    """

    __slots__ = ("_nodes", "_size")

    def __init__(self, nodes: Iterable[bytes] = (), size: int = 0):
        nodes = [bytes(n) for n in nodes]
        if type(size) is not int or size < 0 or len(nodes) != size.bit_count():
            raise ValueError(f"a frontier of size {size} has {max(size, 0).bit_count()} nodes, got {len(nodes)}")
        if any(len(n) != 32 for n in nodes):
            raise ValueError("frontier nodes must be 32-byte hashes")
        self._nodes = nodes
        self._size = size

    @property
    def size(self) -> int:
        """Number of leaves appended."""
        return self._size

    @property
    def nodes(self) -> tuple[bytes, ...]:
        """Perfect-subtree roots, largest subtree first."""
        return tuple(self._nodes)

    def append(self, leaf: bytes) -> None:
        """Append one leaf hash."""
        nodes, size, h = self._nodes, self._size, leaf
        while size & 1:  # each trailing 1 bit is a same-size subtree to merge with
            h = _sha256(b"\x01" + nodes.pop() + h).digest()
            size >>= 1
        nodes.append(h)
        self._size += 1

    def extend(self, leaves: Iterable[bytes]) -> None:
        """Append leaf hashes in order."""
        for leaf in leaves:
            if len(leaf) != 32:
                raise ValueError("leaf hashes are 32 bytes")
            self.append(bytes(leaf))

    def root(self) -> bytes:
        """The RFC 6962 Merkle Tree Hash of all leaves appended so far."""
        if not self._nodes:
            return EMPTY_ROOT
        h = self._nodes[-1]
        for left in reversed(self._nodes[:-1]):
            h = _sha256(b"\x01" + left + h).digest()
        return h

    def copy(self) -> MerkleFrontier:
        """An independent copy."""
        return MerkleFrontier(self._nodes, self._size)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready ``{"size": n, "nodes": [hex, ...]}``."""
        return {"size": self._size, "nodes": [n.hex() for n in self._nodes]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> MerkleFrontier:
        """Inverse of `to_json` (accepts the dict or its JSON text); raises ValueError if invalid."""
        if isinstance(data, (str, bytes)):
            data = json.loads(data)
        try:
            return cls([bytes.fromhex(n) for n in data["nodes"]], data["size"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a frontier: {exc}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MerkleFrontier) and (self._size, self._nodes) == (other._size, other._nodes)

    def __repr__(self) -> str:
        return f"MerkleFrontier(size={self._size}, root={self.root().hex()})"


# -- keys, signed notes, checkpoints ---------------------------------------------------------------


@dataclass(frozen=True)
class NoteSignature:
    """One signature line of a signed note."""

    name: str
    key_id: bytes
    signature: bytes


@dataclass(frozen=True)
class Checkpoint:
    """A parsed tlog checkpoint. `body` is the exact signed text."""

    origin: str
    size: int
    root: bytes
    chain_head: bytes
    ts: str | None
    signatures: tuple[NoteSignature, ...]
    body: str


@dataclass(frozen=True)
class VerifierKey:
    """A C2SP Ed25519 verifier key (`<name>+<hex key id>+<base64(0x01 || pubkey)>`)."""

    name: str
    key_id: bytes
    public_key_raw: bytes

    def __str__(self) -> str:
        return _format_vkey(self.name, self.key_id, self.public_key_raw)

    def verify(self, signature: bytes, message: bytes) -> bool:
        """True if `signature` is this key's Ed25519 signature of `message`."""
        if len(signature) != 64:
            return False
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key_raw).verify(signature, message)
        except InvalidSignature:
            return False
        return True


def _check_key_name(name: str) -> None:
    if not isinstance(name, str) or not name or "+" in name or any(c.isspace() for c in name):
        raise KeyFormatError(f"key name must be non-empty without spaces or '+': {name!r}")


def _key_id(name: str, public_key_raw: bytes) -> bytes:
    return _sha256(name.encode() + b"\n" + bytes([_ALG_ED25519]) + public_key_raw).digest()[:4]


def _format_vkey(name: str, key_id: bytes, public_key_raw: bytes) -> str:
    return f"{name}+{key_id.hex()}+{_b64(bytes([_ALG_ED25519]) + public_key_raw)}"


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _b64_strict(s: str) -> bytes:
    """Decode standard padded base64, rejecting any other spelling of the same bytes."""
    try:
        raw = binascii.a2b_base64(s.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ValueError("invalid base64") from None
    if _b64(raw) != s:
        raise ValueError("non-canonical base64")
    return raw


def parse_vkey(s: str) -> VerifierKey:
    """Parse a verifier key string; raises `KeyFormatError` unless it is a valid Ed25519 vkey."""
    parts = s.strip().split("+", 2) if isinstance(s, str) else []
    if len(parts) != 3:
        raise KeyFormatError("verifier key must look like <name>+<8 hex>+<base64 key>")
    name, hex_id, key_b64 = parts
    _check_key_name(name)
    if not _HEX8.fullmatch(hex_id):
        raise KeyFormatError("verifier key id must be 8 lowercase hex digits")
    try:
        raw = _b64_strict(key_b64)
    except ValueError as exc:
        raise KeyFormatError(f"verifier key: {exc}") from None
    if len(raw) != 33 or raw[0] != _ALG_ED25519:
        raise KeyFormatError("verifier key is not an Ed25519 (type 0x01) key")
    key_id = bytes.fromhex(hex_id)
    if _key_id(name, raw[1:]) != key_id:
        raise KeyFormatError(f"verifier key id {hex_id} does not match its name and key")
    return VerifierKey(name, key_id, raw[1:])


def generate_private_key_pem() -> bytes:
    """A new Ed25519 private key as unencrypted PKCS#8 PEM."""
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def load_private_key_pem(pem: bytes | str, password: bytes | None = None) -> Ed25519PrivateKey:
    """Load an Ed25519 private key from PEM; raises `KeyFormatError` for anything else."""
    data = pem.encode() if isinstance(pem, str) else pem
    try:
        key = serialization.load_pem_private_key(data, password=password)
    except (ValueError, TypeError) as exc:
        raise KeyFormatError(f"cannot load private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFormatError(f"expected an Ed25519 private key, got {type(key).__name__}")
    return key


class Signer:
    """Signs notes and checkpoints with one Ed25519 key under a C2SP key name."""

    def __init__(self, private_key: Ed25519PrivateKey, name: str):
        _check_key_name(name)
        self._key = private_key
        self.name = name
        self.public_key_raw = private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.key_id = _key_id(name, self.public_key_raw)
        self.vkey = _format_vkey(name, self.key_id, self.public_key_raw)

    @classmethod
    def from_pem(cls, pem: bytes | str, name: str, password: bytes | None = None) -> Signer:
        """A signer from a PEM private key."""
        return cls(load_private_key_pem(pem, password), name)

    def sign_note(self, text: str) -> str:
        """A signed note: `text` (non-empty lines, each ending in "\\n"), a blank line, one signature."""
        if not text.endswith("\n") or "\n\n" in text or text.startswith("\n"):
            raise ValueError("note text must be non-empty lines, each ending in a newline")
        sig = self._key.sign(text.encode("utf-8"))
        return f"{text}\n{_SIG_PREFIX}{self.name} {_b64(self.key_id + sig)}\n"

    def sign_checkpoint(self, origin: str, size: int, root: bytes, chain_head: bytes, ts: str | None = None) -> str:
        """A signed tlog checkpoint note for the chain state (size, Merkle root, chain head)."""
        return self.sign_note(_checkpoint_body(origin, size, root, chain_head, ts))

    def __repr__(self) -> str:
        return f"Signer({self.vkey!r})"


def _checkpoint_body(origin: str, size: int, root: bytes, chain_head: bytes, ts: str | None) -> str:
    if not isinstance(origin, str) or not origin or any(c < " " for c in origin):
        raise ValueError("origin must be a non-empty single line")
    if type(size) is not int or not 0 <= size <= _MAX_SEQ:
        raise ValueError("size must be a non-negative integer")
    if len(root) != 32 or len(chain_head) != 32:
        raise ValueError("root and chain head are 32-byte hashes")
    lines = [origin, str(size), _b64(bytes(root)), f"chain-head {_b64(bytes(chain_head))}"]
    if ts is not None:
        if not _is_rfc3339(ts):
            raise ValueError(f"ts must be RFC 3339: {ts!r}")
        lines.append(f"ts {ts}")
    return "\n".join(lines) + "\n"


def _malformed(detail: str, size: int | None = None) -> CheckpointError:
    return CheckpointError("checkpoint_malformed", detail, seq=size)


def parse_checkpoint(note: str) -> Checkpoint:
    """Parse a checkpoint note strictly, without checking signatures.

    Raises `CheckpointError` (`checkpoint_malformed`) unless the note is exactly in the format
    `Signer.sign_checkpoint` produces (with one or more signature lines).
    """
    if not isinstance(note, str) or len(note) > _MAX_NOTE_CHARS:
        raise _malformed("note must be a string of at most 1 MiB")
    split = note.rfind("\n\n")
    if split < 0:
        raise _malformed("no blank line between text and signatures")
    body, sig_text = note[: split + 1], note[split + 2:]
    if any(c < " " and c != "\n" for c in note):
        raise _malformed("control character in note")
    lines = body[:-1].split("\n")
    if not 4 <= len(lines) <= 5:
        raise _malformed(f"checkpoint body has {len(lines)} lines, expected 4 or 5")
    origin, size_text = lines[0], lines[1]
    if not _DECIMAL.fullmatch(size_text) or int(size_text) > _MAX_SEQ:
        raise _malformed(f"bad tree size {size_text!r}")
    size = int(size_text)
    try:
        root = _b64_strict(lines[2])
        if not lines[3].startswith("chain-head "):
            raise ValueError("line 4 must be 'chain-head <base64>'")
        head = _b64_strict(lines[3][len("chain-head "):])
        if len(root) != 32 or len(head) != 32:
            raise ValueError("root and chain head must be 32 bytes")
        ts = None
        if len(lines) == 5:
            if not lines[4].startswith("ts "):
                raise ValueError("line 5 must be 'ts <RFC 3339>'")
            ts = lines[4][3:]
        if _checkpoint_body(origin, size, root, head, ts) != body:
            raise ValueError("not in canonical checkpoint form")
    except ValueError as exc:
        raise _malformed(str(exc), size) from None
    return Checkpoint(origin, size, root, head, ts, _parse_signatures(sig_text, size), body)


def _parse_signatures(sig_text: str, size: int) -> tuple[NoteSignature, ...]:
    if not sig_text.endswith("\n"):
        raise _malformed("signature block must end with a newline", size)
    lines = sig_text[:-1].split("\n")
    if len(lines) > _MAX_SIGNATURES:
        raise _malformed("too many signatures", size)
    sigs = []
    for line in lines:
        if not line.startswith(_SIG_PREFIX):
            raise _malformed("signature line must start with an em dash and a space", size)
        name, _, blob = line[len(_SIG_PREFIX):].partition(" ")
        try:
            _check_key_name(name)
            raw = _b64_strict(blob)
        except (KeyFormatError, ValueError) as exc:
            raise _malformed(f"bad signature line: {exc}", size) from None
        if len(raw) < 5:
            raise _malformed("signature too short", size)
        sigs.append(NoteSignature(name, raw[:4], raw[4:]))
    return tuple(sigs)


def verify_checkpoint(note: str, vkeys: Iterable[str | VerifierKey]) -> Checkpoint:
    """Parse a checkpoint and check it carries a valid signature by a trusted key.

    Signatures by keys not in `vkeys` are ignored (C2SP); any signature by a trusted key that
    fails is an error. Raises `CheckpointError`: `checkpoint_malformed`,
    `checkpoint_unknown_key` (no signature by a trusted key) or `checkpoint_bad_signature`.
    """
    cp = parse_checkpoint(note)
    keys = [k if isinstance(k, VerifierKey) else parse_vkey(k) for k in vkeys]
    message = cp.body.encode("utf-8")
    verified = 0
    for sig in cp.signatures:
        for key in keys:
            if key.name == sig.name and key.key_id == sig.key_id:
                if not key.verify(sig.signature, message):
                    raise CheckpointError("checkpoint_bad_signature",
                                          f"signature by {key.name}+{key.key_id.hex()} does not verify",
                                          seq=cp.size, expected=str(key))
                verified += 1
    if not verified:
        found = [f"{s.name}+{s.key_id.hex()}" for s in cp.signatures]
        raise CheckpointError("checkpoint_unknown_key", "no signature by a trusted key", seq=cp.size,
                              expected=[f"{k.name}+{k.key_id.hex()}" for k in keys], found=found)
    return cp


def extend_checkpoint(prev_checkpoint: Checkpoint | None, prev_frontier: MerkleFrontier | None,
                      new_leaves: Iterable[bytes], chain_head_at_prev_size: bytes, *,
                      new_chain_hashes: Sequence[bytes] | None = None,
                      new_size: int | None = None) -> MerkleFrontier:
    """The signer's guard: the frontier of the new state, or `NotAnExtension`.

    Refuses unless (1) `prev_frontier` reproduces the last checkpoint's size and root, (2) the
    stored chain hash at the old size (`chain_head_at_prev_size`) is the one that checkpoint
    signed (GENESIS when there is none), (3) if given, `new_chain_hashes` link from it over
    `new_leaves`, and (4) if given, `new_size` is the extended size (catches gaps and shrinking).
    Returns a new frontier; `prev_frontier` is not modified.
    """
    head = bytes(chain_head_at_prev_size)
    if prev_checkpoint is None:
        if prev_frontier is not None and prev_frontier.size:
            raise NotAnExtension("no previous checkpoint, but the frontier is not empty", found=prev_frontier.size)
        if head != GENESIS:
            raise NotAnExtension("no previous checkpoint, but the chain does not start at genesis",
                                 seq=0, expected=GENESIS.hex(), found=head.hex())
        frontier = MerkleFrontier()
    else:
        size = prev_checkpoint.size
        if prev_frontier is None or prev_frontier.size != size:
            raise NotAnExtension("stored frontier is not at the last checkpoint's size", seq=size, expected=size,
                                 found=None if prev_frontier is None else prev_frontier.size)
        if prev_frontier.root() != prev_checkpoint.root:
            raise NotAnExtension("stored frontier does not reproduce the last signed root", seq=size,
                                 expected=prev_checkpoint.root.hex(), found=prev_frontier.root().hex())
        if head != prev_checkpoint.chain_head:
            raise NotAnExtension(f"chain hash at seq {size} differs from the last signed chain head", seq=size,
                                 expected=prev_checkpoint.chain_head.hex(), found=head.hex())
        frontier = prev_frontier.copy()
    leaves = [bytes(leaf) for leaf in new_leaves]
    frontier.extend(leaves)
    if new_chain_hashes is not None:
        if len(new_chain_hashes) != len(leaves):
            raise NotAnExtension("one chain hash per new leaf expected", expected=len(leaves),
                                 found=len(new_chain_hashes))
        seq = frontier.size - len(leaves)
        for leaf, stored in zip(leaves, new_chain_hashes):
            seq += 1
            head = _sha256(_CHAIN_PREFIX + head + leaf).digest()
            if head != bytes(stored):
                raise NotAnExtension(f"chain link broken at seq {seq}", seq=seq, expected=head.hex(),
                                     found=bytes(stored).hex())
    if new_size is not None and new_size != frontier.size:
        raise NotAnExtension("new size is not the old size plus the new leaves", expected=frontier.size,
                             found=new_size)
    return frontier


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
        yield (f'{{"kind":"entry","seq":{seq},"entry":"{_b64(bytes(entry))}",'
               f'"leaf_hash":"{bytes(leaf).hex()}","chain_hash":"{bytes(link).hex()}"}}')
        while i < len(notes) and notes[i][0] <= seq:
            yield _line({"kind": "checkpoint", "note": notes[i][1]})
            i += 1
    for _, note in notes[i:]:
        yield _line({"kind": "checkpoint", "note": note})


