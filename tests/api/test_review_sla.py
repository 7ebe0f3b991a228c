"""Review SLAs: the tenant setting and its validation, the overdue badge and
filter in the queue, the `/metrics` gauge, the once-only `review.sla_breached` event and its
webhook deliveries (the plain envelope and the Slack body), and the per-reviewer digest."""

import argparse
import json

import pytest
from sqlalchemy import text

from app.cli import build_parser
from app.errors import ValidationFailed
from app.services.events import events, webhooks
from app.services.review import review_sla
from app.services.tenancy.tenant_config import parse_review_sla, set_review_sla, tenant_review_sla
from app.services.tenancy.users import create_user
from tests.harness import bearer, web_sign_in
from tests.http_receiver import Receiver
from tests.schema_check import assert_error, assert_schema

ACTOR = {"kind": "test", "id": "pytest"}
PASSWORD = "correct horse battery"
SECRET_CONTENT = "Quokka-lantern 8812 is the staged phrase"


def _stage(client, headers, agent_id="helper", content=SECRET_CONTENT) -> str:
    response = client.post("/v1/memories/remember", headers=headers, json={
        "agent_id": agent_id, "type": "semantic", "content": content, "approval_required": True})
    assert response.status_code == 202, response.text
    return response.json()["change_id"]


def _backdate(ctx, tenant_id: str, change_id: str, hours: float) -> None:
    """Make a change look submitted `hours` ago (the test owns the database: plain SQL here)."""
    with ctx.db.sessions.begin() as session:
        session.execute(text("UPDATE changes SET submitted_at = now() - make_interval(secs => :s)"
                             " WHERE tenant_id = :t AND id = :id"), {"s": hours * 3600, "t": tenant_id, "id": change_id})


@pytest.mark.parametrize("given, seconds", [("30m", 1800), ("4h", 14400), ("2d", 172800), ("off", 0), ("0", 0),
                                            (" 90m ", 5400)])
def test_review_sla_durations_are_read(given, seconds):
    assert parse_review_sla(given) == seconds


@pytest.mark.parametrize("given", ["4x", "h", "-4h", "4.5h", "1e3", "30s", "91d", "61s", "4h30m", "١h"])
def test_bad_review_sla_is_refused_by_the_service_and_the_cli(ctx, tenant, given):
    with pytest.raises(ValidationFailed) as refused:
        set_review_sla(ctx, tenant_id=tenant.id, duration=given, actor=ACTOR)
    assert refused.value.status == 422 and refused.value.details[0]["path"] == "/review_sla"
    assert tenant_review_sla(ctx, tenant.id) == 0  # nothing stored
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["tenant", "set", "--tenant", tenant.name, "--review-sla", given])
    assert exited.value.code == 2


def test_review_sla_is_stored_audited_and_switched_off(ctx, tenant):
    assert set_review_sla(ctx, tenant_id=tenant.id, duration="4h", actor=ACTOR) == 14400
    assert tenant_review_sla(ctx, tenant.id) == 14400
    args = build_parser().parse_args(["tenant", "set", "--tenant", tenant.name, "--review-sla", "2d"])
    assert isinstance(args, argparse.Namespace) and args.review_sla == "2d"
    with ctx.db.sessions() as session:
        audited = session.execute(text(
            "SELECT count(*) FROM audit_entries WHERE chain_id = :c AND position('review_sla_seconds'::bytea IN entry) > 0"),
            {"c": f"tenant:{tenant.id}"}).scalar()
    assert audited == 1
    assert set_review_sla(ctx, tenant_id=tenant.id, duration="off", actor=ACTOR) == 0
    assert tenant_review_sla(ctx, tenant.id) == 0


def test_queue_marks_and_filters_overdue_changes(client, ctx, tenant, agent):
    late = _stage(client, agent)
    fresh = _stage(client, agent, content="A fresh staged note.")
    _backdate(ctx, tenant.id, late, hours=3)
    user = create_user(ctx, username=f"slarev-{tenant.name}", password=PASSWORD, tenant_id=tenant.id,
                       role="reviewer", actor=ACTOR)
    web_sign_in(client, user.username, PASSWORD)
    page = client.get("/review").text
    assert f'data-change-id="{late}"' in page and f'data-change-id="{fresh}"' in page
    assert 'data-testid="sla-overdue"' not in page and 'data-testid="filter-overdue"' not in page  # no SLA yet

    set_review_sla(ctx, tenant_id=tenant.id, duration="1h", actor=ACTOR)
    page = client.get("/review").text
    assert page.count('data-testid="sla-overdue"') == 1
    late_row = page[page.index(f'data-change-id="{late}"'):page.index(f'data-change-id="{fresh}"')]
    assert 'data-testid="sla-overdue"' in late_row and "overdue by 2 h" in late_row
    assert 'data-testid="filter-overdue"' in page and "SLA 1h" in page
    only = client.get("/review?overdue=1").text
    assert f'data-change-id="{late}"' in only and f'data-change-id="{fresh}"' not in only


