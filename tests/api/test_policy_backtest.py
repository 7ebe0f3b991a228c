"""Every policy change is backtested before it goes live, against the real database: a change that
would admit known attacks or writes a reviewer rejected, with no one deciding, is refused unless an
admin overrides it, and the audit log records the backtest and the override (never the reason's text)."""

import hashlib
import json

import pytest
from sqlalchemy import text

from tests.harness import bearer
from tests.schema_check import assert_error, assert_schema

TRUST_BOT = {"rules": [{"id": "trust-support-bot", "match": {"agents": ["support-bot"]}, "action": "allow"}]}
REVIEW_ALL = {"rules": [{"id": "review-all", "match": {"operations": ["remember"]}, "action": "require_approval"}]}
MARKER = "zq-marker-7781 the printer code is 4411"


@pytest.fixture
def admin(make_key):
    return bearer(make_key(scopes="admin"))


def _policy_events(ctx, tenant_id):
    with ctx.db.sessions() as session:
        rows = session.execute(text("SELECT entry FROM audit_entries WHERE tenant_id = :t"
                                    " AND event_type = 'policy.changed' ORDER BY seq"), {"t": tenant_id}).scalars().all()
    return [json.loads(bytes(r))["data"] for r in rows]


def test_a_catch_all_allow_is_refused_with_the_known_attacks_it_would_admit(ctx, client, tenant, admin):
    before = client.get("/v1/policy", headers=admin)
    assert before.status_code == 200, before.text
    response = client.put("/v1/policy", headers=admin, json={"policy": TRUST_BOT})
    error = assert_error(response, 409, "backtest_failed")
    report = assert_schema("backtest", error["details"])
    assert report["newly_admitted_harmful"]["known_attack"] == report["blocking"] > 0
    assert report["named"] and all(n["rule_id"] == "trust-support-bot" for n in report["named"])
    assert any(n["agent_id"] == "support-bot" and n["origin"] == "corpus" for n in report["named"])
    # Nothing changed: the policy in force and the audit log are as before.
    assert client.get("/v1/policy", headers=admin).json() == before.json()
    assert _policy_events(ctx, tenant.id) == []


def test_an_override_goes_ahead_and_the_log_keeps_its_counts_and_a_digest_of_the_reason(ctx, client, tenant, admin):
    reason = "support-bot only writes canned FAQ answers from a vetted CMS"
    response = client.put("/v1/policy", headers=admin, json={"policy": TRUST_BOT, "override_reason": reason})
    assert response.status_code == 200, response.text
    body = assert_schema("policy.response", response.json())
    assert body["policy"]["rules"][0]["id"] == "trust-support-bot" and body["backtest"]["blocking"] > 0
    [event] = _policy_events(ctx, tenant.id)
    assert event["backtest"]["override"] is True and event["backtest"]["blocking"] == body["backtest"]["blocking"]
    assert event["backtest"]["override_reason_sha256"] == hashlib.sha256(reason.encode()).hexdigest()
    assert reason not in json.dumps(event)


def test_a_tightening_change_passes_and_a_dry_backtest_changes_nothing(ctx, client, tenant, admin):
    dry = client.post("/v1/policy/backtest", headers=admin, json={"policy": TRUST_BOT})
    assert dry.status_code == 200, dry.text
    assert assert_schema("backtest", dry.json())["blocking"] > 0
    assert _policy_events(ctx, tenant.id) == []
    response = client.put("/v1/policy", headers=admin, json={"policy": REVIEW_ALL})
    assert response.status_code == 200, response.text
    assert response.json()["backtest"]["blocking"] == 0
    assert response.json()["backtest"]["newly_admitted"] == {"history": 0, "corpus": 0}
    [event] = _policy_events(ctx, tenant.id)
    assert event["backtest"]["blocking"] == 0 and "override" not in event["backtest"]


