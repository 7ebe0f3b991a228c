"""Unit tests of the pure audit-chain core: canonical bytes, hashes, Merkle tree, signed
checkpoints, the signer's extension guard, the export format and the tamper-detecting verifier."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import tempfile
import threading
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.core import auditchain as ac
from app.core.auditchain import fileverify
from app.core.auditchain import verify as verify_module
from app.core.canonical import (
    NotCanonicalError,
    canonical_json,
    is_canonical,
    parse_canonical,
)

ORIGIN = "memwarden.test/tenant:t1"
CHAIN = "tenant:t1"
TS = "2026-11-22T10:00:00.123456Z"
SIGNER = ac.Signer(ac.load_private_key_pem(ac.generate_private_key_pem()), "memwarden.test")
OTHER_SIGNER = ac.Signer.from_pem(ac.generate_private_key_pem(), "memwarden.test")


# -- helpers ------------------------------------------------------------------------------------------


def entry(seq: int, *, origin: str = ORIGIN, chain_id: str = CHAIN, note: str = "x") -> bytes:
    return ac.build_entry(origin=origin, chain_id=chain_id, seq=seq, ts=TS, event_type="memory.write",
                          actor={"kind": "agent", "id": "a1"}, subject={"type": "memory", "id": f"m{seq}"},
                          data={"digest": "sha256:" + "ab" * 32, "note": note})


def rehash(entries: list[bytes], prev: bytes = ac.GENESIS, start: int = 1) -> list[tuple[int, bytes, bytes, bytes]]:
    """(seq, entry, leaf, chain) rows for consecutive entries."""
    rows = []
    for i, e in enumerate(entries):
        leaf = ac.leaf_hash(e)
        prev = ac.chain_hash(prev, leaf)
        rows.append((start + i, e, leaf, prev))
    return rows


def make_rows(n: int, **kw) -> list[tuple[int, bytes, bytes, bytes]]:
    return rehash([entry(s, **kw) for s in range(1, n + 1)])


def sign_at(rows, size: int, signer: ac.Signer = SIGNER, origin: str = ORIGIN) -> str:
    root = ac.merkle_root([r[2] for r in rows[:size]])
    head = rows[size - 1][3] if size else ac.GENESIS
    return signer.sign_checkpoint(origin, size, root, head, ts="2026-11-22T10:00:00Z")


def export(rows, notes, *, from_seq: int = 1, to_seq: int | None = None, vkey: str = SIGNER.vkey,
           prev: bytes = ac.GENESIS) -> list[str]:
    to_seq = rows[-1][0] if to_seq is None else to_seq
    manifest = {"kind": "manifest", "format": ac.EXPORT_FORMAT, "origin": ORIGIN, "chain_id": CHAIN,
                "from_seq": from_seq, "to_seq": to_seq, "prev_chain_hash": prev.hex(),
                "exported_at": "2026-11-22T10:00:00Z", "vkey": vkey}
    return list(ac.export_lines(manifest, rows, notes))


def verify(lines, vkeys=(SIGNER.vkey,), **kw) -> ac.VerifyReport:
    """`verify_export` of the lines, asserted equal to `verify_export_file` of them as a file read in
    one-line ranges (so every line boundary is also a range boundary)."""
    keys = None if vkeys is None else list(vkeys)
    report = ac.verify_export([line + "\n" for line in lines], vkeys=keys, **kw)
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        path = Path(tmp, "export.jsonl")
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        patch.setattr(fileverify, "_RANGE_BYTES", 1)
        assert ac.verify_export_file(path, vkeys=keys, workers=0, **kw) == report
    return report


def index_of(lines: list[str], seq: int) -> int:
    return next(i for i, line in enumerate(lines)
                if json.loads(line)["kind"] == "entry" and json.loads(line)["seq"] == seq)


def entry_line(seq: int, e: bytes, leaf: bytes, chain: bytes) -> str:
    return next(iter(list(ac.export_lines({"origin": ORIGIN, "chain_id": CHAIN, "from_seq": 1, "to_seq": 0,
                                           "prev_chain_hash": ac.GENESIS.hex(), "exported_at": "x"},
                                          [(seq, e, leaf, chain)], []))[1:]))


def assert_tampered(report: ac.VerifyReport, reason: str, first_bad_seq: int | None) -> None:
    assert (report.status, report.reason, report.first_bad_seq) == ("tampered", reason, first_bad_seq), report
    assert not report.ok


@pytest.fixture(scope="module")
def rows20():
    return make_rows(20)


@pytest.fixture(scope="module")
def good20(rows20):
    """20 entries with signed checkpoints at sizes 10 and 20."""
    return export(rows20, [sign_at(rows20, 10), sign_at(rows20, 20)])


# -- canonical JSON -------------------------------------------------------------------------------------


def _random_value(rng: random.Random, depth: int = 0):
    alphabet = ["a", "Z", "0", " ", '"', "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "\u2028", "\ue000",
                "\uffff", "\U0001f600", "\U00010000", "中"]
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randint(-(2**53) + 1, 2**53 - 1)
    if kind == 2:
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))
    if kind == 3:
        return rng.choice([0.5, -1.25, 1e-7, 1e21, 123456.789, 2.0])
    if kind == 4:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {"".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 4))): _random_value(rng, depth + 1)
            for _ in range(rng.randrange(5))}


def test_fast_canonical_check_agrees_with_rfc8785_on_random_values():
    rng = random.Random(8785)
    for _ in range(3000):
        value = _random_value(rng)
        canonical = rfc8785.dumps(value)
        assert rfc8785.dumps(parse_canonical(canonical)) == canonical
        for other in (json.dumps(value, ensure_ascii=False).encode(), json.dumps(value).encode(),
                      json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()):
            assert is_canonical(other) == (other == canonical), other


def test_every_bmp_escape_matches_rfc8785():
    for cp in list(range(0x800)) + list(range(0xD7F0, 0xD800)) + list(range(0xE000, 0x10000, 7)):
        canonical = rfc8785.dumps({"k": chr(cp)})
        assert parse_canonical(canonical) == {"k": chr(cp)}


@pytest.mark.parametrize("text", [
    b'{"a":1.5}', b'{"a":1e-7}', b'{"a":1e+21}', b'{"a":9007199254740991}', b'[]', b'"\\u001f"',
    '{"\U0001f600":2,"\ue000":1}'.encode(),  # UTF-16 order, not code point order
])
def test_canonical_edge_cases_accepted(text):
    assert rfc8785.dumps(json.loads(text)) == text
    assert is_canonical(text)


@pytest.mark.parametrize("text", [
    b'{"a":1.0}', b'{"a":1e-07}', b'{"a":1.50}', b'{"a":9007199254740992}', b'{"a":NaN}', b'{"a":-0}',
    b'{"b":1,"a":2}', b'{"a":1,"a":1}', b'{"a": 1}', b'{"a":1}\n', b' {"a":1}', b'\xef\xbb\xbf{"a":1}',
    b'{"a":"\\u0041"}', b'{"a":"\\/"}', b'{"a":"\\ud800"}', b'{"a":"\xff"}', b'{"a":1', b'',
    '{"\ue000":1,"\U0001f600":2}'.encode(),  # code point order is not RFC 8785 order
])
def test_non_canonical_bytes_rejected(text):
    with pytest.raises(NotCanonicalError):
        parse_canonical(text)


def test_canonical_json_rejects_unrepresentable_values():
    for bad in (float("nan"), float("inf"), 2**53, {1: "x"}):
        with pytest.raises(ValueError):
            canonical_json({"v": bad})


# -- entries --------------------------------------------------------------------------------------------


def test_build_and_parse_entry_round_trip():
    e = entry(7)
    assert e == canonical_json(json.loads(e))
    obj = ac.parse_entry(e)
    assert list(obj) == ["actor", "chain", "data", "origin", "seq", "subject", "ts", "type", "v"]
    assert (obj["v"], obj["origin"], obj["chain"], obj["seq"], obj["type"]) == (1, ORIGIN, CHAIN, 7, "memory.write")


def test_parse_entry_rejects_non_canonical_and_foreign_shapes():
    e = entry(7)
    with pytest.raises(ac.EntryError) as exc:
        ac.parse_entry(json.dumps(json.loads(e)).encode())
    assert exc.value.reason == "not_canonical"
    for obj in ({**json.loads(e), "extra": 1}, {**json.loads(e), "v": 2}, {**json.loads(e), "seq": 0},
                {**json.loads(e), "data": []}, [1]):
        with pytest.raises(ac.EntryError) as exc:
            ac.parse_entry(canonical_json(obj))
        assert exc.value.reason == "entry_invalid"


@pytest.mark.parametrize("field, value", [("seq", 0), ("seq", True), ("ts", "2026-11-22 10:00:00"),
                                          ("ts", "2026-13-01T00:00:00Z"), ("origin", ""), ("origin", "a\nb"),
                                          ("data", [1]), ("data", {"x": float("inf")})])
def test_build_entry_validates(field, value):
    kwargs = {"origin": ORIGIN, "chain_id": CHAIN, "seq": 1, "ts": TS, "event_type": "t", "actor": {}, "subject": {},
              "data": {}}
    kwargs[field] = value
    with pytest.raises(ac.EntryError):
        ac.build_entry(**kwargs)


# -- hashes and Merkle tree -----------------------------------------------------------------------------

# RFC 6962 reference leaves and tree heads (certificate-transparency test data).
CT_LEAVES = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"]
CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]


def test_merkle_root_matches_rfc6962_reference_vectors():
    leaves = [ac.leaf_hash(bytes.fromhex(h)) for h in CT_LEAVES]
    for size in range(len(leaves) + 1):
        assert ac.merkle_root(leaves[:size]).hex() == CT_ROOTS[size]
        frontier = ac.MerkleFrontier()
        frontier.extend(leaves[:size])
        assert frontier.root().hex() == CT_ROOTS[size]


def test_hash_recipes():
    e, prev = b'{"a":1}', bytes(range(32))
    leaf = ac.leaf_hash(e)
    assert leaf == hashlib.sha256(b"\x00" + e).digest()
    assert ac.node_hash(leaf, prev) == hashlib.sha256(b"\x01" + leaf + prev).digest()
    assert ac.chain_hash(prev, leaf) == hashlib.sha256(b"memwarden/v1/chain\x00" + prev + leaf).digest()
    assert ac.GENESIS == bytes(32) and ac.EMPTY_ROOT == hashlib.sha256(b"").digest()
    with pytest.raises(ValueError):
        ac.chain_hash(b"short", leaf)


def test_frontier_root_equals_merkle_root_for_every_size():
    rng = random.Random(6962)
    leaves = [hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(2100)]
    frontier = ac.MerkleFrontier()
    for size in range(71):
        assert frontier.size == size and frontier.root() == ac.merkle_root(leaves[:size]), size
        assert ac.MerkleFrontier.from_json(frontier.to_json()) == frontier
        frontier.append(leaves[size])
    for size in rng.sample(range(71, 2100), 15) + [1024, 2047, 2048, 2049]:
        frontier = ac.MerkleFrontier()
        frontier.extend(leaves[:size])
        assert frontier.root() == ac.merkle_root(leaves[:size]), size
        assert len(frontier.nodes) == size.bit_count()


def test_frontier_resumes_from_json():
    leaves = [hashlib.sha256(bytes([i])).digest() for i in range(100)]
    frontier = ac.MerkleFrontier()
    frontier.extend(leaves[:37])
    stored = json.dumps(frontier.to_json())
    resumed = ac.MerkleFrontier.from_json(stored)
    resumed.extend(leaves[37:])
    assert resumed.root() == ac.merkle_root(leaves) and resumed.size == 100
    with pytest.raises(ValueError):
        ac.MerkleFrontier.from_json({"size": 3, "nodes": [leaves[0].hex()]})


# -- keys, notes, checkpoints ---------------------------------------------------------------------------

# golang.org/x/mod/sumdb/note test vector (also in C2SP signed-note).
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
PETER_NOTE = (PETER_TEXT + "\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXg"
              "KvqfqdngotpRZb6KE6RyyBwJnAM=\n")


def test_signed_note_interoperates_with_go_reference_vector():
    seed = base64.b64decode(PETER_SKEY.split("+", 4)[4])[1:]
    signer = ac.Signer(Ed25519PrivateKey.from_private_bytes(seed), "PeterNeumann")
    assert signer.vkey == PETER_VKEY
    assert signer.sign_note(PETER_TEXT) == PETER_NOTE
    key = ac.parse_vkey(PETER_VKEY)
    assert (key.name, key.key_id.hex(), str(key)) == ("PeterNeumann", "c74f20a3", PETER_VKEY)


def test_checkpoint_text_format_and_round_trip():
    root, head = bytes(range(32)), bytes(range(32, 64))
    note = SIGNER.sign_checkpoint(ORIGIN, 42, root, head, ts="2026-11-22T10:00:00Z")
    body, sigs = note.split("\n\n")
    assert body.split("\n") == [ORIGIN, "42", base64.b64encode(root).decode(),
                                "chain-head " + base64.b64encode(head).decode(), "ts 2026-11-22T10:00:00Z"]
    assert sigs.startswith("\u2014 memwarden.test ") and sigs.endswith("\n") and sigs.count("\n") == 1
    blob = base64.b64decode(sigs.split(" ")[2])
    raw_pub = base64.b64decode(SIGNER.vkey.split("+", 2)[2])[1:]
    assert blob[:4] == hashlib.sha256(b"memwarden.test\n\x01" + raw_pub).digest()[:4]
    assert SIGNER.vkey.split("+")[1] == blob[:4].hex()
    cp = ac.verify_checkpoint(note, [SIGNER.vkey])
    assert (cp.origin, cp.size, cp.root, cp.chain_head, cp.ts) == (ORIGIN, 42, root, head, "2026-11-22T10:00:00Z")
    assert ac.parse_checkpoint(SIGNER.sign_checkpoint(ORIGIN, 0, ac.EMPTY_ROOT, ac.GENESIS)).ts is None


def test_verify_checkpoint_errors():
    note = SIGNER.sign_checkpoint(ORIGIN, 5, bytes(32), bytes(32))
    altered = note.replace("\n5\n", "\n6\n")
    with pytest.raises(ac.CheckpointError) as exc:
        ac.verify_checkpoint(altered, [SIGNER.vkey])
    assert (exc.value.reason, exc.value.seq) == ("checkpoint_bad_signature", 6)
    with pytest.raises(ac.CheckpointError) as exc:
        ac.verify_checkpoint(note, [OTHER_SIGNER.vkey])
    assert exc.value.reason == "checkpoint_unknown_key"
    # A cosignature by an unknown key is ignored; one by a known key must verify.
    cosigned = note + OTHER_SIGNER.sign_note(note.split("\n\n")[0] + "\n").split("\n\n")[1]
    assert ac.verify_checkpoint(cosigned, [SIGNER.vkey]).size == 5
    assert ac.verify_checkpoint(cosigned, [OTHER_SIGNER.vkey, SIGNER.vkey]).size == 5
    forged = note + "\u2014 memwarden.test " + base64.b64encode(OTHER_SIGNER.key_id + bytes(64)).decode() + "\n"
    with pytest.raises(ac.CheckpointError) as exc:
        ac.verify_checkpoint(forged, [OTHER_SIGNER.vkey])
    assert exc.value.reason == "checkpoint_bad_signature"


@pytest.mark.parametrize("mutate", [
    lambda n: n.replace("\n\n", "\n"),                      # no signature block
    lambda n: n.replace("\n5\n", "\n05\n"),                 # non-decimal size
    lambda n: n.replace("chain-head ", "chain_head "),      # missing chain-head line
    lambda n: n.replace("\n\n", "\nextra\n\n"),             # unknown extension line
    lambda n: n.replace("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "AAAA"),  # root too short
    lambda n: n.replace("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=", 1),
    lambda n: n.replace("\u2014 ", "- "),                   # not an em dash
    lambda n: n[:-1],                                      # no final newline
    lambda n: n.split("\n\n")[0] + "\n\n",                  # no signatures
    lambda n: n.replace("\n5\n", "\n5\r\n"),                # control character
])
def test_parse_checkpoint_rejects_malformed_notes(mutate):
    note = SIGNER.sign_checkpoint(ORIGIN, 5, bytes(32), bytes(32))
    with pytest.raises(ac.CheckpointError) as exc:
        ac.parse_checkpoint(mutate(note))
    assert exc.value.reason == "checkpoint_malformed"


@pytest.mark.parametrize("vkey", [
    PETER_VKEY.replace("c74f20a3", "c74f20a4"), PETER_VKEY.replace("+ARpc", "+AhpC"), "PeterNeumann+c74f20a3",
    "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", PETER_VKEY + "=",
])
def test_parse_vkey_rejects_bad_keys(vkey):
    with pytest.raises(ac.KeyFormatError):
        ac.parse_vkey(vkey)


def test_private_key_helpers():
    pem = ac.generate_private_key_pem()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    assert ac.Signer.from_pem(pem.decode(), "n").vkey == ac.Signer(ac.load_private_key_pem(pem), "n").vkey
    with pytest.raises(ac.KeyFormatError):
        ac.load_private_key_pem(b"not a key")
    with pytest.raises(ac.KeyFormatError):
        ac.Signer(ac.load_private_key_pem(pem), "has space")
    assert "PRIVATE" not in repr(SIGNER)


# -- the signer's extension guard -----------------------------------------------------------------------


def test_extend_checkpoint_builds_on_the_last_signed_state():
    rows = make_rows(30)
    leaves, chains = [r[2] for r in rows], [r[3] for r in rows]
    first = ac.extend_checkpoint(None, None, leaves[:10], ac.GENESIS, new_chain_hashes=chains[:10], new_size=10)
    assert first.root() == ac.merkle_root(leaves[:10])
    prev = ac.parse_checkpoint(SIGNER.sign_checkpoint(ORIGIN, 10, first.root(), chains[9]))
    stored = ac.MerkleFrontier.from_json(first.to_json())
    second = ac.extend_checkpoint(prev, stored, leaves[10:25], chains[9], new_chain_hashes=chains[10:25],
                                  new_size=25)
    assert (second.size, second.root()) == (25, ac.merkle_root(leaves[:25]))
    assert stored.size == 10  # not modified


def test_extend_checkpoint_refuses_non_extensions():
    rows = make_rows(30)
    leaves, chains = [r[2] for r in rows], [r[3] for r in rows]
    frontier = ac.MerkleFrontier(size=0)
    frontier.extend(leaves[:10])
    prev = ac.parse_checkpoint(SIGNER.sign_checkpoint(ORIGIN, 10, frontier.root(), chains[9]))
    other = ac.MerkleFrontier()
    other.extend(leaves[1:11])
    short = ac.MerkleFrontier()
    short.extend(leaves[:9])
    cases = [
        {"prev_frontier": frontier, "chain_head_at_prev_size": chains[8]},  # history rewritten
        {"prev_frontier": other, "chain_head_at_prev_size": chains[9]},  # frontier of other leaves
        {"prev_frontier": short, "chain_head_at_prev_size": chains[9]},  # frontier at the wrong size
        {"prev_frontier": None, "chain_head_at_prev_size": chains[9]},
        {"prev_frontier": frontier, "chain_head_at_prev_size": chains[9], "new_size": 14},  # gap / smaller
        {"prev_frontier": frontier, "chain_head_at_prev_size": chains[9], "new_chain_hashes": chains[11:16]},
    ]
    for case in cases:
        with pytest.raises(ac.NotAnExtension) as exc:
            ac.extend_checkpoint(prev_checkpoint=prev, new_leaves=leaves[10:15], **case)
        assert exc.value.reason == "not_an_extension"
    with pytest.raises(ac.NotAnExtension):
        ac.extend_checkpoint(None, None, leaves[:3], chains[0])
    with pytest.raises(ac.NotAnExtension):
        ac.extend_checkpoint(None, frontier, leaves[:3], ac.GENESIS)


# -- export format ----------------------------------------------------------------------------------------


def test_export_lines_layout(rows20, good20):
    assert all("\n" not in line and line.isascii() for line in good20)
    kinds = [json.loads(line)["kind"] for line in good20]
    assert kinds == ["manifest"] + ["entry"] * 10 + ["checkpoint"] + ["entry"] * 10 + ["checkpoint"]
    manifest = json.loads(good20[0])
    assert list(manifest) == ["kind", "format", "origin", "chain_id", "from_seq", "to_seq", "prev_chain_hash",
                              "exported_at", "vkey"]
    line = json.loads(good20[1])
    assert line == {"kind": "entry", "seq": 1, "entry": base64.b64encode(rows20[0][1]).decode(),
                    "leaf_hash": rows20[0][2].hex(), "chain_hash": rows20[0][3].hex()}
    records = list(ac.read_export(good20))
    assert isinstance(records[0], ac.ExportManifest) and records[0].prev_chain_hash == ac.GENESIS
    assert records[1] == ac.ExportEntry(*rows20[0])
    assert ac.parse_checkpoint(records[11].note).size == 10


def test_reader_accepts_other_json_spellings_of_an_entry_line(rows20):
    line = json.dumps({"chain_hash": rows20[0][3].hex().upper(), "seq": 1, "kind": "entry",
                       "leaf_hash": rows20[0][2].hex(), "entry": base64.b64encode(rows20[0][1]).decode()}, indent=1)
    assert list(ac.read_export([export(rows20, [])[0], line.replace("\n", "")]))[1] == ac.ExportEntry(*rows20[0])


# -- verify_export: intact ----------------------------------------------------------------------------------


def test_intact_export(good20):
    report = verify(good20)
    assert report.ok and report.status == "intact" and report.reason is None and report.first_bad_seq is None
    assert (report.entries, report.checkpoints_verified, report.verified_through) == (20, 2, 20)
    assert report.signatures_checked and report.tree_size == 20
    assert json.loads(json.dumps(report.to_json()))["status"] == "intact"


def test_intact_when_all_checkpoints_trail_the_entries(rows20):
    lines = export(rows20, []) + [json.dumps({"kind": "checkpoint", "note": sign_at(rows20, s)}) for s in (10, 20)]
    report = verify(lines)
    assert report.ok and report.checkpoints_verified == 1 and "not recomputed" in report.detail


def test_range_export_checks_chain_heads(rows20):
    lines = export(rows20[5:], [sign_at(rows20, 10), sign_at(rows20, 20)], from_seq=6, prev=rows20[4][3])
    report = verify(lines)
    assert report.ok and report.checkpoints_verified == 2 and report.root is None


def test_without_pinned_key_the_manifest_key_is_used(rows20):
    forged = [rehash([entry(s) for s in range(1, 4)] + [entry(4, note="forged")])]
    lines = export(forged[0], [sign_at(forged[0], 4, OTHER_SIGNER)], vkey=OTHER_SIGNER.vkey)
    report = verify(lines, vkeys=None)
    assert report.ok and "not pinned" in report.detail
    assert_tampered(verify(lines), "checkpoint_unknown_key", 4)
    unsigned = verify(export(rows20, [], vkey=None), vkeys=None)
    assert unsigned.ok and not unsigned.signatures_checked


def test_workers_reading_byte_ranges_report_exactly_what_the_stream_does(monkeypatch, tmp_path):
    """Worker processes read their own byte ranges of the file; a line tampered with inside a range
    is still reported with its exact seq and reason, and every report equals `verify_export`'s."""
    pools = []

    class CountingPool(fileverify.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            pools.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(fileverify, "ProcessPoolExecutor", CountingPool)
    monkeypatch.setattr(fileverify, "_RANGE_BYTES", 32 * 1024)  # ~50 lines a range, ~30 ranges
    template = entry(999_999_999)
    rows = rehash([template.replace(b'"seq":999999999', b'"seq":%d' % s) for s in range(1, 2_001)])
    good = export(rows, [sign_at(rows, size) for size in (500, 1_000, 1_500, 2_000)])
    i = index_of(good, 1_234)

    def changed(*edits: tuple[int, str]) -> list[str]:
        lines = list(good)
        for at, line in edits:
            lines[at] = line
        return lines

    edited = entry(1_234, note="edited")
    relinked = entry_line(1_234, edited, ac.leaf_hash(edited), ac.chain_hash(rows[1_232][3], ac.leaf_hash(edited)))
    stale = json.loads(good[i]) | {"entry": base64.b64encode(edited).decode()}
    cases = {
        "intact": (good, None, None),
        "swapped": (changed((i, good[i + 1]), (i + 1, good[i])), "seq_mismatch", 1_234),
        "re-linked edit": (changed((i, relinked)), "chain_hash_mismatch", 1_235),
        "stale hashes": (changed((i, json.dumps(stale))), "leaf_hash_mismatch", 1_234),
        "not JSON": (changed((i, "{not json")), "malformed", None),
        "cut tail": ([line for line in good if json.loads(line).get("seq", 0) <= 1_990], "truncated", 1_991),
    }
    for name, (lines, reason, first_bad_seq) in cases.items():
        path = tmp_path / "export.jsonl"
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        stream = ac.verify_export(path.read_text(encoding="utf-8").splitlines(True), [SIGNER.vkey])
        assert (stream.reason, stream.first_bad_seq) == (reason, first_bad_seq), (name, stream)
        for workers in (0, 2):
            assert ac.verify_export_file(path, [SIGNER.vkey], workers=workers) == stream, (name, workers)
    assert f"line {i + 1}" in ac.verify_export(changed((i, "{not json")), [SIGNER.vkey]).detail
    assert len(pools) == (len(cases) if fileverify._can_fork() else 0)


def test_file_with_crlf_line_ends_or_read_from_a_pipe(good20, tmp_path):
    crlf = tmp_path / "crlf.jsonl"
    crlf.write_bytes("".join(line + "\r\n" for line in good20).encode())
    assert ac.verify_export_file(crlf, [SIGNER.vkey]) == verify(good20)
    fifo = tmp_path / "export.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=("".join(line + "\n" for line in good20),))
    writer.start()
    try:
        assert ac.verify_export_file(fifo, [SIGNER.vkey]) == verify(good20)
    finally:
        writer.join()


def _streamed_export(n: int):
    """A lazily generated n-entry export (cheap entries: only the seq differs)."""
    template = entry(999_999_999)
    prev, frontier = ac.GENESIS, ac.MerkleFrontier()
    yield export(make_rows(1), [])[0].replace('"to_seq":1', f'"to_seq":{n}')
    for s in range(1, n + 1):
        e = template.replace(b'"seq":999999999', b'"seq":%d' % s)
        leaf = ac.leaf_hash(e)
        prev = ac.chain_hash(prev, leaf)
        frontier.append(leaf)
        yield (f'{{"kind":"entry","seq":{s},"entry":"{base64.b64encode(e).decode()}",'
               f'"leaf_hash":"{leaf.hex()}","chain_hash":"{prev.hex()}"}}')
    yield json.dumps({"kind": "checkpoint", "note": SIGNER.sign_checkpoint(ORIGIN, n, frontier.root(), prev)})


def test_verification_memory_is_bounded(monkeypatch):
    monkeypatch.setattr(verify_module, "_BATCH_LINES", 256)
    peaks = []
    for n in (3_000, 12_000):
        tracemalloc.start()
        try:
            report = ac.verify_export(_streamed_export(n), vkeys=[SIGNER.vkey])
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert report.ok and report.entries == n, report
    # Keeping the 12k leaves alone would add ~780 kB.
    assert peaks[1] < peaks[0] + 100_000, peaks


# -- verify_export: tampering ---------------------------------------------------------------------------------


def test_edited_field_with_stale_hashes(rows20, good20):
    lines = list(good20)
    i = index_of(lines, 7)
    obj = json.loads(lines[i])
    obj["entry"] = base64.b64encode(entry(7, note="edited")).decode()
    lines[i] = json.dumps(obj)
    assert_tampered(verify(lines), "leaf_hash_mismatch", 7)


def test_edited_entry_with_its_own_hashes_recomputed(rows20, good20):
    lines = list(good20)
    e = entry(7, note="edited")
    leaf = ac.leaf_hash(e)
    lines[index_of(lines, 7)] = entry_line(7, e, leaf, ac.chain_hash(rows20[5][3], leaf))
    assert_tampered(verify(lines), "chain_hash_mismatch", 8)


def test_edited_last_entry_with_its_hashes_recomputed(rows20, good20):
    lines = list(good20)
    e = entry(20, note="edited")
    leaf = ac.leaf_hash(e)
    lines[index_of(lines, 20)] = entry_line(20, e, leaf, ac.chain_hash(rows20[18][3], leaf))
    report = verify(lines)
    assert_tampered(report, "checkpoint_root_mismatch", 20)
    assert report.verified_through == 10 and "11..20" in report.detail


def test_deleted_entry(good20):
    lines = list(good20)
    del lines[index_of(lines, 7)]
    assert_tampered(verify(lines), "seq_mismatch", 7)


def test_swapped_entries(good20):
    lines = list(good20)
    i = index_of(lines, 7)
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    assert_tampered(verify(lines), "seq_mismatch", 7)


def test_inserted_forged_entry(rows20, good20):
    e = entry(7, note="forged")
    leaf = ac.leaf_hash(e)
    lines = list(good20)
    i = index_of(lines, 7)
    lines.insert(i, entry_line(7, e, leaf, ac.chain_hash(rows20[5][3], leaf)))  # well linked to seq 6
    assert_tampered(verify(lines), "seq_mismatch", 7)  # two entries claim seq 7
    lines = list(good20)
    bogus = entry(99)
    lines.insert(i, entry_line(99, bogus, ac.leaf_hash(bogus), ac.GENESIS))
    assert_tampered(verify(lines), "seq_mismatch", 7)


def test_whole_chain_recomputed_after_edit(rows20):
    entries = [r[1] for r in rows20]
    entries[12] = entry(13, note="edited")
    forged = rehash(entries)
    signed = [sign_at(rows20, 10), sign_at(rows20, 20)]
    report = verify(export(forged, signed))
    assert_tampered(report, "checkpoint_root_mismatch", 20)  # the checkpoint's size: the edit is not locatable
    assert report.verified_through == 10 and "seq 11..20" in report.detail
    # Older state trusted out of band narrows it the same way, even with the in-file checkpoints dropped.
    report = verify(export(forged, []), trusted_checkpoints=[signed[0], signed[1]])
    assert_tampered(report, "checkpoint_root_mismatch", 20)
    assert report.verified_through == 10
    # A range export cannot recompute the root: the signed chain head catches it.
    report = verify(export(forged[5:], signed, from_seq=6, prev=forged[4][3]))
    assert_tampered(report, "checkpoint_head_mismatch", 20)


def test_truncated_tail_still_covered_by_a_checkpoint(rows20, good20):
    lines = [line for line in good20 if json.loads(line).get("seq", 0) < 18]
    assert_tampered(verify(lines), "truncated", 18)
    lines[0] = lines[0].replace('"to_seq":20', '"to_seq":17')
    report = verify(lines)
    assert_tampered(report, "truncated", 18)
    assert report.entries == 17


def test_older_export_against_newer_trusted_checkpoint(rows20):
    older = export(rows20[:15], [sign_at(rows20, 10), sign_at(rows20, 15)])
    assert verify(older).ok
    assert_tampered(verify(older, trusted_checkpoints=[sign_at(rows20, 20)]), "truncated", 16)
    assert verify(older, trusted_checkpoints=[sign_at(rows20, 10)]).checkpoints_verified == 3


def test_spliced_entry_from_another_chain(rows20, good20):
    other = make_rows(20, origin="memwarden.test/tenant:t2", chain_id="tenant:t2")
    lines = list(good20)
    lines[index_of(lines, 7)] = entry_line(*other[6])
    assert_tampered(verify(lines), "wrong_chain", 7)


def test_altered_checkpoint_text(good20):
    lines = list(good20)
    i = len(lines) - 1
    note = json.loads(lines[i])["note"]
    lines[i] = json.dumps({"kind": "checkpoint", "note": note.replace("ts 2026-11-22T10", "ts 2026-11-23T10")})
    assert_tampered(verify(lines), "checkpoint_bad_signature", 20)


def test_checkpoint_signed_with_unknown_key(rows20, good20):
    lines = list(good20)
    lines[-1] = json.dumps({"kind": "checkpoint", "note": sign_at(rows20, 20, OTHER_SIGNER)})
    assert_tampered(verify(lines), "checkpoint_unknown_key", 20)


def test_malformed_checkpoint_in_export(good20):
    lines = list(good20)
    lines[-1] = json.dumps({"kind": "checkpoint", "note": "garbage"})
    assert_tampered(verify(lines), "checkpoint_malformed", None)


def test_checkpoint_of_another_chain(rows20, good20):
    lines = list(good20)
    lines[-1] = json.dumps({"kind": "checkpoint", "note": sign_at(rows20, 20, origin="memwarden.test/other")})
    assert_tampered(verify(lines), "wrong_chain", 20)


def test_missing_or_partial_checkpoint_coverage(rows20, good20):
    no_checkpoints = [line for line in good20 if json.loads(line)["kind"] != "checkpoint"]
    assert_tampered(verify(no_checkpoints), "no_checkpoint", 1)
    # Without a pinned key the manifest's key still demands a checkpoint.
    assert_tampered(verify(no_checkpoints, vkeys=None), "no_checkpoint", 1)
    unsigned_tail = export(rows20, [sign_at(rows20, 10)])
    assert_tampered(verify(unsigned_tail), "no_checkpoint", 11)
    assert verify(export(rows20, [], vkey=None), vkeys=None).ok


def test_non_canonical_entry_bytes(rows20, good20):
    e = json.dumps(json.loads(rows20[6][1]), indent=1).encode()
    leaf = ac.leaf_hash(e)
    lines = list(good20)
    lines[index_of(lines, 7)] = entry_line(7, e, leaf, ac.chain_hash(rows20[5][3], leaf))
    assert_tampered(verify(lines), "not_canonical", 7)


def test_record_seq_metadata_edited(good20):
    lines = list(good20)
    i = index_of(lines, 7)
    lines[i] = lines[i].replace('"seq":7,', '"seq":70,')
    assert_tampered(verify(lines), "seq_mismatch", 7)


def test_entries_beyond_manifest_range(good20):
    lines = list(good20)
    lines[0] = lines[0].replace('"to_seq":20', '"to_seq":19')
    assert_tampered(verify(lines), "seq_mismatch", 20)


def test_manifest_from_seq_1_must_start_at_genesis(rows20):
    assert_tampered(verify(export(rows20, [sign_at(rows20, 20)], prev=b"\x01" * 32)), "chain_hash_mismatch", 1)


@pytest.mark.parametrize("mutate", [
    lambda lines: ["not json"] + lines[1:],
    lambda lines: lines[1:],                                                      # no manifest
    lambda lines: [],
    lambda lines: lines[:3] + ['{"kind":"entry","seq":3,"entry":"!!","leaf_hash":"00","chain_hash":"00"}'],
    lambda lines: lines[:3] + ['{"kind":"mystery"}'],
    lambda lines: lines[:3] + lines[:1],                                          # second manifest
    lambda lines: [lines[0].replace(ac.EXPORT_FORMAT, "other/v9")] + lines[1:],
])
def test_unusable_input(good20, mutate):
    report = verify(mutate(list(good20)))
    assert (report.ok, report.status, report.reason, report.first_bad_seq) == (False, "unusable", "malformed", None)


def test_bad_verifier_key_is_unusable(good20):
    assert verify(good20, vkeys=["nonsense"]).status == "unusable"


# -- verify_rows ----------------------------------------------------------------------------------------------


def db_rows(rows):
    for seq, e, leaf, chain in rows:
        obj = json.loads(e)
        yield seq, e, leaf, chain, {"seq": seq, "event_type": obj["type"], "chain_id": CHAIN, "subject.id": f"m{seq}",
                                    "subject_type": "memory", "actor_id": "a1", "subject.missing": None,
                                    "ts": datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=UTC)}


