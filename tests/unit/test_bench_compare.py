"""`memwarden bench compare`'s arithmetic: ratios are Memwarden ÷ memorywire per pair and percentile."""

from app.bench.compare import pair_report


def side(remember: list[float], recall: list[float]) -> dict:
    return {"remember_ms": remember, "recall_ms": recall,
            "quality": {"recall_at_k": 1.0, "no_match_empty": 0, "no_match_total": 8},
            "versions": {"memorywire": "0.3.0"}}


def test_ratio_is_ours_over_theirs_and_order_alternates():
    theirs = side([10.0] * 18 + [40.0, 40.0], [20.0] * 20)
    ours = side([5.0] * 18 + [8.0, 8.0], [30.0] * 20)
    first = pair_report(0, theirs, ours, {"memorywire": 1.0, "memwarden": 1.0})
    assert first["ratio_memwarden_over_memorywire"]["remember"] == {"p50": 0.5, "p95": 0.2}
    assert first["ratio_memwarden_over_memorywire"]["recall"] == {"p50": 1.5, "p95": 1.5}
    assert first["order"] == "memorywire first"
    assert pair_report(1, theirs, ours, {})["order"] == "memwarden first"
    assert first["memorywire"]["versions"] == {"memorywire": "0.3.0"}
