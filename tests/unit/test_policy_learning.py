"""Mining auto-approve suggestions from decisions (pure): support, contrary decisions, risk
ceilings, redundancy, and the measured effect."""

from dataclasses import dataclass

from app.core.policy import Match, WriteRequest
from app.core.policy_learning import literal_glob, measure, mine, suggestion_id


@dataclass(frozen=True)
class D:
    status: str
    agent_id: str = "support-bot"
    type: str | None = "semantic"
    source: str | None = None
    tags: tuple = ()
    risk_level: str = "none"
    memory_status: str | None = "live"
    hard_deleted: bool = False


def _matches(suggestions):
    return [s.match for s in suggestions]


def test_needs_min_decisions_and_no_contrary_one():
    approvals = [D("approved")] * 5
    assert _matches(mine(approvals[:4], 5)) == []
    assert _matches(mine(approvals, 5)) == [{"operations": ["remember"], "agents": ["support-bot"],
                                             "risk_at_most": "none"}]
    assert mine(approvals + [D("rejected")], 5) == []


def test_only_writes_without_screening_flags_are_learned():
    approvals = [D("approved", risk_level="low")] * 9 + [D("approved")] * 3 + [D("approved", risk_level="medium")] * 9
    (only,) = mine(approvals, 3)
    assert only.match["risk_at_most"] == "none" and only.approved == 3
    assert mine(approvals, 4) == []
    # A rejection of a flagged write does not contradict approvals of clean ones; of a clean one it does.
    assert mine(approvals + [D("rejected", risk_level="low")], 3)[0].approved == 3
    assert mine(approvals + [D("rejected")], 3) == []


def test_narrower_pattern_survives_a_rejection_elsewhere():
    notes = [D("approved", tags=("faq",))] * 5
    decisions = notes + [D("rejected", tags=("rumour",))]
    found = _matches(mine(decisions, 5))
    assert {"operations": ["remember"], "tags_any": ["faq"], "risk_at_most": "none"} in found
    assert all("agents" not in m or "tags_any" in m for m in found)  # the agent alone has a rejection


def test_redundant_patterns_are_left_out():
    decisions = [D("approved", source="zendesk", tags=("faq",))] * 6
    found = _matches(mine(decisions, 5))
    assert found == [{"operations": ["remember"], "agents": ["support-bot"], "risk_at_most": "none"}]


def test_glob_characters_in_ids_are_literal_and_ids_are_stable():
    glob = literal_glob("bot[1]*?")
    assert Match(agents=(glob,)).matches(WriteRequest(operation="remember", agent_id="bot[1]*?"))
    assert not Match(agents=(glob,)).matches(WriteRequest(operation="remember", agent_id="bot1xx"))
    doc = {"operations": ["remember"], "agents": ["a"]}
    assert suggestion_id(doc) == suggestion_id(dict(reversed(doc.items()))) != suggestion_id({"agents": ["b"]})


def test_measure_counts_what_it_would_have_approved_and_what_became_of_it():
    window = [D("approved"), D("approved", memory_status="forgotten"), D("approved", risk_level="high"),
              D("rejected"), D("approved", agent_id="other")]
    effect = measure({"operations": ["remember"], "agents": ["support-bot"], "risk_at_most": "high"}, window)
    assert effect == {"window": 5, "would_auto_approve": 3, "later_rejected": 1, "later_forgotten": 1,
                      "later_reverted": 0, "flagged": 0}


def test_measure_counts_an_approved_write_a_recover_pulled_back_as_reverted():
    # `memwarden recover` quarantines what a compromised agent wrote: the approved memory is pending
    # again, waiting for a person. A rule that would have approved it has a bad record.
    window = [D("approved"), D("approved", memory_status="pending"), D("rejected", memory_status="rejected")]
    effect = measure({"operations": ["remember"], "agents": ["support-bot"], "risk_at_most": "none"}, window)
    assert (effect["would_auto_approve"], effect["later_reverted"], effect["later_rejected"]) == (3, 1, 1)


def test_measure_against_the_tenant_policy_counts_only_what_the_rule_could_approve():
    # Under the tenant's own rules a learned rule gives way to a two-person rule (and a deny), so the
    # writes those cover are not what it "would have auto-approved".
    from app.core.policy import Policy

    window = [D("approved"), D("approved", agent_id="pay-bot"), D("approved", agent_id="pay-bot")]
    match = {"operations": ["remember"], "types": ["semantic"], "risk_at_most": "none"}
    policy = Policy.parse({"rules": [
        {"id": "pay-two-person", "match": {"agents": ["pay-*"]}, "action": "require_approval", "approvals_required": 2},
        {"id": "review-all", "match": {"operations": ["remember"]}, "action": "require_approval"}]})
    assert measure(match, window)["would_auto_approve"] == 3
    assert measure(match, window, policy)["would_auto_approve"] == 1