def test_verify_rows_intact_with_columns(rows20):
    notes = [sign_at(rows20, 10), sign_at(rows20, 20)]
    report = ac.verify_rows(db_rows(rows20), CHAIN, ORIGIN, notes, [SIGNER.vkey])
    assert report.ok and report.checkpoints_verified == 2 and report.verified_through == 20
    live = ac.verify_rows(db_rows(rows20), CHAIN, ORIGIN, notes[:1], [SIGNER.vkey])
    assert live.ok and "11..20" in live.detail
    assert ac.verify_rows(db_rows(rows20), CHAIN, ORIGIN, notes[:1], [SIGNER.vkey],
                          require_checkpoint=True).reason == "no_checkpoint"


def test_verify_rows_column_mismatch(rows20):
    rows = list(db_rows(rows20))
    rows[4][4]["event_type"] = "memory.delete"
    assert_tampered(ac.verify_rows(rows, CHAIN, ORIGIN), "column_mismatch", 5)
    rows = list(db_rows(rows20))
    rows[8][4]["ts"] = datetime(2026, 11, 22, 10, 0, 1, tzinfo=UTC)
    assert_tampered(ac.verify_rows(rows, CHAIN, ORIGIN), "column_mismatch", 9)


def test_verify_rows_with_projection(rows20):
    def project(e):
        return {"actor": f"{e['actor']['kind']}:{e['actor']['id']}", "subject_id": e["subject"].get("id")}

    rows = [(s, e, leaf, c, {"actor": "agent:a1", "subject_id": f"m{s}"}) for s, e, leaf, c in rows20]
    assert ac.verify_rows(rows, CHAIN, ORIGIN, project=project).ok
    rows[3] = rows[3][:4] + ({"actor": "user:mallory", "subject_id": "m4"},)
    assert_tampered(ac.verify_rows(rows, CHAIN, ORIGIN, project=project), "column_mismatch", 4)


