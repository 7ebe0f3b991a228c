"""The blast radius from the lineage walk's steps (`app.core.lineage`): the earliest, then shortest
path to each memory is kept and rebuilt edge by edge, and a memory only past the depth bound marks
its root truncated (a cycle that keeps walking does not)."""

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from app.core.lineage import radius

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Step:
    root_id: str
    memory_id: str
    depth: int
    tainted_at: datetime
    parent: str | None = None
    parent_tainted_at: datetime | None = None
    kind: str | None = None
    edge_via: str | None = None


def t(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_the_earliest_then_shortest_path_is_kept_and_rebuilt():
    steps = [
        Step("p", "p", 0, t(0)),
        Step("p", "a", 1, t(5), "p", t(0), "merge", "chg_1"),
        Step("p", "b", 2, t(9), "a", t(5), "consolidation", "cns_1"),
        Step("p", "b", 1, t(20), "p", t(0), "supersede", "chg_2"),  # shorter, but later
        Step("p", "c", 3, t(12), "b", t(9), "compaction", "cmp_1"),
    ]
    found = radius(steps, max_depth=16)
    reached = found.by_root["p"]
    assert set(reached) == {"a", "b", "c"}
    assert reached["b"].path == ("p", "a", "b") and reached["b"].kinds == ("merge", "consolidation")
    assert reached["c"].path == ("p", "a", "b", "c") and reached["c"].vias == ("chg_1", "cns_1", "cmp_1")
    assert reached["c"].tainted_at == t(12) and reached["c"].depth == 3
    assert found.truncated == frozenset() and found.derived_ids() == {"a", "b", "c"}
    assert found.first_tainted() == {"a": t(5), "b": t(9), "c": t(12)}


def test_a_memory_only_past_the_bound_truncates_its_root_and_a_cycle_does_not():
    chain = [Step("p", "p", 0, t(0)), Step("p", "a", 1, t(1), "p", t(0), "merge"),
             Step("p", "b", 2, t(2), "a", t(1), "merge")]
    beyond = radius([*chain, Step("p", "c", 3, t(3), "b", t(2), "merge")], max_depth=2)
    assert set(beyond.by_root["p"]) == {"a", "b"} and beyond.truncated == {"p"}
    cycle = radius([*chain, Step("p", "a", 3, t(3), "b", t(2), "merge")], max_depth=2)
    assert set(cycle.by_root["p"]) == {"a", "b"} and cycle.truncated == frozenset()


def test_roots_are_kept_apart():
    steps = [Step("p", "p", 0, t(0)), Step("q", "q", 0, t(0)), Step("p", "x", 1, t(1), "p", t(0), "merge"),
             Step("q", "x", 1, t(4), "q", t(0), "merge"), Step("q", "p", 1, t(2), "q", t(0), "merge")]
    found = radius(steps, max_depth=4)
    assert set(found.by_root["p"]) == {"x"} and set(found.by_root["q"]) == {"x", "p"}
    assert found.by_root["q"]["x"].tainted_at == t(4)
    assert found.first_tainted()["x"] == t(1)