def test_metrics_count_overdue_changes_per_tenant(ctx, tenant, agent, make_tenant):
    from tests.api.test_metrics import _client, _scrape, _value

    other = make_tenant()
    with _client(ctx) as client:
        late, _ = _stage(client, agent), _stage(client, agent, content="Not late yet.")
        _backdate(ctx, tenant.id, late, hours=5)
        _, samples = _scrape(client)
        assert _value(samples, "memwarden_review_sla_overdue_changes", tenant=tenant.id) == 0  # no SLA: none
        set_review_sla(ctx, tenant_id=tenant.id, duration="4h", actor=ACTOR)
        text_out, samples = _scrape(client)
    assert _value(samples, "memwarden_review_sla_overdue_changes", tenant=tenant.id) == 1
    assert _value(samples, "memwarden_review_pending_changes", tenant=tenant.id) == 2
    assert ("memwarden_review_sla_overdue_changes", frozenset({("tenant", other.id)})) in samples
    assert _value(samples, "memwarden_review_sla_overdue_changes", tenant=other.id) == 0
    assert "Quokka" not in text_out and late not in text_out


@pytest.fixture
def receivers():
    made = [Receiver(), Receiver()]
    yield made
    for r in made:
        r.close()


def _breach_events(ctx, tenant_id):
    return [e for e in events.read_after(ctx.db.sessions, tenant_id, 0, 1000) if e.type == "review.sla_breached"]


def test_a_breach_is_announced_once_by_event_and_webhooks(client, ctx, tenant, agent, make_key, receivers):
    plain, slack = receivers
    owner = bearer(make_key(scopes="events:read"))
    hooks = []
    for _receiver, body in ((plain, {"url": plain.url}),
                           (slack, {"url": slack.url, "events": ["review.sla_breached"], "format": "slack"})):
        created = client.post("/v1/webhooks", json=body, headers=owner)
        assert created.status_code == 201, created.text
        hooks.append(assert_schema("webhook.response", created.json()))
    assert [h["format"] for h in hooks] == ["json", "slack"]
    assert_schema("webhooks.response", client.get("/v1/webhooks", headers=owner).json())

    late = _stage(client, agent)
    within = _stage(client, agent, content="Still within the SLA.")
    _backdate(ctx, tenant.id, late, hours=3)
    ctx_public = type(ctx)(ctx.settings.with_changes(public_url="https://mw.example.com/"), ctx.db)
    assert review_sla.announce(ctx) == 0  # no SLA set: nothing is overdue
    set_review_sla(ctx, tenant_id=tenant.id, duration="2h", actor=ACTOR)

    assert review_sla.announce(ctx) == 1
    assert review_sla.announce(ctx) == 0  # the second round finds it announced
    breaches = _breach_events(ctx, tenant.id)
    assert len(breaches) == 1
    data = breaches[0].payload
    assert data["changeId"] == late and data["agentId"] == "helper" and data["slaSeconds"] == 7200
    assert 3 * 3600 - 60 <= data["waitedSeconds"] <= 3 * 3600 + 600
    assert assert_schema("event", {"id": breaches[0].id, "type": breaches[0].type, "data": data})
    assert within not in json.dumps([e.payload for e in _breach_events(ctx, tenant.id)])

    while webhooks.deliver_due(ctx_public):  # the plain hook also gets the change.proposed events
        pass
    assert webhooks.deliver_due(ctx_public) == 0
    breach_bodies = [json.loads(b) for _, b in plain.requests if json.loads(b)["type"] == "review.sla_breached"]
    assert len(breach_bodies) == 1 and breach_bodies[0]["data"]["changeId"] == late
    assert len(slack.requests) == 1  # filtered to review.sla_breached, delivered once
    headers, raw = slack.requests[0]
    message = json.loads(raw)
    assert list(message) == ["text"] and headers["x-memwarden-signature"].startswith("sha256=")
    assert late in message["text"] and "3 h" in message["text"] and "2h SLA" in message["text"]
    assert f"<https://mw.example.com/review/{late}|{late}>" in message["text"]
    assert "https://mw.example.com/review" in message["text"]
    for _, body in plain.requests + slack.requests:
        assert b"Quokka" not in body and b"lantern" not in body


