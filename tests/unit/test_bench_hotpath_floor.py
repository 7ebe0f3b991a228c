"""`bench hotpath`'s floor (issue 25 goal 1): the sum of its parts' medians, and each operation's
ratio to it judged against the goal."""

from app.bench.hotpath import floor_summary, near_floor


def test_the_floor_is_the_sum_of_its_parts_medians():
    floor = floor_summary({"embedding_ms": [4.0, 5.0, 6.0], "healthz_ms": [0.5, 0.7, 0.6],
                           "durable_commit_ms": [0.3, 0.2, 0.4]})
    assert floor["embedding_ms"] == {"p50": 5.0, "p95": 6.0}
    assert floor["floor_ms_p50"] == 5.9
    assert floor["samples"] == 3


def _result(remember_p50, remember_p95, recall_p50, recall_p95, cpu):
    return {"remember": {"wall_ms_in_process": {"p50": remember_p50, "p95": remember_p95},
                         "cpu_ms_per_request": {"p50": cpu}},
            "recall": {"wall_ms_in_process": {"p50": recall_p50, "p95": recall_p95}}}


def test_ratios_to_the_floor_decide_the_goal():
    floor = {"floor_ms_p50": 10.0}
    met = near_floor(_result(15.0, 20.0, 12.0, 19.0, cpu=10.5), floor, embed_cpu=7.0)
    assert met["over_floor"] == {"remember": {"p50": 1.5, "p95": 2.0}, "recall": {"p50": 1.2, "p95": 1.9}}
    assert met["remember_cpu_over_embedding_cpu"] == 1.5
    assert all(met["goals"].values())

    missed = near_floor(_result(16.0, 20.0, 12.0, 21.0, cpu=11.0), floor, embed_cpu=7.0)
    assert {name for name, ok in missed["goals"].items() if not ok} == {
        "remember_p50_over_floor_le_1.5", "recall_p95_over_floor_le_2.0", "remember_cpu_over_embedding_cpu_le_1.5"}
