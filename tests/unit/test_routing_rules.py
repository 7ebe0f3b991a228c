"""The router's pure rules: which agents a backend takes (the trigger's LIKE and recall's match
must agree), and fusion that drops what no governed record backs."""

from __future__ import annotations

import re

import pytest

from app.core import routing_rules as rules


def _like_match(agent_id: str, like: str) -> bool:
    """PostgreSQL LIKE with the default backslash escape, as the outbox trigger evaluates it."""
    out, i = [], 0
    while i < len(like):
        c = like[i]
        if c == "\\":
            out.append(re.escape(like[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.fullmatch("".join(out), agent_id, re.DOTALL) is not None


@pytest.mark.parametrize("pattern", ["*", "bot", "bot_a", "support-*", "a?c", "team:*:eu", "x.y@z"])
@pytest.mark.parametrize("agent", ["bot", "bot_a", "botXa", "support-1", "support", "abc", "a_c", "team:1:eu",
                                   "x.y@z", "team:1:us"])
def test_the_trigger_and_recall_agree_on_which_agents_a_backend_takes(pattern, agent):
    assert _like_match(agent, rules.agents_like(pattern)) == rules.agent_matches(agent, pattern)


def test_an_underscore_in_a_pattern_is_literal_not_a_wildcard():
    assert rules.agent_matches("bot_a", "bot_a") and not rules.agent_matches("botXa", "bot_a")


@pytest.mark.parametrize("bad", ["", "bot[ab]", "50%", "a b", "x" * 201])
def test_patterns_beyond_star_and_question_mark_are_refused(bad):
    with pytest.raises(ValueError):
        rules.agents_like(bad)


def test_ungoverned_hits_are_dropped_and_counted_before_fusion():
    backend = rules.StoreRanking("b", [("evil", 0.99), ("ref-1", 0.9)], governed={"ref-1": "mem_1"})
    fused = rules.fuse_governed("max", "memwarden", [("mem_2", 0.8)], [backend], k=5)
    assert fused.ids == ["mem_1", "mem_2"] and fused.dropped == 1
    assert fused.found_in == {"mem_2": ["memwarden"], "mem_1": ["b"]}


def test_without_the_drop_rule_a_confident_injector_wins_max_fusion():
    backend = rules.StoreRanking("b", [("evil", 0.99)], governed={})
    assert rules.fuse_governed("max", "memwarden", [("mem_2", 0.8)], [backend], k=1,
                               drop_ungoverned=False).ids == ["evil"]
