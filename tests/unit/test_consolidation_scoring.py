"""Consolidation's judgement (pure): what a note states about the user, distinct-day mentions, the
traps that must not be promoted, the statement written, and the idempotency key."""

from datetime import UTC, datetime, timedelta

import numpy as np

from app.core import consolidation as core

NOW = datetime(2026, 3, 31, 12, tzinfo=UTC)


def item(i, content, days_ago, vector, confidence=0.9):
    return core.Item(f"mem_{i:02d}", content, confidence, NOW - timedelta(days=days_ago), None,
                     np.asarray(vector, dtype=np.float32))


def test_stance_reads_preferences_aversions_and_allergies_and_skips_hedges_and_routines():
    assert core.stance("Booked the Porto flight; the user asked for an aisle seat.") == core.Stance("prefers",
                                                                                                  "aisle seat")
    assert core.stance("Told the waiter the user is allergic to peanuts.") == core.Stance("is allergic to", "peanuts")
    assert core.stance("Skipped the overnight option: the user avoids red-eye flights.").relation == "avoids"
    assert core.stance("User asked whether the gym opens early.") is None
    assert core.stance("Sent the weekly status report to the team.") is None
    assert core.stance("") is None


def test_mentions_count_distinct_days_and_a_routine_is_never_promoted():
    same = [1.0, 0.0, 0.0]
    session = [item(i, "The user asked for extra pillows at the hotel.", 3 + i / 100, same) for i in range(3)]
    routine = [item(10 + i, "Sent the weekly status report to the team.", 7 * i + 1, same) for i in range(4)]
    scorer, thresholds = core.DefaultScorer(), core.Thresholds()
    [pillows] = scorer.clusters(session, NOW)
    assert pillows.mentions == 1 and len(pillows.members) == 3
    assert not core.promotable(pillows, thresholds) and "fewer than 3" in pillows.reasons[0]
    [weekly] = scorer.clusters(routine, NOW)
    assert weekly.mentions == 4 and weekly.stance == 0
    assert not core.promotable(weekly, thresholds) and "states no standing fact" in " ".join(weekly.reasons)


def test_notes_stating_one_fact_cluster_even_when_their_errands_embed_apart():
    # cosine 0.6 between the errands: below the 0.72 threshold, above the stance join's 0.45
    a, b = np.array([1.0, 0.0]), np.array([0.6, 0.8])
    notes = [item(1, "Booked dinner at Tasca; the user asked for a vegetarian menu.", 2, a),
             item(2, "Catering for the offsite: the user asked for a vegetarian menu.", 6, b),
             item(3, "Hotel breakfast: the user asked for a vegetarian menu.", 9, a),
             item(4, "Printed the boarding pass for Madrid.", 4, b)]
    clusters = core.DefaultScorer().clusters(notes, NOW)
    [fact] = [c for c in clusters if len(c.members) == 3]
    assert fact.ids == ["mem_01", "mem_02", "mem_03"] and fact.mentions == 3 and fact.stance == 1
    assert core.promotable(fact, core.Thresholds())
    assert core.DefaultWriter().statement(fact) == ("User prefers vegetarian menu.", "template", "prefers")


def test_the_key_is_the_window_and_its_sorted_sources():
    key = core.window_key("ten_1", "agent", "user", "promote", ["mem_b", "mem_a"])
    assert key == core.window_key("ten_1", "agent", "user", "promote", ["mem_a", "mem_b"])
    assert key != core.window_key("ten_2", "agent", "user", "promote", ["mem_a", "mem_b"])
    assert key != core.window_key("ten_1", "agent", None, "promote", ["mem_a", "mem_b"])
    assert key != core.window_key("ten_1", "agent", "user", "evict", ["mem_a", "mem_b"])
