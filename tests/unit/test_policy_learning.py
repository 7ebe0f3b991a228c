"""Mining auto-approve suggestions from decisions (pure): support spread over occasions and days,
contrary decisions, the screening ceiling, matches no broader than their evidence, redundancy,
and the measured effect."""

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from app.core.policy import Match, WriteRequest
from app.core.policy_learning import Occasion, batches, describe, literal_glob, measure, mine, suggestion_id


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


AGENT_RULE = {"operations": ["remember"], "types": ["semantic"], "agents": ["support-bot"], "has_source": False,
              "tags_within": [], "risk_at_most": "none"}


def _spread(decisions):
    """Each decision its own occasion, on its own day."""
    return [Occasion(i, f"day-{i}") for i in range(len(decisions))]


def _mine(decisions, n, occasions=None, min_days=1):
    return mine(decisions, occasions or _spread(decisions), min_events=n, min_days=min_days)


def _matches(suggestions):
    return [s.match for s in suggestions]


def test_needs_min_occasions_and_no_contrary_one():
    approvals = [D("approved")] * 5
    assert _matches(_mine(approvals[:4], 5)) == []
    assert _matches(_mine(approvals, 5)) == [AGENT_RULE]
    assert _mine(approvals + [D("rejected")], 5) == []


def test_one_batch_is_one_piece_of_evidence_and_days_are_required():
    approvals = [D("approved")] * 30
    in_one_batch = [Occasion(0, "day-0")] * 30
    assert _mine(approvals, 5, in_one_batch) == []
    # Thirty batches on one day: enough occasions, not enough days.
    one_day = [Occasion(i, "day-0") for i in range(30)]
    assert _mine(approvals, 5, one_day, min_days=2) == []
    (found,) = _mine(approvals, 5, [Occasion(i, f"day-{i % 2}") for i in range(30)], min_days=2)
    assert (found.approved, found.events, found.days) == (30, 30, 2)


def test_batches_chain_one_persons_decisions_close_together():
    t0 = datetime(2026, 11, 30, 23, 59, 50, tzinfo=timezone.utc)
    at = [t0 + timedelta(seconds=s) for s in (0, 1, 2, 40, 41)]
    decided = [("alice", at[0]), ("alice", at[1]), ("bob", at[2]), ("alice", at[3]), ("alice", at[4]), ("bob", None)]
    got = batches(decided, gap_seconds=30)
    assert got[0].batch == got[1].batch != got[3].batch == got[4].batch  # a 39 s pause starts a new batch
    assert got[2].batch not in {got[0].batch, got[3].batch}  # another person is another occasion
    assert got[5].day is None and got[5].batch not in {g.batch for g in got[:5]}
    assert (got[0].day, got[3].day) == ("2026-11-30", "2026-12-01")
    assert len({g.batch for g in batches(decided, gap_seconds=0)}) == 6


def test_only_writes_without_screening_flags_are_learned():
    approvals = [D("approved", risk_level="low")] * 9 + [D("approved")] * 3 + [D("approved", risk_level="medium")] * 9
    (only,) = _mine(approvals, 3)
    assert only.match["risk_at_most"] == "none" and only.approved == 3
    assert _mine(approvals, 4) == []
    # A rejection of a flagged write does not contradict approvals of clean ones; of a clean one it does.
    assert _mine(approvals + [D("rejected", risk_level="low")], 3)[0].approved == 3
    assert _mine(approvals + [D("rejected")], 3) == []


def test_narrower_pattern_survives_a_rejection_elsewhere():
    notes = [D("approved", tags=("faq",))] * 5
    decisions = notes + [D("rejected", tags=("rumour",))]
    found = _matches(_mine(decisions, 5))
    assert found == [{"operations": ["remember"], "types": ["semantic"], "agents": ["support-bot"],
                      "has_source": False, "tags_any": ["faq"], "tags_within": ["faq"], "risk_at_most": "none"}]


