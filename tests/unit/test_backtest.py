"""The policy backtest's replay: what a candidate admits that the policy in force does not, and why it is bad."""

from app.core.backtest import Replayed, corpus_agents, corpus_tags, harms_of, replay
from app.core.policy import DEFAULT_POLICY, Policy, WriteRequest

CURRENT = Policy.parse(DEFAULT_POLICY)


def _write(ref, origin="history", harms=(), agent="bot", flags=(), level="none", tags=(), family=None):
    return Replayed(ref, origin, WriteRequest(operation="remember", agent_id=agent, type="semantic", tags=tags,
                                              content="text", risk_flags=flags, risk_level=level), harms, family)


def test_a_catch_all_allow_newly_admits_flagged_known_attacks_and_rejected_writes():
    candidate = Policy.parse({"rules": [{"id": "trust-bot", "match": {"agents": ["bot"]}, "action": "allow"}]})
    writes = [_write("chg_1", harms=("rejected",), flags=("injection",), level="high"),
              _write("chg_2"),
              _write("atk_1@bot/none", "corpus", ("known_attack",), flags=("injection",), level="high", family="x"),
              _write("atk_1@other/none", "corpus", ("known_attack",), agent="other", flags=("injection",),
                     level="high", family="x")]
    report = replay(CURRENT, candidate, writes).to_json()
    assert report["replayed"] == {"history": 2, "corpus": 2}
    assert report["admitted_by_current"] == {"history": 1, "corpus": 0}  # chg_2 is unflagged: allowed today
    assert report["newly_admitted"] == {"history": 1, "corpus": 1}
    assert report["newly_admitted_harmful"] == {"known_attack": 1, "rejected": 1, "recovered": 0, "forgotten": 0}
    assert report["blocking"] == 2 and report["known_attack_families"] == {"x": 1}
    assert [(n["ref"], n["rule_id"]) for n in report["named"]] == [("chg_1", "trust-bot"), ("atk_1@bot/none", "trust-bot")]


def test_a_tightening_change_admits_nothing_new_and_counts_what_it_stages():
    candidate = Policy.parse({"rules": [{"id": "all", "match": {"operations": ["remember"]},
                                         "action": "require_approval"}]})
    report = replay(CURRENT, candidate, [_write("chg_1", harms=("forgotten",)), _write("chg_2")]).to_json()
    assert report["blocking"] == 0 and report["newly_admitted"] == {"history": 0, "corpus": 0}
    assert report["newly_staged"] == {"history": 2, "corpus": 0} and report["named"] == []


def test_forgotten_writes_are_named_but_do_not_block():
    candidate = Policy.parse({"rules": [{"id": "trust", "match": {"agents": ["bot"]}, "action": "allow"}]})
    report = replay(CURRENT, candidate, [_write("chg_1", harms=("forgotten",), flags=("x",), level="high")]).to_json()
    assert report["newly_admitted_harmful"]["forgotten"] == 1 and report["blocking"] == 0
    assert report["named"][0]["harms"] == ["forgotten"]


def test_what_became_of_a_decision_is_its_harm():
    assert harms_of("rejected", None, False) == ("rejected",)
    assert harms_of("approved", "pending", False) == ("recovered",)
    assert harms_of("approved", "forgotten", False) == harms_of("approved", "live", True) == ("forgotten",)
    assert harms_of("approved", "live", False) == ()


def test_known_attacks_are_replayed_as_the_agents_and_tags_a_candidate_names():
    candidate = Policy.parse({"rules": [
        {"id": "a", "match": {"agents": ["support-*", "billing"], "tags_any": ["faq"]}, "action": "allow"}]})
    assert corpus_agents(candidate, ["busy", "billing"]) == ["support-*", "billing", "busy", "agent"]
    assert corpus_tags(candidate) == [(), ("faq",)]
