"""Every class of bad input gets a 4xx in the contract's envelope and changes nothing."""

import base64
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
    # Procedural content is JSON inside a string: nesting too deep for Python's parser is malformed too.
    deep = client.post(REMEMBER, json={**GOOD, "type": "procedural", "content": "[" * 5000}, headers=headers)
    assert "nested too deeply" in json.dumps(assert_error(deep, 422, "validation_error")["details"])
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


# --- unstorable or out-of-range values in every field of every endpoint ------------------------
#
# Each row: method, URL, JSON body (None: no body), extra headers, the JSON path the 422 must name.
# PostgreSQL cannot store NUL, UTF-8 cannot encode a lone surrogate, `datetime` cannot hold
# 9999-12-31T23:59:59-05:00 in UTC, int4/int8 columns overflow: all of these were 500s.

ALL_SCOPES = "memory:read,memory:write,review:decide,audit:read,workspace:read,workspace:write,events:read"
NUL, SURROGATE = "a\u0000b", "a\ud800b"
LATE = "9999-12-31T23:59:59-05:00"
EARLY = "0001-01-01T00:00:00+01:00"
CHG = "/v1/changes/chg_00000000000000000000000000"
REF = "/v1/refs/ref_00000000000000000000000000"
FILE = "/v1/host/workspace/files/notes/a.md"
FORGED_CURSOR = base64.urlsafe_b64encode(json.dumps(["2026-01-01T00:00:00+00:00", "mem_\u0000"]).encode()).decode()
WRITE_TABLES = ("memories", "audit_entries", "changes", "events", "runs", "webhooks", "workspace_versions")


