"""Append-only evidence: the signer's guard that a new state extends the last signed checkpoint,
and RFC 6962 consistency proofs between two tree sizes (verified as in RFC 9162 2.1.4.2).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .errors import NotAnExtension
from .merkle import GENESIS, MerkleFrontier, chain_hash, merkle_root, node_hash
from .note import Checkpoint


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
            head = chain_hash(head, leaf)
            if head != bytes(stored):
                raise NotAnExtension(f"chain link broken at seq {seq}", seq=seq, expected=head.hex(),
                                     found=bytes(stored).hex())
    if new_size is not None and new_size != frontier.size:
        raise NotAnExtension("new size is not the old size plus the new leaves", expected=frontier.size,
                             found=new_size)
    return frontier


def consistency_proof(old: MerkleFrontier, new_leaves: Sequence[bytes]) -> list[bytes]:
    """The RFC 6962 consistency proof from the tree `old` describes to that tree plus `new_leaves`.

    Needs only the old frontier and the new leaves (never the old leaves): every node of the
    proof is either a perfect subtree of the old tree (which is one of its frontier nodes) or a
    subtree of the new leaves alone. Empty when the old tree is empty or nothing was added.
    """
    m, n = old.size, old.size + len(new_leaves)
    if m == 0 or m == n:
        return []
    known, start = {}, 0
    for node in old.nodes:  # frontier nodes are the aligned perfect subtrees, largest first
        width = 1 << ((m - start).bit_length() - 1)
        known[(start, start + width)] = node
        start += width

    def node_of(lo: int, hi: int) -> bytes:
        if hi <= m:
            return known[(lo, hi)]
        return merkle_root(new_leaves[lo - m:hi - m])

    def subproof(lo: int, hi: int, complete: bool) -> list[bytes]:
        if m - lo == hi - lo:
            return [] if complete else [node_of(lo, hi)]
        k = 1 << ((hi - lo - 1).bit_length() - 1)
        if m - lo <= k:
            return subproof(lo, lo + k, complete) + [node_of(lo + k, hi)]
        return subproof(lo + k, hi, False) + [node_of(lo, lo + k)]

    return subproof(0, n, True)


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes,
                       proof: Sequence[bytes]) -> bool:
    """True iff `proof` shows the tree (new_size, new_root) extends the tree (old_size, old_root).

    The verification algorithm of RFC 9162 section 2.1.4.2. An empty old tree is extended by
    every tree (with an empty proof); equal sizes need equal roots and an empty proof.
    """
    if type(old_size) is not int or type(new_size) is not int or not 0 <= old_size <= new_size:
        return False
    if old_size == new_size:
        return not proof and old_root == new_root
    if old_size == 0:
        return not proof
    if not proof or any(len(c) != 32 for c in proof):
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # an exact power of two is its own subtree root
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == old_root and sr == new_root and sn == 0


def prove_extension(prev_checkpoint: Checkpoint | None, prev_frontier: MerkleFrontier | None,
                    chain_head_at_prev_size: bytes, new_leaves: Sequence[bytes], new_chain_hashes: Sequence[bytes],
                    new_size: int) -> tuple[MerkleFrontier, list[bytes]]:
    """`extend_checkpoint`, then an RFC 6962 consistency proof from the previous signed tree to
    the new one, checked before anything is signed. Returns (new frontier, proof) or raises
    `NotAnExtension`; the proof is what a witness needs to check the step itself."""
    frontier = extend_checkpoint(prev_checkpoint, prev_frontier, new_leaves, chain_head_at_prev_size,
                                 new_chain_hashes=new_chain_hashes, new_size=new_size)
    if prev_checkpoint is None or prev_frontier is None:
        return frontier, []
    proof = consistency_proof(prev_frontier, new_leaves)
    if not verify_consistency(prev_checkpoint.size, frontier.size, prev_checkpoint.root, frontier.root(), proof):
        raise NotAnExtension("the new tree is not a consistent extension of the last signed one",
                             seq=prev_checkpoint.size, expected=prev_checkpoint.root.hex(),
                             found=frontier.root().hex())
    return frontier, proof
