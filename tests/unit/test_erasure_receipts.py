"""The erasure receipt format: signed with the audit key, parsed strictly, held to the entry it cites."""

from __future__ import annotations

import pytest

from app.core import auditchain as ac
from app.core.auditchain.receipts import (ReceiptError, check_against_entry, parse_receipt, sign_receipt,
                                          verify_receipt)

SIGNER = ac.Signer.from_pem(ac.generate_private_key_pem(), "memwarden.test")
OTHER = ac.Signer.from_pem(ac.generate_private_key_pem(), "memwarden.test")
ORIGIN = "memwarden.test/tenant:t1"
FIELDS = {"origin": ORIGIN, "memory_id": "mem_1", "store": "wire\nwith a newline", "backend_id": "mbk_1",
          "confirmed_at": "2026-01-01T00:00:00.000000Z", "audit_seq": 7, "event": "memory.forgotten"}


def entry(seq: int, event_type: str, memory_id: str) -> bytes:
    return ac.build_entry(origin=ORIGIN, chain_id="tenant:t1", seq=seq, ts="2026-01-01T00:00:00Z",
                          event_type=event_type, actor={"kind": "test", "id": "x"},
                          subject={"type": "memory", "id": memory_id}, data={})


def test_a_signed_receipt_verifies_and_names_what_it_proves():
    note = sign_receipt(SIGNER, **FIELDS)
    receipt = verify_receipt(note, [SIGNER.vkey])
    assert (receipt.memory_id, receipt.store, receipt.audit_seq) == ("mem_1", "wire\nwith a newline", 7)
    assert note.count("\n\n") == 1  # a newline in a store name cannot add a line to the signed text
    check_against_entry(receipt, ORIGIN, entry(7, "memory.forgotten", "mem_1"))


@pytest.mark.parametrize("tamper", [
    lambda n: n.replace('"audit_seq":7', '"audit_seq":8'),
    lambda n: n.replace("mem_1", "mem_2"),
    lambda n: n.replace("memory.forgotten", "memory.hard_deleted"),
])
def test_a_tampered_receipt_fails_its_signature(tamper):
    note = tamper(sign_receipt(SIGNER, **FIELDS))
    with pytest.raises(ReceiptError) as raised:
        verify_receipt(note, [SIGNER.vkey])
    assert raised.value.reason == "receipt_bad_signature"


def test_a_receipt_by_another_key_or_malformed_is_refused():
    with pytest.raises(ReceiptError) as raised:
        verify_receipt(sign_receipt(OTHER, **FIELDS), [SIGNER.vkey])
    assert raised.value.reason in ("receipt_unknown_key", "receipt_bad_signature")
    for bad in ("", "no blank line", '{"kind":"x"}\n\n\u2014 memwarden.test AAAA\n'):
        with pytest.raises(ReceiptError) as raised:
            parse_receipt(bad)
        assert raised.value.reason == "receipt_malformed"


@pytest.mark.parametrize(("cited", "reason"), [
    (None, "receipt_seq_missing"),
    (entry(7, "memory.remembered", "mem_1"), "receipt_not_an_ending"),
    (entry(7, "memory.forgotten", "mem_other"), "receipt_not_an_ending"),
])
def test_a_receipt_must_cite_an_ending_of_its_own_memory(cited, reason):
    receipt = verify_receipt(sign_receipt(SIGNER, **FIELDS), [SIGNER.vkey])
    with pytest.raises(ReceiptError) as raised:
        check_against_entry(receipt, ORIGIN, cited)
    assert raised.value.reason == reason
