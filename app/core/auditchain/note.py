"""Keys, C2SP signed notes and tlog checkpoints.

A checkpoint is a signed note whose body is ``origin``, tree size, base64 Merkle root, then
``chain-head <base64>`` and an optional ``ts <RFC 3339>`` line, signed with Ed25519 under a
C2SP key name; a verifier key is ``<name>+<hex key id>+<base64(0x01 || pubkey)>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from .entry import MAX_SEQ, is_rfc3339
from .errors import CheckpointError, KeyFormatError

_sha256 = hashlib.sha256
_SIG_PREFIX = "\u2014 "  # em dash + space, as in C2SP signed-note
_ALG_ED25519 = 0x01
_MAX_NOTE_CHARS = 1 << 20
_MAX_SIGNATURES = 100
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")
_HEX8 = re.compile(r"[0-9a-f]{8}")


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
    return f"{name}+{key_id.hex()}+{b64(bytes([_ALG_ED25519]) + public_key_raw)}"


def b64(b: bytes) -> str:
    """Standard padded base64 text of `b`."""
    return base64.b64encode(b).decode("ascii")


def _b64_strict(s: str) -> bytes:
    """Decode standard padded base64, rejecting any other spelling of the same bytes."""
    try:
        raw = binascii.a2b_base64(s.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ValueError("invalid base64") from None
    if b64(raw) != s:
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


def parse_vkeys(vkeys: Iterable[str | VerifierKey]) -> list[VerifierKey]:
    """Each key as a `VerifierKey`, parsing the strings with `parse_vkey`."""
    return [k if isinstance(k, VerifierKey) else parse_vkey(k) for k in vkeys]


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
        return f"{text}\n{_SIG_PREFIX}{self.name} {b64(self.key_id + sig)}\n"

    def sign_checkpoint(self, origin: str, size: int, root: bytes, chain_head: bytes, ts: str | None = None) -> str:
        """A signed tlog checkpoint note for the chain state (size, Merkle root, chain head)."""
        return self.sign_note(_checkpoint_body(origin, size, root, chain_head, ts))

    def __repr__(self) -> str:
        return f"Signer({self.vkey!r})"


def _checkpoint_body(origin: str, size: int, root: bytes, chain_head: bytes, ts: str | None) -> str:
    if not isinstance(origin, str) or not origin or any(c < " " for c in origin):
        raise ValueError("origin must be a non-empty single line")
    if type(size) is not int or not 0 <= size <= MAX_SEQ:
        raise ValueError("size must be a non-negative integer")
    if len(root) != 32 or len(chain_head) != 32:
        raise ValueError("root and chain head are 32-byte hashes")
    lines = [origin, str(size), b64(bytes(root)), f"chain-head {b64(bytes(chain_head))}"]
    if ts is not None:
        if not is_rfc3339(ts):
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
    if not _DECIMAL.fullmatch(size_text) or int(size_text) > MAX_SEQ:
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
    keys = parse_vkeys(vkeys)
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
