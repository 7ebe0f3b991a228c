"""The log's hashes: RFC 6962 leaf and node hashes, the Merkle tree over the leaves (whole, or as
a compact frontier), and the chain hash linking each entry to the one before it.

* ``leaf_hash(e) = SHA-256(0x00 || e)``; ``node_hash(l, r) = SHA-256(0x01 || l || r)``.
* ``chain_hash(prev, leaf) = SHA-256("memwarden/v1/chain" || 0x00 || prev || leaf)``, with
  ``GENESIS`` (32 zero bytes) as the ``prev`` of seq 1.
* The Merkle root of the first n leaves is the RFC 6962 Merkle Tree Hash (tree size n = seq n).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

GENESIS = bytes(32)
EMPTY_ROOT = hashlib.sha256(b"").digest()
CHAIN_PREFIX = b"memwarden/v1/chain\x00"  # what a chain hash hashes before (prev || leaf)

_sha256 = hashlib.sha256


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
    return _sha256(CHAIN_PREFIX + prev + leaf).digest()


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
        obj: Any = json.loads(data) if isinstance(data, (str, bytes)) else data
        try:
            return cls([bytes.fromhex(n) for n in obj["nodes"]], obj["size"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a frontier: {exc}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MerkleFrontier) and (self._size, self._nodes) == (other._size, other._nodes)

    def __repr__(self) -> str:
        return f"MerkleFrontier(size={self._size}, root={self.root().hex()})"
