"""`GET /v1/audit/decisions`: the auditors' log of who approved or rejected which change, its
filters, keyset pages, CSV export, tenant isolation and scope."""

import csv
import io

import pytest

from tests.harness import bearer
from tests.schema_check import assert_error, assert_schema

SECRET = "Yolanda's locker code is 4417."


def _stage(client, headers, content, agent_id):
    response = client.post("/v1/memories/remember", json={"agent_id": agent_id, "type": "semantic",
                                                           "content": content, "approval_required": True},
                           headers=headers)
    assert response.status_code == 202, response.text
    return response.json()["change_id"]


def _approve(client, headers, change_id):
    seen = client.get(f"/v1/changes/{change_id}/diff", headers=headers).json()["diff"]["fingerprint"]
    response = client.post(f"/v1/changes/{change_id}/approve", json={"seen_state": seen}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
def log(client, make_key, agent, reviewer):
    """Three changes: one approved (agent-a), one rejected by a second reviewer (agent-b), one pending."""
    other_reviewer = bearer(make_key(scopes="review:decide,memory:read"))
    approved = _approve(client, reviewer, _stage(client, agent, SECRET, "agent-a"))
    rejected_id = _stage(client, agent, "Zed likes tea.", "agent-b")
    rejected = client.post(f"/v1/changes/{rejected_id}/reject", json={"reason": "not a fact"},
                           headers=other_reviewer).json()
    pending_id = _stage(client, agent, "Zed likes coffee.", "agent-a")
    return {"approved": approved, "rejected": rejected, "pending": pending_id,
            "auditor": bearer(make_key(scopes="audit:read"))}


def _ids(client, headers, **params):
    response = client.get("/v1/audit/decisions", params=params, headers=headers)
    assert response.status_code == 200, response.text
    return [item["change_id"] for item in assert_schema("decisions.response", response.json())["items"]]


def test_lists_decisions_newest_first_without_content(client, log):
    response = client.get("/v1/audit/decisions", headers=log["auditor"])
    body = assert_schema("decisions.response", response.json())
    assert [i["change_id"] for i in body["items"]] == [log["rejected"]["id"], log["approved"]["id"]]
    assert body["next_cursor"] is None
    first = body["items"][1]
    assert first["status"] == "approved" and first["agent_id"] == "agent-a" and first["operation"] == "remember"
    assert first["decided_by"] == log["approved"]["decided_by"] and first["approved_by"] == [first["decided_by"]]
    # The content's words, not its digits: "4417" also turns up in a timestamp's microseconds.
    assert "locker code" not in response.text and "Yolanda" not in response.text
    assert "not a fact" not in response.text


def test_each_filter_narrows(client, log):
    approved, rejected, auditor = log["approved"]["id"], log["rejected"]["id"], log["auditor"]
    assert _ids(client, auditor, status="approved") == [approved]
    assert _ids(client, auditor, status="rejected") == [rejected]
    assert _ids(client, auditor, agent_id="agent-b") == [rejected]
    assert _ids(client, auditor, operation="remember") == [rejected, approved]
    assert _ids(client, auditor, operation="forget") == []
    key_id = log["rejected"]["decided_by"].split(":", 1)[1]
    assert _ids(client, auditor, reviewer=key_id) == [rejected]
    assert _ids(client, auditor, reviewer=log["approved"]["decided_by"]) == [approved]
    assert _ids(client, auditor, reviewer="usr_nobody") == []
    decided_at = log["rejected"]["decided_at"]
    assert _ids(client, auditor, **{"from": decided_at}) == [rejected]
    assert _ids(client, auditor, to=decided_at) == [approved]
    assert _ids(client, auditor, **{"from": "2999-01-01T00:00:00Z"}) == []


def test_pages_by_cursor(client, log):
    first = client.get("/v1/audit/decisions", params={"limit": 1}, headers=log["auditor"]).json()
    assert [i["change_id"] for i in first["items"]] == [log["rejected"]["id"]] and first["next_cursor"]
    second = client.get("/v1/audit/decisions", params={"limit": 1, "cursor": first["next_cursor"]},
                        headers=log["auditor"]).json()
    assert [i["change_id"] for i in second["items"]] == [log["approved"]["id"]] and second["next_cursor"] is None
    as_csv = client.get("/v1/audit/decisions", params={"limit": 1, "format": "csv"}, headers=log["auditor"])
    assert as_csv.headers["x-next-cursor"] == first["next_cursor"]


def test_csv_matches_json(client, log):
    as_json = client.get("/v1/audit/decisions", headers=log["auditor"]).json()["items"]
    response = client.get("/v1/audit/decisions", params={"format": "csv"}, headers=log["auditor"])
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert [r["change_id"] for r in rows] == [i["change_id"] for i in as_json]
    for row, item in zip(rows, as_json):
        assert row["status"] == item["status"] and row["decided_by"] == item["decided_by"]
        assert row["decided_at"] == item["decided_at"] and row["approved_by"].split() == item["approved_by"]
        assert row["agent_id"] == item["agent_id"] and row["risk_level"] == item["risk_level"]


def test_another_tenants_key_sees_none(client, log, make_tenant, make_key):
    other = make_tenant()
    assert _ids(client, bearer(make_key(scopes="audit:read", tenant_id=other.id))) == []


def test_needs_audit_read(client, log, reviewer):
    assert_error(client.get("/v1/audit/decisions", headers=reviewer), 403, "forbidden")


@pytest.mark.parametrize("params", [{"from": "yesterday"}, {"to": "2026-01-01"}, {"status": "pending"},
                                    {"limit": 0}, {"cursor": "garbage"},
                                    {"from": "2026-02-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}])
def test_bad_query_is_422(client, log, params):
    assert_error(client.get("/v1/audit/decisions", params=params, headers=log["auditor"]), 422, "validation_error")


def test_csv_cells_that_a_spreadsheet_would_run_as_formulas_are_neutralised(client, make_key, agent, reviewer):
    # Agent ids may start with "-" or "@" (common.json's agent_id pattern): a spreadsheet opening the
    # export would evaluate "-1-1" or "@cmd" as a formula. JSON keeps the value as it is.
    hostile = ["-1-1", "@cmd"]
    for agent_id in hostile:
        change_id = _stage(client, agent, f"Note from {agent_id}.", agent_id)
        rejected = client.post(f"/v1/changes/{change_id}/reject", json={"reason": "no"}, headers=reviewer)
        assert rejected.status_code == 200
    auditor = bearer(make_key(scopes="audit:read"))
    as_json = client.get("/v1/audit/decisions", headers=auditor).json()["items"]
    assert sorted(i["agent_id"] for i in as_json) == sorted(hostile)
    rows = list(csv.DictReader(io.StringIO(
        client.get("/v1/audit/decisions", params={"format": "csv"}, headers=auditor).text)))
    assert sorted(r["agent_id"] for r in rows) == ["'-1-1", "'@cmd"]


def test_csv_lines_neutralise_every_formula_prefix():
    from app.services.audit.decisions import COLUMNS, csv_lines

    evil = ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1", "plain", "a=b"]
    items = [{**{c: "" for c in COLUMNS}, "approved_by": [], "agent_id": value} for value in evil]
    rows = list(csv.DictReader(io.StringIO("".join(csv_lines(items)))))
    assert [r["agent_id"] for r in rows] == ["'" + v for v in evil[:6]] + ["plain", "a=b"]


@pytest.mark.parametrize("operation", ["bogus", "REMEMBER", "approve"])
def test_an_unknown_operation_filter_is_422_not_an_empty_page(client, log, operation):
    assert_error(client.get("/v1/audit/decisions", params={"operation": operation}, headers=log["auditor"]),
                 422, "validation_error")


def test_the_reviewer_filter_finds_the_first_approver_of_a_two_person_change(client, ctx, tenant, make_key, agent):
    from app.services.tenancy.tenant_config import set_policy

    set_policy(ctx, tenant_id=tenant.id, actor={"kind": "test", "id": "t"}, doc={"rules": [
        {"id": "pairs", "match": {"agents": ["pair-*"]}, "action": "require_approval", "approvals_required": 2}]})
    first, second = (make_key(scopes="review:decide,memory:read") for _ in range(2))
    change_id = client.post("/v1/memories/remember", headers=agent, json={
        "agent_id": "pair-bot", "type": "semantic", "content": "The vault rotates weekly."}).json()["change_id"]
    for key in (first, second):
        assert client.post(f"/v1/changes/{change_id}/approve", json={}, headers=bearer(key)).status_code == 200
    auditor = bearer(make_key(scopes="audit:read"))
    first_id = client.get(f"/v1/changes/{change_id}", headers=agent).json()["approvals"][0]["by"]
    assert _ids(client, auditor, reviewer=first_id) == [change_id]  # approved first, decided by the other
    assert _ids(client, auditor, reviewer=first_id.split(":", 1)[1]) == [change_id]
