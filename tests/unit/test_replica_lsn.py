"""WAL positions compare as numbers, not as text ("0/A0" is past "0/9F", "1/0" past "0/FFFFFFFF")."""

from app.db.replicas import lsn_int


def test_lsn_text_compares_by_position():
    assert lsn_int("16/B374D848") == (0x16 << 32) | 0xB374D848
    assert lsn_int("0/A0") > lsn_int("0/9F")
    assert lsn_int("1/0") > lsn_int("0/FFFFFFFF")
    assert lsn_int("0/0") == 0