def _cases():
    rows = []
    for bad, label in ((NUL, "nul"), (SURROGATE, "surrogate")):
        rows += [
            ("POST", REMEMBER, {**GOOD, "content": bad}, {}, "/content", f"remember-content-{label}"),
            ("POST", REMEMBER, {**GOOD, "user_id": bad}, {}, "/user_id", f"remember-user-{label}"),
            ("POST", REMEMBER, {**GOOD, "source": bad}, {}, "/source", f"remember-source-{label}"),
            ("POST", REMEMBER, {**GOOD, "run_id": bad}, {}, "/run_id", f"remember-run-{label}"),
            ("POST", REMEMBER, {**GOOD, "tags": ["ok", bad]}, {}, "/tags/1", f"remember-tag-{label}"),
            ("POST", REMEMBER, {**GOOD, "metadata": {"k": {"deep": [bad]}}}, {}, "/metadata/k/deep/0",
             f"remember-metadata-value-{label}"),
            ("POST", REMEMBER, {**GOOD, "metadata": {bad: 1}}, {}, "/metadata", f"remember-metadata-key-{label}"),
            ("POST", "/v1/memories/recall", {"agent_id": "a1", "query": bad}, {}, "/query", f"recall-query-{label}"),
            ("POST", "/v1/memories/recall", {"agent_id": "a1", "query": "q", "filter": {"k": bad}}, {},
             "/filter/k", f"recall-filter-{label}"),
            ("POST", "/v1/memories/forget", {"agent_id": "a1", "reason": bad}, {}, "/reason", f"forget-reason-{label}"),
            ("POST", "/v1/memories/merge", {"agent_id": bad, "canonical": "x", "duplicates": ["y"]}, {},
             "/agent_id", f"merge-agent-{label}"),
            ("POST", f"{CHG}/approve", {"reason": bad}, {}, "/reason", f"approve-reason-{label}"),
            ("POST", f"{CHG}/approve", {"edits": {"content": bad}}, {}, "/edits/content", f"approve-edit-{label}"),
            ("POST", f"{CHG}/reject", {"reason": bad}, {}, "/reason", f"reject-reason-{label}"),
            ("POST", f"{REF}/entries", {"content": bad}, {}, "/content", f"ref-put-content-{label}"),
            ("POST", "/v1/runs", {"agent_id": bad}, {}, "/agent_id", f"run-agent-{label}"),
            ("POST", "/v1/webhooks", {"url": "https://example.com/" + bad}, {}, "/url", f"webhook-url-{label}"),
            ("PUT", FILE, {"content": bad}, {}, "/content", f"workspace-put-content-{label}"),
            ("PUT", FILE, {"content": "x", "runId": bad}, {}, "/runId", f"workspace-put-run-{label}"),
        ]
    # Query parameters (NUL arrives percent-encoded; a surrogate cannot survive URL decoding).
    rows += [
        ("GET", "/v1/memories?agent_id=a1&user_id=a%00b", None, {}, "/user_id", "list-user-nul"),
        ("GET", "/v1/memories?agent_id=a1&cursor=a%00b", None, {}, "/cursor", "list-cursor-nul"),
        ("GET", "/v1/memories?agent_id=a1&tag=a%00b", None, {}, "/tag", "list-tag-nul"),
        ("GET", "/v1/memories?agent_id=a1&limit=3.0", None, {}, "/limit", "list-limit-float"),
        ("GET", "/v1/memories?agent_id=a1&limit=%C2%B2", None, {}, "/limit", "list-limit-superscript"),
        ("GET", "/v1/memories?agent_id=a1&as_of=" + LATE.replace("+", "%2B"), None, {}, "/as_of", "list-as-of-late"),
        ("GET", "/v1/memories?agent_id=a1&as_of=99999999999999999999", None, {}, "/as_of", "list-as-of-huge"),
        ("GET", "/v1/memories/mem_00000000000000000000000000?as_of=a%00", None, {}, "/as_of", "get-as-of-nul"),
        ("GET", "/v1/memories?agent_id=a1&cursor=" + FORGED_CURSOR, None, {}, "/cursor", "list-forged-cursor-nul"),
        ("GET", "/v1/changes?cursor=" + FORGED_CURSOR, None, {}, "/cursor", "changes-forged-cursor-nul"),
        ("GET", "/v1/changes?operation=a%00b", None, {}, "/operation", "changes-operation-nul"),
        ("GET", "/v1/changes?cursor=a%00b", None, {}, "/cursor", "changes-cursor-nul"),
        ("GET", "/v1/refs?agent_id=a1&user_id=a%00b", None, {}, "/user_id", "refs-user-nul"),
        ("GET", f"{REF}/entries?snapshot=a%00b", None, {}, "/snapshot", "ref-entries-snapshot-nul"),
        ("GET", f"{REF}/entries?cursor=a%00b", None, {}, "/cursor", "ref-entries-cursor-nul"),
        ("GET", f"{REF}/entries/mem_00000000000000000000000000?snapshot=a%00b", None, {}, "/snapshot",
         "ref-entry-snapshot-nul"),
        ("GET", "/v1/host/workspace/files?prefix=a%00b", None, {}, "/prefix", "workspace-list-prefix-nul"),
        ("GET", "/v1/host/workspace/files?snapshot=" + EARLY.replace("+", "%2B"), None, {}, "/snapshot",
         "workspace-list-snapshot-early"),
        ("GET", FILE + "?version=2147483648", None, {}, "/version", "workspace-get-version-int4"),
        ("GET", FILE + "?run_id=a%00b", None, {}, "/run_id", "workspace-get-run-nul"),
        ("GET", "/v1/audit/export?from_seq=9223372036854775808", None, {}, "/from_seq", "audit-from-int8"),
        ("GET", "/v1/audit/export?to_seq=3.0", None, {}, "/to_seq", "audit-to-float"),
        ("GET", "/v1/events?after=9223372036854775808", None, {}, "/after", "events-after-int8"),
        ("GET", "/v1/events?once=1", None, {"Last-Event-ID": b"\xb2"}, "/Last-Event-ID",
         "events-last-event-id-superscript"),
        ("GET", "/v1/webhooks/whk_x/deliveries?limit=1e3", None, {}, "/limit", "deliveries-limit-exponent"),
    ]
    # Path parameters.
    rows += [
        ("GET", "/v1/memories/mem_a%00b", None, {}, "/memory_id", "path-memory-nul"),
        ("DELETE", "/v1/memories/mem_a%00b", None, {}, "/memory_id", "path-memory-delete-nul"),
        ("GET", "/v1/changes/chg_a%00b/diff", None, {}, "/change_id", "path-change-nul"),
        ("GET", "/v1/refs/a%00b/entries", None, {}, "/memory_ref", "path-ref-nul"),
        ("GET", "/v1/host/workspace/files/a%00b.md", None, {}, "/path", "path-workspace-nul"),
        ("PUT", "/v1/host/workspace/files/a%00b.md", {"content": "x"}, {}, "/path", "path-workspace-put-nul"),
        ("DELETE", "/v1/webhooks/whk_%00", None, {}, "/webhook_id", "path-webhook-nul"),
        ("GET", "/v1/webhooks/whk_%00/deliveries", None, {}, "/webhook_id", "path-deliveries-nul"),
        ("GET", "/v1/memories/mem_a%00b/history", None, {}, "/memory_id", "path-history-nul"),
        ("GET", "/v1/changes/chg_a%00b", None, {}, "/change_id", "path-change-get-nul"),
        ("POST", "/v1/changes/chg_a%00b/withdraw", None, {}, "/change_id", "path-withdraw-nul"),
        ("DELETE", f"{REF}/entries/mem_a%00b", None, {}, "/memory_id", "path-ref-entry-delete-nul"),
    ]
    # Numbers: integral floats where integers are required, unbounded day counts, infinity.
    rows += [
        ("POST", "/v1/memories/recall", {"agent_id": "a1", "query": "q", "k": 3.0}, {}, "/k", "recall-k-float"),
        ("POST", "/v1/memories/recall", {"agent_id": "a1", "query": "q", "fresher_than_days": 1e308}, {},
         "/fresher_than_days", "recall-fresher-1e308"),
        ("POST", "/v1/memories/recall", {"agent_id": "a1", "query": "q", "as_of": LATE}, {}, "/as_of",
         "recall-as-of-late"),
        ("POST", "/v1/memories/recall", {"agent_id": "a1", "query": "q", "as_of": 10**20}, {}, "/as_of",
         "recall-as-of-epoch-huge"),
        ("POST", "/v1/memories/expire", {"agent_id": "a1", "policy": {"older_than_days": 1e308}}, {},
         "/policy/older_than_days", "expire-older-1e308"),
        ("POST", "/v1/memories/expire", {"agent_id": "a1", "policy": {"no_recall_in_days": 1e308}}, {},
         "/policy/no_recall_in_days", "expire-no-recall-1e308"),
        ("POST", REMEMBER, {**GOOD, "expires_at": LATE}, {}, "/expires_at", "remember-expires-late"),
        ("POST", REMEMBER, {**GOOD, "expires_at": EARLY}, {}, "/expires_at", "remember-expires-early"),
        ("POST", f"{REF}/entries", {"content": "x", "expiresAt": LATE}, {}, "/expiresAt", "ref-put-expires-late"),
    ]
    return rows