def test_verify_rows_detects_deleted_tail_and_edits(rows20):
    notes = [sign_at(rows20, 10), sign_at(rows20, 20)]
    assert_tampered(ac.verify_rows(db_rows(rows20[:17]), CHAIN, ORIGIN, notes, [SIGNER.vkey]), "truncated", 18)
    rows = list(db_rows(rows20))
    rows[2] = (3, entry(3, note="edited")) + rows[2][2:]
    assert_tampered(ac.verify_rows(rows, CHAIN, ORIGIN, notes, [SIGNER.vkey]), "leaf_hash_mismatch", 3)


def test_chain_verifier_resumes_from_a_checkpoint(rows20):
    leaves = [r[2] for r in rows20]
    frontier = ac.extend_checkpoint(None, None, leaves[:10], ac.GENESIS)
    verifier = ac.ChainVerifier(ORIGIN, CHAIN, start_seq=11, prev_chain_hash=rows20[9][3], frontier=frontier)
    for seq, e, leaf, chain in rows20[10:]:
        verifier.add(e, leaf, chain, seq=seq)
    assert (verifier.size, verifier.root, verifier.chain_head) == (20, ac.merkle_root(leaves), rows20[19][3])
    verifier.check_checkpoint(ac.parse_checkpoint(sign_at(rows20, 20)))
