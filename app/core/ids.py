"""Opaque, time-ordered ids with a type prefix (`mem_…`, `chg_…`, `key_…`)."""

import os
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def new_id(prefix: str) -> str:
    """`prefix_` + 26 base32 chars: 48-bit millisecond time then 80 random bits (sorts by creation)."""
    return format_id(prefix, (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big"))


def format_id(prefix: str, value: int) -> str:
    """`prefix_` + the low 130 bits of `value` as 26 base32 chars, most significant first: the form of
    every id, for callers that choose the bits themselves (a derived id, a given creation time)."""
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return f"{prefix}_{''.join(reversed(chars))}"


def has_prefix(value: str, prefix: str) -> bool:
    """True when `value` looks like an id minted by `new_id(prefix)`."""
    body = value[len(prefix) + 1:]
    return value.startswith(prefix + "_") and len(body) == 26 and all(c in _ALPHABET for c in body)
