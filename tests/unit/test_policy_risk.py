"""Policies routing on write screening: `risk_flags`, `risk_at_least` and the high-risk baseline."""

from __future__ import annotations

import pytest

from app.core.policy import SCREENING_BASELINE, Policy, PolicyError, WriteRequest, default_policy


def req(flags=(), level="none", **kw) -> WriteRequest:
    return WriteRequest("remember", "agent-1", risk_flags=flags, risk_level=level, **kw)


def test_risk_flags_matches_any_listed_flag() -> None:
    policy = Policy.parse({"rules": [{"id": "deny-exfil", "match": {"risk_flags": ["exfiltration", "pii"]},
                                      "action": "deny"}]})
    assert policy.evaluate(req(["pii"], "low")).action == "deny"
    assert policy.evaluate(req(["prompt_injection"], "medium")).action == "allow"
    assert policy.evaluate(req()).action == "allow"


@pytest.mark.parametrize("level, expected", [("none", "allow"), ("low", "allow"), ("medium", "require_approval"),
                                             ("high", "require_approval")])
def test_risk_at_least_compares_levels(level: str, expected: str) -> None:
    policy = Policy.parse({"rules": [{"id": "review-medium", "match": {"risk_at_least": "medium"},
                                      "action": "require_approval"}]})
    assert policy.evaluate(req(["x"] if level != "none" else [], level)).action == expected


def test_risk_conditions_round_trip_and_are_validated() -> None:
    doc = {"rules": [{"id": "r", "enabled": True, "match": {"risk_flags": ["contradiction"], "risk_at_least": "high"},
                      "action": "require_approval", "approvals_required": 2}]}
    assert Policy.parse(doc).to_doc() == doc
    for bad in ({"risk_flags": ["not_a_flag"]}, {"risk_flags": []}, {"risk_at_least": "severe"}):
        with pytest.raises(PolicyError) as info:
            Policy.parse({"rules": [{"id": "r", "match": bad, "action": "deny"}]})
        assert info.value.problems[0]["path"].startswith("/rules/0/match/risk_")


def test_default_policy_stages_high_risk_and_lets_benign_and_medium_through() -> None:
    policy = default_policy()
    staged = policy.evaluate(req(["prompt_injection"], "high"))
    assert staged.action == "require_approval" and staged.rule_id == SCREENING_BASELINE.id
    assert policy.evaluate(req(["contradiction"], "medium")).action == "allow"
    assert policy.evaluate(req()).action == "allow"


def test_baseline_comes_after_tenant_rules_so_tenants_can_deny_or_waive() -> None:
    deny = Policy.parse({"rules": [{"id": "deny-injection", "match": {"risk_flags": ["prompt_injection"]},
                                    "action": "deny"}]})
    assert deny.evaluate(req(["prompt_injection"], "high")).action == "deny"
    assert deny.evaluate(req(["hidden_characters"], "high")).rule_id == SCREENING_BASELINE.id
    waive = Policy.parse({"rules": [{"id": "trusted-importer", "match": {"agents": ["importer"]}, "action": "allow"}]})
    assert waive.evaluate(WriteRequest("remember", "importer", risk_flags=["pii"], risk_level="high")).action == "allow"
    assert waive.evaluate(req(["pii"], "high")).action == "require_approval"
    assert SCREENING_BASELINE.id not in {r["id"] for r in waive.to_doc()["rules"]}  # not in the editable doc


def test_unknown_risk_level_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        req(level="extreme")