def test_decided_changes_are_not_announced(client, ctx, tenant, agent, reviewer):
    change = _stage(client, agent)
    _backdate(ctx, tenant.id, change, hours=3)
    set_review_sla(ctx, tenant_id=tenant.id, duration="1h", actor=ACTOR)
    assert client.post(f"/v1/changes/{change}/reject", json={"reason": "no"}, headers=reviewer).status_code == 200
    assert review_sla.announce(ctx) == 0 and _breach_events(ctx, tenant.id) == []


def test_webhook_format_must_be_known(client, make_key):
    assert_error(client.post("/v1/webhooks", json={"url": "https://hooks.example.com/x", "format": "teams"},
                             headers=bearer(make_key(scopes="events:read"))), 422, "validation_error")


def test_digest_lists_what_waits_for_each_deciding_role(client, ctx, tenant, agent):
    for name, role, agents in (("helpers", "reviewer", "helper*"), ("boss", "admin", "*"), ("look", "viewer", "*")):
        user = create_user(ctx, username=f"{name}-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role=role,
                           actor=ACTOR)
        if agents != "*":
            from app.services.tenancy.users import set_role

            set_role(ctx, user_id=user.id, tenant_id=tenant.id, role=role, agents=[agents], actor=ACTOR)
    late = _stage(client, agent, agent_id="helper-1")
    _stage(client, agent, agent_id="other", content="From another agent.")
    _backdate(ctx, tenant.id, late, hours=30)
    set_review_sla(ctx, tenant_id=tenant.id, duration="1d", actor=ACTOR)

    report = review_sla.digest(ctx, tenant.id)
    assert report["slaSeconds"] == 86400 and report["waiting"] == 2 and report["overdue"] == 1
    people = {r["username"].split("-")[0]: r for r in report["reviewers"]}
    assert set(people) == {"helpers", "boss"}  # viewers cannot decide
    assert (people["helpers"]["waiting"], people["helpers"]["overdue"], people["helpers"]["agents"]) == (1, 1, ["helper*"])
    assert (people["boss"]["waiting"], people["boss"]["overdue"]) == (2, 1)
    assert sum(people["boss"]["byRisk"].values()) == 2
    assert 30 * 3600 - 60 <= people["helpers"]["oldestAgeSeconds"] <= 30 * 3600 + 600
    assert "Quokka" not in json.dumps(report)


def test_admin_page_sets_the_review_sla(client, ctx, tenant):
    from tests.harness import csrf_token_in

    user = create_user(ctx, username=f"slaadm-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="admin",
                       actor=ACTOR)
    web_sign_in(client, user.username, PASSWORD, "/admin")
    page = client.get("/admin").text
    assert 'data-testid="review-sla"' in page and 'value="off"' in page
    csrf = csrf_token_in(page)
    hx = {"HX-Request": "true"}
    saved = client.post("/admin/review-sla", data={"csrf_token": csrf, "review_sla": "6h"}, headers=hx)
    assert saved.status_code == 200 and "Review SLA: 6h." in saved.text and 'value="6h"' in saved.text
    assert tenant_review_sla(ctx, tenant.id) == 6 * 3600
    bad = client.post("/admin/review-sla", data={"csrf_token": csrf, "review_sla": "soon"}, headers=hx)
    assert bad.status_code == 422 and tenant_review_sla(ctx, tenant.id) == 6 * 3600
    assert client.post("/admin/review-sla", data={"review_sla": "1h"}, headers=hx).status_code == 403  # no CSRF token


def test_a_tenant_closed_by_an_audit_alarm_is_announced_once_it_reopens(client, ctx, tenant, agent):
    from app.repos.audit import audit_alarms as alarms_repo

    change = _stage(client, agent)
    _backdate(ctx, tenant.id, change, hours=3)
    set_review_sla(ctx, tenant_id=tenant.id, duration="1h", actor=ACTOR)
    with ctx.db.sessions.begin() as session:
        assert alarms_repo.raise_alarm(session.connection(), chain_id=f"tenant:{tenant.id}", tenant_id=tenant.id,
                                       first_bad_seq=1, reason="test", detail="", detected_by="test")
    assert review_sla.announce(ctx) == 0  # refused at commit, nothing kept, no exception escapes
    assert _breach_events(ctx, tenant.id) == []
    with ctx.db.sessions.begin() as session:
        session.execute(text("UPDATE audit_chain_alarms SET cleared_at = now() WHERE tenant_id = :t"), {"t": tenant.id})
    assert review_sla.announce(ctx) == 1 and len(_breach_events(ctx, tenant.id)) == 1