def test_a_tag_rule_names_every_agent_it_was_learned_from_and_no_other():
    decisions = [D("approved", agent_id=f"support-{i}", tags=("kb-sync",)) for i in range(1, 21)]
    (found,) = _mine(decisions, 20)
    assert found.match["agents"] == sorted(f"support-{i}" for i in range(1, 21))
    assert found.match["tags_any"] == ["kb-sync"]
    match = Match.from_doc(found.match)
    assert match.matches(WriteRequest(operation="remember", agent_id="support-7", type="semantic", tags=("kb-sync",)))
    assert not match.matches(WriteRequest(operation="remember", agent_id="finance-bot", type="semantic",
                                          tags=("kb-sync",)))
    assert "support-1, support-10" in found.description and "kb-sync" in found.description


def test_the_match_is_no_broader_than_the_evidence():
    decisions = [D("approved", source="zendesk", tags=("faq", "hours"))] * 3 + [D("approved", source="zendesk",
                                                                                    tags=("faq",))] * 3
    (found,) = _mine(decisions, 6)
    assert found.match == {"operations": ["remember"], "types": ["semantic"], "agents": ["support-bot"],
                           "sources": ["zendesk"], "tags_any": ["faq", "hours"], "tags_within": ["faq", "hours"],
                           "risk_at_most": "none"}
    match = Match.from_doc(found.match)

    def write(**kw):
        return WriteRequest(**{"operation": "remember", "agent_id": "support-bot", "type": "semantic",
                               "source": "zendesk", "tags": ("faq",), **kw})
    assert match.matches(write())
    for other in (write(type="episodic"), write(tags=("faq", "payments")), write(tags=()), write(source=None),
                  write(source="crm"), write(agent_id="support-bot2")):
        assert not match.matches(other), other
    # Evidence without a source covers only writes without one.
    (sourceless,) = _mine([D("approved")] * 3, 3)
    assert not Match.from_doc(sourceless.match).matches(write(source="crm", tags=()))


def test_redundant_patterns_are_left_out():
    decisions = [D("approved", source="zendesk", tags=("faq",))] * 6
    assert len(_mine(decisions, 5)) == 1


def test_glob_characters_in_ids_are_literal_and_ids_are_stable():
    glob = literal_glob("bot[1]*?")
    assert Match(agents=(glob,)).matches(WriteRequest(operation="remember", agent_id="bot[1]*?"))
    assert not Match(agents=(glob,)).matches(WriteRequest(operation="remember", agent_id="bot1xx"))
    doc = {"operations": ["remember"], "agents": ["a"]}
    assert suggestion_id(doc) == suggestion_id(dict(reversed(doc.items()))) != suggestion_id({"agents": ["b"]})
    (found,) = _mine([D("approved", agent_id="bot*")] * 3, 3)
    assert found.match["agents"] == ["bot[*]"]


def test_the_description_says_exactly_what_is_covered():
    text = describe(AGENT_RULE)
    assert text.startswith("Auto-approve remembers by agent support-bot, of type semantic, with no tags, naming no "
                           "source: only writes screening raised no flag on and that carry no link, address, number, "
                           "command or standing instruction")
    many = {**AGENT_RULE, "agents": [f"agent-{'x' * 40}-{i}" for i in range(30)]}
    assert len(describe(many, limit=500)) <= 500 and "any of the 30" in describe(many, limit=500)


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
    match = {"operations": ["remember"], "types": ["semantic"], "agents": ["support-bot", "pay-bot"],
             "risk_at_most": "none"}
    policy = Policy.parse({"rules": [
        {"id": "pay-two-person", "match": {"agents": ["pay-*"]}, "action": "require_approval", "approvals_required": 2},
        {"id": "review-all", "match": {"operations": ["remember"]}, "action": "require_approval"}]})
    assert measure(match, window)["would_auto_approve"] == 3
    assert measure(match, window, policy)["would_auto_approve"] == 1
