"""Every class of bad input gets a 4xx in the contract's envelope and changes nothing."""

import json

import pytest
from sqlalchemy import text

from tests.harness import bearer
from tests.schema_check import assert_error

REMEMBER = "/v1/memories/remember"
GOOD = {"agent_id": "a1", "type": "semantic", "content": "The sky is blue."}


@pytest.fixture
def headers(make_key):
    return bearer(make_key())


@pytest.fixture
def count_rows(ctx, tenant):
    def count() -> tuple[int, int]:
        with ctx.db.sessions() as session:
            memories = session.scalar(text("SELECT count(*) FROM memories WHERE tenant_id = :t"), {"t": tenant.id})
            audit = session.scalar(text("SELECT count(*) FROM audit_entries WHERE tenant_id = :t"), {"t": tenant.id})
        return memories, audit

    return count


def _post_raw(client, headers, body: bytes, content_type="application/json"):
    return client.post(REMEMBER, content=body, headers={**headers, "content-type": content_type})


@pytest.mark.parametrize("body, fragment", [
    (b"{not json", "malformed JSON"),
    (b"", "empty"),
    (b'{"agent_id": "a1", "agent_id": "a2", "type": "semantic", "content": "x"}', "duplicate key"),
    (b'{"agent_id": "a1", "type": "semantic", "content": "x", "confidence": NaN}', "NaN"),
    (b"[1, 2, 3]", "not of type 'object'"),
    (b'"just a string"', "not of type 'object'"),
    (b"\xff\xfe{}", "UTF-8"),
    (("[" * 100 + "]" * 100).encode(), "nested deeper"),
    (('{"agent_id":"a1","type":"semantic","content":"x","metadata":' + '{"a":' * 40 + "1" + "}" * 41).encode(),
     "nested deeper"),
    (("[" * 100_000).encode(), "nested deeper"),
])
def test_malformed_bodies_are_422_and_change_nothing(client, headers, count_rows, body, fragment):
    before = count_rows()
    error = assert_error(_post_raw(client, headers, body), 422, "validation_error")
    assert fragment in json.dumps(error)
    assert count_rows() == before


def test_wrong_content_type_is_415(client, headers, count_rows):
    before = count_rows()
    response = _post_raw(client, headers, json.dumps(GOOD).encode(), "text/plain")
    assert_error(response, 415, "unsupported_media_type")
    response = client.post(REMEMBER, data={"agent_id": "a1"}, headers=headers)
    assert_error(response, 415, "unsupported_media_type")
    assert count_rows() == before


def test_body_over_the_limit_is_413_before_parsing(client, headers, count_rows):
    before = count_rows()
    huge = json.dumps({**GOOD, "content": "x" * 2_000_000}).encode()
    assert_error(_post_raw(client, headers, huge), 413, "payload_too_large")
    assert count_rows() == before


def test_chunked_body_over_the_limit_is_413(client, headers):
    def chunks():
        yield b'{"agent_id":"a1","type":"semantic","content":"'
        for _ in range(40):
            yield b"y" * 65536
        yield b'"}'

    response = client.post(REMEMBER, content=chunks(), headers={**headers, "content-type": "application/json"})
    assert_error(response, 413, "payload_too_large")


def test_content_over_max_entry_size_is_413(client, headers, count_rows):
    before = count_rows()
    response = client.post(REMEMBER, json={**GOOD, "content": "é" * 40_000}, headers=headers)  # 80,000 bytes
    error = assert_error(response, 413, "payload_too_large")
    assert error["details"][0]["path"] == "/content"
    assert count_rows() == before


def test_unknown_fields_and_wrong_types_are_all_reported_with_paths(client, headers, count_rows):
    before = count_rows()
    body = {"agent_id": "", "type": "factual", "content": 5, "confidence": 1.5, "tags": "x", "colour": "red"}
    error = assert_error(client.post(REMEMBER, json=body, headers=headers), 422, "validation_error")
    paths = {d["path"] for d in error["details"]}
    assert {"/", "/agent_id", "/type", "/content", "/confidence", "/tags"} <= paths
    assert any("colour" in d["message"] for d in error["details"])
    assert count_rows() == before


def test_semantic_rules_past_expiry_and_bad_fsm(client, headers, count_rows):
    before = count_rows()
    past = client.post(REMEMBER, json={**GOOD, "expires_at": "2020-01-01T00:00:00Z"}, headers=headers)
    assert assert_error(past, 422, "validation_error")["details"][0]["path"] == "/expires_at"
    epoch_past = client.post(REMEMBER, json={**GOOD, "expires_at": 1_000}, headers=headers)
    assert_error(epoch_past, 422, "validation_error")
    fsm = {"name": "f", "initial": "a", "states": ["a", "b"],
           "transitions": [{"trigger": "go", "source": "a", "dest": "b", "conditions": "x()", "before": "hack"}]}
    bad = client.post(REMEMBER, json={**GOOD, "type": "procedural", "content": json.dumps(fsm)}, headers=headers)
    paths = {d["path"] for d in assert_error(bad, 422, "validation_error")["details"]}
    assert "/content/transitions/0/conditions" in paths and any(p.startswith("/content/transitions/0") for p in paths)
    assert count_rows() == before


def test_limits_on_k_and_list_limit(client, headers):
    assert_error(client.post("/v1/memories/recall", json={"agent_id": "a1", "query": "q", "k": 1001},
                             headers=headers), 422, "validation_error")
    assert_error(client.get("/v1/memories", params={"agent_id": "a1", "limit": "5000"}, headers=headers),
                 422, "validation_error")
    assert_error(client.get("/v1/memories", params={"agent_id": "a1", "limit": "ten"}, headers=headers),
                 422, "validation_error")
    assert_error(client.get("/v1/memories", params={"agent_id": "a1", "cursor": "garbage!"}, headers=headers),
                 422, "validation_error")
    assert_error(client.get("/v1/memories", params={"agent_id": "a1", "bogus": "1"}, headers=headers),
                 422, "validation_error")


def test_wrong_method_is_405_envelope(client, headers):
    assert_error(client.put(REMEMBER, json=GOOD, headers=headers), 405, "method_not_allowed")


def test_valid_procedural_fsm_is_accepted(client, headers):
    fsm = {"name": "book-flight", "initial": "searching", "states": ["searching", "paying", "done"],
           "transitions": [{"trigger": "pay", "source": "searching", "dest": "paying", "conditions": "has_card"},
                           {"trigger": "cancel", "source": "*", "dest": "done"}]}
    response = client.post(REMEMBER, json={**GOOD, "type": "procedural", "content": json.dumps(fsm)}, headers=headers)
    assert response.status_code == 201, response.text
