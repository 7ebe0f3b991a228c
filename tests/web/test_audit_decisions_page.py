"""/audit/decisions: the decisions log page for auditors (and admins), its filters and its CSV and
JSON downloads; viewers and reviewers are refused."""

import csv
import io

import pytest

from app.services.tenancy.users import create_user
from tests.harness import csrf_token_in, web_sign_in

PASSWORD = "correct horse battery"
ACTOR = {"kind": "test", "id": "t"}


def _decide(client, agent, reviewer):
    """One approved change (agent-a) and one rejected (agent-b), made over the API; their ids."""
    ids = []
    for agent_id, content in (("agent-a", "Quinn's locker code is 9921."), ("agent-b", "Quinn likes tea.")):
        response = client.post("/v1/memories/remember", json={"agent_id": agent_id, "type": "semantic",
                                                               "content": content, "approval_required": True},
                               headers=agent)
        ids.append(response.json()["change_id"])
    seen = client.get(f"/v1/changes/{ids[0]}/diff", headers=reviewer).json()["diff"]["fingerprint"]
    assert client.post(f"/v1/changes/{ids[0]}/approve", json={"seen_state": seen}, headers=reviewer).status_code == 200
    assert client.post(f"/v1/changes/{ids[1]}/reject", json={"reason": "no"}, headers=reviewer).status_code == 200
    return ids


def _sign_in_as(client, ctx, tenant, role):
    name = f"{role}-{tenant.name}"
    create_user(ctx, username=name, password=PASSWORD, tenant_id=tenant.id, role=role, actor=ACTOR)
    assert web_sign_in(client, name, PASSWORD, "/audit").status_code == 303


def test_an_auditor_sees_the_table_filters_and_downloads(client, ctx, tenant, agent, reviewer):
    approved, rejected = _decide(client, agent, reviewer)
    _sign_in_as(client, ctx, tenant, "auditor")
    assert 'href="/audit/decisions?tenant=' in client.get("/audit").text
    page = client.get("/audit/decisions")
    assert page.status_code == 200 and 'data-testid="decisions-table"' in page.text
    assert approved in page.text and rejected in page.text and "locker code" not in page.text
    assert f'href="/review/{approved}"' in page.text  # each decision opens its change, as decided
    assert client.get(f"/review/{approved}").status_code == 200
    narrowed = client.get("/audit/decisions", params={"status": "rejected"}).text
    assert rejected in narrowed and approved not in narrowed
    assert approved not in client.get("/audit/decisions", params={"agent_id": "agent-b"}).text
    by_operation = client.get("/audit/decisions", params={"operation": "remember"}).text
    assert approved in by_operation and '<option selected>remember</option>' in by_operation
    assert approved not in client.get("/audit/decisions", params={"operation": "forget"}).text
    assert 'data-testid="decisions-empty"' in client.get("/audit/decisions", params={"from": "2999-01-01"}).text
    assert 'data-testid="decisions-empty"' in client.get("/audit/decisions", params={"to": "2000-01-01"}).text
    today = client.get("/audit/decisions", params={"from": "2000-01-01", "to": "2999-12-31"}).text
    assert approved in today and rejected in today  # "to" includes its whole day
    key_id = client.get(f"/v1/changes/{approved}", headers=reviewer).json()["decided_by"].split(":", 1)[1]
    by_key = client.get("/audit/decisions", params={"reviewer": key_id}).text
    assert approved in by_key and rejected in by_key
    assert approved not in client.get("/audit/decisions", params={"reviewer": "usr_nobody"}).text

    as_csv = client.get("/audit/decisions.csv", params={"status": "approved"})
    assert as_csv.status_code == 200 and as_csv.headers["content-type"].startswith("text/csv")
    assert [r["change_id"] for r in csv.DictReader(io.StringIO(as_csv.text))] == [approved]
    as_json = client.get("/audit/decisions.json")
    assert as_json.status_code == 200
    assert [d["change_id"] for d in as_json.json()] == [rejected, approved]


def test_a_bad_date_is_a_422_page(client, ctx, tenant):
    _sign_in_as(client, ctx, tenant, "auditor")
    page = client.get("/audit/decisions", params={"from": "yesterday"})
    assert page.status_code == 422 and 'data-testid="decisions-error"' in page.text
    assert client.get("/audit/decisions", params={"cursor": "garbage"}).status_code == 422
    assert client.get("/audit/decisions?reviewer=a%00b").status_code == 422
    assert client.get("/audit/decisions.csv", params={"to": "2026-13-01"}).status_code == 422
    unknown = client.get("/audit/decisions", params={"operation": "bogus"})
    assert unknown.status_code == 422 and "not an operation" in unknown.text
    assert client.get("/audit/decisions.csv", params={"operation": "bogus"}).status_code == 422


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_without_the_audit_power_it_is_refused(client, ctx, tenant, role):
    _sign_in_as(client, ctx, tenant, role)
    for path in ("/audit/decisions", "/audit/decisions.csv", "/audit/decisions.json"):
        assert client.get(path).status_code == 403, path


def test_the_log_names_the_people_who_decided(client, ctx, tenant, agent):
    """Auditors read who approved what: a person's username beside their id, not the id alone."""
    change_id = client.post("/v1/memories/remember", headers=agent, json={
        "agent_id": "agent-a", "type": "semantic", "content": "Ria's desk is 4B.", "approval_required": True}
    ).json()["change_id"]
    _sign_in_as(client, ctx, tenant, "reviewer")
    page = client.get(f"/review/{change_id}").text
    seen = page.split('name="seen_state" value="', 1)[1].split('"', 1)[0]
    decided = client.post(f"/review/{change_id}/approve", data={"csrf_token": csrf_token_in(page), "seen_state": seen},
                          follow_redirects=False)
    assert decided.status_code == 303
    client.cookies.clear()
    _sign_in_as(client, ctx, tenant, "auditor")
    row = client.get("/audit/decisions").text.split(f'data-change-id="{change_id}"', 1)[1].split("</tr>", 1)[0]
    assert f"reviewer-{tenant.name}" in row.split('data-testid="decision-decider"', 1)[1].split("</td>", 1)[0]
    assert f"reviewer-{tenant.name}" in row.split('data-testid="decision-approvers"', 1)[1].split("</td>", 1)[0]
