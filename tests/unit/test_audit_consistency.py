"""RFC 6962 consistency proofs and witness records of the audit chain core.

The proofs are checked against a brute-force reference (RFC 6962 section 2.1.2 SUBPROOF over
all leaves) for every pair of sizes up to 64 and a sample of larger ones, and the verifier
(RFC 9162 section 2.1.4.2) must reject every altered proof, root and size.
"""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from app.core import auditchain as ac

SIGNER = ac.Signer.from_pem(ac.generate_private_key_pem(), "memwarden.test")
OTHER = ac.Signer.from_pem(ac.generate_private_key_pem(), "memwarden.test")
ORIGIN = "memwarden.test/tenant:t1"
LEAVES = [ac.leaf_hash(i.to_bytes(4, "big")) for i in range(1200)]


def mth(leaves: list[bytes]) -> bytes:
    """RFC 6962 Merkle Tree Hash, straight from the definition."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return ac.node_hash(mth(leaves[:k]), mth(leaves[k:]))


def reference_proof(m: int, leaves: list[bytes], complete: bool = True) -> list[bytes]:
    """RFC 6962 SUBPROOF(m, D[n], b), straight from the definition (needs every leaf)."""
    n = len(leaves)
    if m == n:
        return [] if complete else [mth(leaves)]
    k = 1 << ((n - 1).bit_length() - 1)
    if m <= k:
        return reference_proof(m, leaves[:k], complete) + [mth(leaves[k:])]
    return reference_proof(m - k, leaves[k:], False) + [mth(leaves[:k])]


def frontier_of(leaves: list[bytes]) -> ac.MerkleFrontier:
    frontier = ac.MerkleFrontier()
    frontier.extend(leaves)
    return frontier


def proof(m: int, n: int) -> list[bytes]:
    return ac.consistency_proof(frontier_of(LEAVES[:m]), LEAVES[m:n])


def pairs() -> list[tuple[int, int]]:
    rng = random.Random(9162)
    small = [(m, n) for n in range(1, 65) for m in range(1, n + 1)]
    large = [(rng.randint(1, n), n) for n in rng.sample(range(65, 1200), 40)]
    return small + large + [(1023, 1024), (1024, 1025), (512, 1199), (1, 1199), (1198, 1199)]


def test_the_proof_from_a_frontier_equals_the_brute_force_reference_and_verifies():
    for m, n in pairs():
        got = proof(m, n)
        assert got == (reference_proof(m, LEAVES[:n]) if m < n else []), (m, n)
        assert ac.verify_consistency(m, n, mth(LEAVES[:m]), mth(LEAVES[:n]), got), (m, n)


def test_every_altered_proof_root_or_size_is_rejected():
    rng = random.Random(6962)
    for m, n in rng.sample([(m, n) for m, n in pairs() if m < n], 120):
        good, old, new = proof(m, n), mth(LEAVES[:m]), mth(LEAVES[:n])
        for i in range(len(good)):
            flipped = list(good)
            flipped[i] = bytes([flipped[i][0] ^ 1]) + flipped[i][1:]
            assert not ac.verify_consistency(m, n, old, new, flipped), (m, n, i)
        assert not ac.verify_consistency(m, n, old, new, good[:-1])
        assert not ac.verify_consistency(m, n, old, new, [*good, LEAVES[0]])
        assert not ac.verify_consistency(m, n, LEAVES[5], new, good)
        assert not ac.verify_consistency(m, n, old, LEAVES[5], good)
        assert not ac.verify_consistency(n, m, new, old, good)
        if n + 1 < len(LEAVES):
            assert not ac.verify_consistency(m, n + 1, old, mth(LEAVES[:n + 1]), good)
        if m > 1:
            assert not ac.verify_consistency(m - 1, n, mth(LEAVES[:m - 1]), new, good)


def test_a_tree_with_a_rewritten_old_leaf_is_not_an_extension():
    """The forger's own tree has an honest proof, but not from the root that was signed."""
    for m, n in [(1, 2), (3, 8), (6, 7), (8, 9), (100, 333)]:
        forged = list(LEAVES[:n])
        forged[m - 1] = ac.leaf_hash(b"rewritten")
        their_proof = ac.consistency_proof(frontier_of(forged[:m]), forged[m:n])
        assert not ac.verify_consistency(m, n, mth(LEAVES[:m]), mth(forged), their_proof), (m, n)


def test_edge_sizes():
    root = mth(LEAVES[:5])
    assert ac.consistency_proof(frontier_of(LEAVES[:5]), []) == []
    assert ac.verify_consistency(5, 5, root, root, [])
    assert not ac.verify_consistency(5, 5, root, mth(LEAVES[:4]), [])
    assert not ac.verify_consistency(5, 5, root, root, [LEAVES[0]])
    assert ac.consistency_proof(ac.MerkleFrontier(), LEAVES[:3]) == []
    assert ac.verify_consistency(0, 3, ac.EMPTY_ROOT, mth(LEAVES[:3]), [])
    assert not ac.verify_consistency(-1, 3, root, root, [])
    assert not ac.verify_consistency(2, 3, mth(LEAVES[:2]), mth(LEAVES[:3]), [b"short"])


