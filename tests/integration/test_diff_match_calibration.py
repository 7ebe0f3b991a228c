"""The strong-match threshold of review diffs stays where `memwarden bench diff-match` puts it."""

from app.bench.diff_match import measure
from app.core.diff import STRONG_MATCH_COSINE
from app.embeddings import get_embedder


def test_the_threshold_separates_related_from_unrelated_memories():
    report = measure(get_embedder("local"))
    low, high = report["optimal_range"]
    assert low <= STRONG_MATCH_COSINE <= high
    shown, related = map(int, report["current"]["related_shown"].split("/"))
    hidden, unrelated = map(int, report["current"]["unrelated_hidden"].split("/"))
    assert related >= 40 and unrelated >= 700
    assert hidden / unrelated >= 0.98 and shown / related >= 0.8
