"""The state digest (`app.core.state_digest`): equal for a row as written and as PostgreSQL gives it
back, different for any change a state covers, and keyed twice (payload under the memory's own
key, state under the tenant's)."""

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

from app.core import state_digest

KEY = b"m" * 32
TENANT_KEY = state_digest.tenant_state_key(b"s" * 32, "ten_a")
NOW = datetime(2026, 11, 25, 1, 2, 3, 456789, tzinfo=timezone.utc)


def row(**changes):
    values = dict(id="mem_a", agent_id="agent", user_id=None, type="semantic", status="live", source=None,
                  confidence=0.9, score_multiplier=1.0, expires_at=None, created_at=NOW, live_from=NOW, ended_at=None,
                  updated_at=NOW, hard_deleted=False, merged_into=None, superseded_by=None, content="Ada likes tea.",
                  metadata_={"b": 1.0, "a": 1e20, "nested": {"x": [2.0, 0.5]}}, tags=["t"], digest_key=KEY)
    values.update(changes)
    return SimpleNamespace(**values)


def digest(r, key=TENANT_KEY, **after):
    return state_digest.state_digest(key, state_digest.state_of(r, **after))


def test_a_row_read_back_from_postgresql_digests_as_it_was_written():
    written = row()
    read_back = row(confidence=0.8999999761581421,  # REAL
                    metadata_={"a": 100000000000000000000, "nested": {"x": [2, 0.5]}, "b": 1},  # jsonb
                    created_at=NOW.astimezone(timezone(timedelta(hours=2))), digest_key=memoryview(KEY))
    assert digest(written) == digest(read_back)


def test_every_covered_change_changes_the_digest():
    base = digest(row())
    for change in ({"content": "Ada likes coffee."}, {"metadata_": {"b": 2}}, {"tags": ["u"]}, {"type": "episodic"},
                   {"status": "forgotten"}, {"expires_at": NOW}, {"confidence": 0.5}, {"score_multiplier": 0.25},
                   {"updated_at": NOW + timedelta(microseconds=1)}, {"id": "mem_b"}, {"merged_into": "mem_c"},
                   {"digest_key": b"k" * 32}):
        assert digest(row(**change)) != base, change


def test_overrides_are_the_update_about_to_happen():
    assert digest(row(), status="forgotten", ended_at=NOW) == digest(row(status="forgotten", ended_at=NOW))


def test_keys_are_per_tenant_and_the_payload_dies_with_its_key():
    other = state_digest.tenant_state_key(b"s" * 32, "ten_b")
    assert digest(row(), key=other) != digest(row())
    tombstone = state_digest.state_of(row(content=None, digest_key=None, metadata_={}, tags=[], hard_deleted=True))
    assert tombstone[-1] is None  # no key, no payload digest: nothing left to test a guess against
    assert state_digest.content_hmac(None, "Ada likes tea.") is None
    assert state_digest.content_hmac(KEY, "Ada likes tea.") != state_digest.content_hmac(b"k" * 32, "Ada likes tea.")
    assert "Ada" not in repr(state_digest.state_of(row()))