# -- the signer's guard ------------------------------------------------------------------------------


def chain_hashes(leaves: list[bytes], prev: bytes = ac.GENESIS) -> list[bytes]:
    out = []
    for leaf in leaves:
        prev = ac.chain_hash(prev, leaf)
        out.append(prev)
    return out


def signed(leaves: list[bytes], heads: list[bytes], size: int) -> ac.Checkpoint:
    return ac.parse_checkpoint(SIGNER.sign_checkpoint(ORIGIN, size, mth(leaves[:size]), heads[size - 1]))


def test_prove_extension_returns_a_proof_the_witness_can_check():
    leaves, heads = LEAVES[:40], chain_hashes(LEAVES[:40])
    prev = signed(leaves, heads, 13)
    frontier, got = ac.prove_extension(prev, frontier_of(leaves[:13]), heads[12], leaves[13:], heads[13:], 40)
    assert frontier.root() == mth(leaves) and got == reference_proof(13, leaves)
    assert ac.verify_consistency(13, 40, prev.root, frontier.root(), got)
    assert ac.prove_extension(None, None, ac.GENESIS, leaves, heads, 40)[1] == []


def test_prove_extension_refuses_a_rewritten_or_shortened_chain():
    leaves, heads = LEAVES[:40], chain_hashes(LEAVES[:40])
    prev = signed(leaves, heads, 20)
    forged = list(leaves)
    forged[15] = ac.leaf_hash(b"rewritten")
    forged_heads = chain_hashes(forged)
    with pytest.raises(ac.NotAnExtension) as caught:  # rehashed consistently: the head at 20 moved
        ac.prove_extension(prev, frontier_of(leaves[:20]), forged_heads[19], forged[20:], forged_heads[20:], 40)
    assert caught.value.seq == 20
    with pytest.raises(ac.NotAnExtension):  # a frontier recomputed from rewritten leaves
        ac.prove_extension(prev, frontier_of(forged[:20]), heads[19], leaves[20:], heads[20:], 40)
    with pytest.raises(ac.NotAnExtension):  # a forged link after the signed size
        ac.prove_extension(prev, frontier_of(leaves[:20]), heads[19], leaves[20:], [*heads[20:39], bytes(32)], 40)


# -- witness records -----------------------------------------------------------------------------------


def witness_lines(sizes: list[int], leaves: list[bytes] = LEAVES[:64], signer: ac.Signer = SIGNER,
                  origin: str = ORIGIN) -> list[str]:
    heads = chain_hashes(leaves)
    lines, prev = [], None
    for size in sizes:
        note = signer.sign_checkpoint(origin, size, mth(leaves[:size]), heads[size - 1])
        step = ac.consistency_proof(frontier_of(leaves[:prev]), leaves[prev:size]) if prev else []
        lines.append(ac.witness_line(note, from_size=prev, proof=step) + "\n")
        prev = size
    return lines


def test_the_last_witnessed_checkpoint_is_found_after_its_records_check_out():
    lines = witness_lines([5, 12, 30]) + witness_lines([7], origin="memwarden.test/tenant:other") + ["\n"]
    random.Random(1).shuffle(lines)  # several writers: records need not arrive in size order
    record = ac.read_witness(lines, ORIGIN, [SIGNER.vkey])
    assert record.checkpoint.size == 30 and record.from_size == 12
    assert ac.parse_checkpoint(record.note) == record.checkpoint
    assert ac.read_witness(lines, "memwarden.test/tenant:none") is None
    assert json.loads(lines[0])["format"] == ac.WITNESS_FORMAT


def test_a_forked_witness_is_inconsistent():
    forked = list(LEAVES[:64])
    forked[3] = ac.leaf_hash(b"rewritten")
    honest, fork = witness_lines([5, 12]), witness_lines([5, 12, 20], leaves=forked)
    with pytest.raises(ac.ChainError) as caught:  # two trees of size 5
        ac.read_witness(honest + fork, ORIGIN)
    assert caught.value.reason == "witness_inconsistent" and caught.value.seq == 5
    with pytest.raises(ac.ChainError) as caught:  # size 20's proof does not start at the honest 12
        ac.read_witness(honest + fork[2:], ORIGIN)
    assert caught.value.reason == "witness_inconsistent" and caught.value.seq == 20


def test_a_witness_record_signed_by_another_key_or_malformed_is_refused():
    with pytest.raises(ac.CheckpointError):
        ac.read_witness(witness_lines([5], signer=OTHER), ORIGIN, [SIGNER.vkey])
    assert ac.read_witness(witness_lines([5], signer=OTHER), ORIGIN).checkpoint.size == 5  # no key: not checked
    for bad in ["not json", '{"format":"other"}', json.dumps({"format": ac.WITNESS_FORMAT, "note": "x"})]:
        with pytest.raises(ac.ExportFormatError):
            ac.read_witness([bad + "\n"], ORIGIN)
    good = json.loads(witness_lines([5, 9])[1])
    good["size"] = 8
    with pytest.raises(ac.ExportFormatError):
        ac.read_witness([json.dumps(good)], ORIGIN)