def test_a_write_a_reviewer_rejected_is_named_by_its_change_and_its_content_never_shown(client, admin, agent,
                                                                                        reviewer):
    assert client.put("/v1/policy", headers=admin, json={"policy": REVIEW_ALL}).status_code == 200
    staged = client.post("/v1/memories/remember", headers=agent, json={
        "agent_id": "notes-bot", "type": "semantic", "content": MARKER})
    assert staged.status_code == 202, staged.text
    change_id = staged.json()["change_id"]
    rejected = client.post(f"/v1/changes/{change_id}/reject", headers=reviewer, json={"reason": "not ours"})
    assert rejected.status_code == 200, rejected.text
    loosen = {"rules": [{"id": "trust-notes", "match": {"agents": ["notes-bot"], "types": ["semantic"],
                                                         "tags_within": []}, "action": "allow"}]}
    response = client.post("/v1/policy/backtest", headers=admin, json={"policy": loosen})
    assert response.status_code == 200, response.text
    report = response.json()
    assert {"ref": change_id, "origin": "history", "harms": ["rejected"], "family": None, "rule_id": "trust-notes",
            "agent_id": "notes-bot"} in report["named"]
    assert report["newly_admitted_harmful"]["rejected"] == 1 and report["replayed"]["history"] == 1
    assert "zq-marker-7781" not in response.text
    assert_error(client.put("/v1/policy", headers=admin, json={"policy": loosen}), 409, "backtest_failed")


@pytest.mark.parametrize("body, path", [
    ({}, "/"),
    ({"policy": TRUST_BOT, "suggestion_id": "sug_1"}, "/"),
    ({"policy": {"rules": [{"id": "x", "match": {}, "action": "explode"}]}}, None),
    ({"suggestion_id": "not-an-id"}, "/suggestion_id"),
])
def test_bad_backtests_are_422(client, admin, body, path):
    error = assert_error(client.post("/v1/policy/backtest", headers=admin, json=body), 422, "validation_error")
    if path is not None:
        assert any(d.get("path") == path for d in error["details"]), error


def test_an_unknown_suggestion_is_404_and_only_admins_may_backtest(client, admin, agent, reviewer):
    assert_error(client.post("/v1/policy/backtest", headers=admin, json={"suggestion_id": "sug_0nope"}), 404,
                 "not_found")
    for headers in (agent, reviewer):
        assert client.post("/v1/policy/backtest", headers=headers, json={"policy": REVIEW_ALL}).status_code == 403
        assert client.put("/v1/policy", headers=headers, json={"policy": REVIEW_ALL}).status_code == 403
    bad = client.put("/v1/policy", headers=admin, json={"policy": TRUST_BOT, "override_reason": ""})
    assert_error(bad, 422, "validation_error")


def test_the_cli_backtests_a_file_and_tenant_set_needs_an_override(ctx, tenant, tmp_path, monkeypatch, capsys):
    import app.cli
    import app.cli.common

    monkeypatch.setattr(app.cli.common, "open_context", lambda settings: ctx)
    loose, tight = tmp_path / "loose.json", tmp_path / "tight.json"
    loose.write_text(json.dumps(TRUST_BOT))
    tight.write_text(json.dumps(REVIEW_ALL))
    assert app.cli.main(["policy", "backtest", "--tenant", tenant.name, "--policy-file", str(loose)]) == 1
    out = capsys.readouterr().out
    assert "known attack(s)" in out and "blocked" in out and "trust-support-bot" in out
    assert app.cli.main(["policy", "backtest", "--tenant", tenant.name, "--policy-file", str(tight), "--json"]) == 0
    assert assert_schema("backtest", json.loads(capsys.readouterr().out))["blocking"] == 0
    assert app.cli.main(["tenant", "set", "--tenant", tenant.name, "--policy-file", str(loose)]) == 2
    assert "known-bad" in capsys.readouterr().err
    assert _policy_events(ctx, tenant.id) == []
    assert app.cli.main(["tenant", "set", "--tenant", tenant.name, "--policy-file", str(loose),
                         "--override-reason", "vetted bot"]) == 0
    assert "(overridden)" in capsys.readouterr().out
    assert _policy_events(ctx, tenant.id)[0]["backtest"]["override"] is True