CASES = _cases()


@pytest.fixture
def all_scopes(make_key):
    return bearer(make_key(ALL_SCOPES))


@pytest.fixture
def count_writes(ctx, tenant):
    def count() -> dict[str, int]:
        with ctx.db.sessions() as session:
            return {table: session.scalar(text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t"), {"t": tenant.id})
                    for table in WRITE_TABLES}

    return count


@pytest.mark.parametrize("method, url, body, extra, path", [c[:5] for c in CASES], ids=[c[5] for c in CASES])
def test_unstorable_and_out_of_range_values_are_422_at_their_path(client, all_scopes, count_writes, method, url,
                                                                 body, extra, path):
    before = count_writes()
    content = None if body is None else json.dumps(body).encode()  # json.dumps escapes \u0000 and \ud800
    headers = {**all_scopes, **extra, **({"content-type": "application/json"} if content else {})}
    response = client.request(method, url, content=content, headers=headers)
    error = assert_error(response, 422, "validation_error")
    assert path in {d["path"] for d in error["details"]}, error
    for header in ("content-security-policy", "x-frame-options", "x-content-type-options"):
        assert header in response.headers
    assert count_writes() == before


def test_infinity_spelled_as_an_overflowing_number_is_422(client, all_scopes):
    body = b'{"agent_id": "a1", "query": "q", "min_score": 1e400}'
    response = client.post("/v1/memories/recall", content=body,
                           headers={**all_scopes, "content-type": "application/json"})
    assert "/min_score" in {d["path"] for d in assert_error(response, 422, "validation_error")["details"]}
