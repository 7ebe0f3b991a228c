"""Reviewer diffs, similarity, duplicates and the contradiction heuristic."""

from __future__ import annotations

import random

import pytest

from app.core.diff import (
    DUPLICATE_COSINE,
    DUPLICATE_SIMILARITY,
    Contradiction,
    DiffLine,
    Segment,
    detect_contradiction,
    is_likely_duplicate,
    similarity,
    tokenize,
    unified_line_diff,
    unified_text,
    word_diff,
)

VOCAB = ["alice", "Bob", "teal", "red", "is", "the", "colour", "Zürich", "naïve", "42", "3.5",
         "x_y", "é", "日本", ",", ".", "!", "'", "-", "(", ")", "\u2019"]
SPACES = [" ", " ", " ", "  ", "\n", "\t", "\r\n", "\u00a0", ""]


def _random_text(rng: random.Random, base: list[str] | None = None) -> tuple[str, list[str]]:
    if base is not None and rng.random() < 0.8:
        words = list(base)
        for _ in range(rng.randint(0, 4)):
            op = rng.choice(("insert", "delete", "replace"))
            pos = rng.randint(0, len(words))
            if op == "insert" or not words:
                words.insert(pos, rng.choice(VOCAB))
            elif op == "delete":
                del words[min(pos, len(words) - 1)]
            else:
                words[min(pos, len(words) - 1)] = rng.choice(VOCAB)
    else:
        words = [rng.choice(VOCAB) for _ in range(rng.randint(0, 25))]
    return "".join(w + rng.choice(SPACES) for w in words), words


def _sides(segments: list[Segment]) -> tuple[str, str]:
    old = "".join(s.text for s in segments if s.op in ("equal", "delete"))
    new = "".join(s.text for s in segments if s.op in ("equal", "insert"))
    return old, new


def test_word_diff_round_trips_randomized() -> None:
    rng = random.Random(20240611)
    for _ in range(2000):
        old, words = _random_text(rng)
        new, _ = _random_text(rng, words)
        segments = word_diff(old, new)
        assert _sides(segments) == (old, new)
        assert all(s.text for s in segments)
        assert all(a.op != b.op for a, b in zip(segments, segments[1:])), segments
        assert all(s.op in ("equal", "insert", "delete") for s in segments)


def test_tokenize_is_lossless() -> None:
    rng = random.Random(7)
    for _ in range(500):
        text, _ = _random_text(rng)
        assert "".join(tokenize(text)) == text


def test_word_diff_shapes() -> None:
    assert word_diff("", "") == []
    assert word_diff("same text", "same text") == [Segment("equal", "same text")]
    assert word_diff("", "new") == [Segment("insert", "new")]
    assert word_diff("old", "") == [Segment("delete", "old")]
    assert word_diff("Alice's favourite colour is teal.", "Alice's favourite colour is red.") == [
        Segment("equal", "Alice's favourite colour is "),
        Segment("delete", "teal"),
        Segment("insert", "red"),
        Segment("equal", "."),
    ]


def test_word_diff_folds_whitespace_between_changes() -> None:
    assert word_diff("the red big car", "the blue small car") == [
        Segment("equal", "the "),
        Segment("delete", "red big"),
        Segment("insert", "blue small"),
        Segment("equal", " car"),
    ]


def test_similarity() -> None:
    assert similarity("", "") == 1.0
    assert similarity("a b c", "a b c") == 1.0
    assert similarity("Bob lives in Paris", "bob   lives in paris") == 1.0
    assert similarity("x", "") == 0.0
    assert similarity("completely different", "nothing shared here") == 0.0
    assert similarity("a b c d", "a b c e") == pytest.approx(0.75)
    assert 0.0 <= similarity("Alice's favourite colour is teal", "Alice's favourite colour is red") < 0.9


def test_is_likely_duplicate_thresholds() -> None:
    assert is_likely_duplicate(DUPLICATE_SIMILARITY, None)
    assert is_likely_duplicate(0.95, 0.1)
    assert not is_likely_duplicate(0.89, None)
    assert is_likely_duplicate(0.2, DUPLICATE_COSINE)
    assert not is_likely_duplicate(0.2, 0.91)
    assert not is_likely_duplicate(0.0, -1.0)


def test_unified_line_diff_kinds() -> None:
    old = "one\ntwo\nthree\nfour\n"
    new = "one\n2\nthree\nfour\nfive\n"
    lines = unified_line_diff(old, new, "a/notes.md", "b/notes.md")
    assert lines == [
        DiffLine("header", "--- a/notes.md"),
        DiffLine("header", "+++ b/notes.md"),
        DiffLine("hunk", "@@ -1,4 +1,5 @@"),
        DiffLine("context", " one"),
        DiffLine("remove", "-two"),
        DiffLine("add", "+2"),
        DiffLine("context", " three"),
        DiffLine("context", " four"),
        DiffLine("add", "+five"),
    ]
    assert all("\n" not in line.text for line in lines)


def test_unified_line_diff_equal_and_context() -> None:
    assert unified_line_diff("a\nb\n", "a\nb\n", "x", "y") == []
    assert unified_text("a\nb\n", "a\nb\n", "x", "y") == ""
    old = "".join(f"{i}\n" for i in range(20))
    new = old.replace("10\n", "ten\n")
    lines = unified_line_diff(old, new, "x", "y", context=1)
    assert [line.text for line in lines if line.kind == "context"] == [" 9", " 11"]


def test_unified_line_diff_trailing_newline() -> None:
    lines = unified_line_diff("a\nb", "a\nb\n", "x", "y")
    assert [(line.kind, line.text) for line in lines[2:]] == [
        ("hunk", "@@ -1,2 +1,2 @@"),
        ("context", " a"),
        ("remove", "-b"),
        ("note", "\\ No newline at end of file"),
        ("add", "+b"),
    ]
    # Changing a file without a final newline: no glued lines.
    text = unified_text("a\nb", "a\nc", "x", "y")
    assert text == "--- x\n+++ y\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"


def test_unified_line_diff_content_that_looks_like_headers() -> None:
    lines = unified_line_diff("x\n--- y\n", "x\n+++ y\n", "old", "new")
    assert [line.kind for line in lines] == ["header", "header", "hunk", "context", "remove", "add"]
    assert unified_text("", "new\n", "/dev/null", "b/f").splitlines() == [
        "--- /dev/null", "+++ b/f", "@@ -0,0 +1 @@", "+new"]


def test_unified_line_diff_splits_on_newline_only() -> None:
    lines = unified_line_diff("a\u2028b\n", "a\u2028c\n", "x", "y")
    assert [line.text for line in lines if line.kind in ("add", "remove")] == ["-a\u2028b", "+a\u2028c"]


POSITIVE = [
    # (existing, new, frame, old_value, new_value, kind)
    ("Alice's favourite colour is teal.", "Alice's favourite colour is red.",
     "alice's favourite colour is", "teal", "red", "value_change"),
    ("Bob lives in Paris", "Bob lives in Berlin", "bob lives in", "Paris", "Berlin", "value_change"),
    ("Alice likes olives.", "Alice does not like olives.", "alice likes", "olives", "not olives", "negation"),
    ("Carol works at Acme.", "Carol works at Globex.", "carol works at", "Acme", "Globex", "value_change"),
    ("Timezone: UTC", "timezone: Europe/Berlin", "timezone =", "UTC", "Europe/Berlin", "value_change"),
    ("theme = dark", "theme = light", "theme =", "dark", "light", "value_change"),
    ("The user prefers dark mode.", "The user prefers light mode.", "user prefers", "dark mode",
     "light mode", "value_change"),
    ("Alice is vegetarian.", "Alice is not vegetarian.", "alice is", "vegetarian", "not vegetarian",
     "negation"),
    ("Bob lives in Paris.", "Bob no longer lives in Paris.", "bob lives in", "Paris", "not Paris", "negation"),
    ("The capital of Australia is Sydney", "The capital of Australia is Canberra",
     "capital of australia is", "Sydney", "Canberra", "value_change"),
    ("Bob's email is bob@old.example. He likes tea.", "Met Bob today. Bob\u2019s email is bob@new.example.",
     "bob's email is", "bob@old.example", "bob@new.example", "value_change"),
    ("Dave is a smoker.", "Dave isn't a smoker", "dave is", "a smoker", "not a smoker", "negation"),
    ("Eve lives in Oslo", "Note: Eve lives in Rome", "eve lives in", "Oslo", "Rome", "value_change"),
    ("ALICE'S FAVORITE COLOR IS TEAL!", "alice's favourite colour is red", "alice's favourite colour is",
     "TEAL", "red", "value_change"),
    ("Frank doesn't speak French.", "Frank speaks French", "frank speaks", "not French", "French", "negation"),
]


@pytest.mark.parametrize(("existing", "new", "frame", "old_value", "new_value", "kind"), POSITIVE)
def test_contradiction_positives(existing: str, new: str, frame: str, old_value: str,
                                 new_value: str, kind: str) -> None:
    assert detect_contradiction(new, existing) == Contradiction(frame, old_value, new_value, kind)


NEGATIVE = [
    ("Alice's favourite colour is teal.", "Alice's favourite colour is teal"),  # same fact
    ("Alice's favourite colour is teal.", "Alice's favorite color is teal"),  # spelling paraphrase
    ("Alice's favourite colour is red", "Bob lives in Paris"),  # unrelated
    ("Bob lives in Paris", "Carol lives in Berlin"),  # other subject
    ("Alice likes tea", "Alice likes coffee"),  # many values can hold
    ("Alice is tall", "Alice is a doctor"),  # entity subject: different predicates
    ("Bob lived in Paris", "Bob lives in Berlin"),  # past vs present
    ("Alice does not like tea", "Alice doesn't like coffee"),  # both negative
    ("Bob lives in Paris", "Does Bob live in Berlin?"),  # question
    ("Bob lives in Paris and works at Acme", "Bob lives in Paris"),  # extra clause
    ("Bob lives in Paris", "Bob might live in Berlin"),  # hedged
    ("Bob lives in Paris, France", "Bob currently lives in Paris now."),  # fillers and qualifiers
    ("Note: call Bob tomorrow", "Note: buy milk"),  # generic labels are not keys
    ("", ""),
    ("Alice's favourite colour is teal", "Alice's favourite food is pizza"),  # other attribute
    ("The user prefers tea", "The user prefers window seats"),  # preferences about other things
    ("Alice lives in Paris", "She lives in Berlin"),  # no coreference
    ("The sky is blue", "The sky is big"),
    ("Alice likes coffee", "Alice does not like tea"),  # negation of another value
    ("Bob lives in Paris", "If Bob lives in Berlin, call him"),  # conditional
    ("We met at 10:30 in the lobby", "The meeting was moved to 11:00"),
    ("Alice's favourite colour is teal", "Teal is a colour Alice mentioned once."),
]


@pytest.mark.parametrize(("existing", "new"), NEGATIVE)
def test_contradiction_negatives(existing: str, new: str) -> None:
    assert detect_contradiction(new, existing) is None


def test_contradiction_skips_oversized_sentences() -> None:
    long_subject = "Bob " + "very " * 100
    assert detect_contradiction(long_subject + "lives in Berlin", long_subject + "lives in Paris") is None


def test_a_strong_match_needs_the_calibrated_cosine():
    from app.core.diff import STRONG_MATCH_COSINE, is_strong_match

    assert is_strong_match(STRONG_MATCH_COSINE) and is_strong_match(0.93)
    assert not is_strong_match(STRONG_MATCH_COSINE - 0.01) and not is_strong_match(None)


def test_a_sentence_read_from_the_cache_reads_as_the_first_time() -> None:
    """Screening's sentence caches hand every caller its own result: changing one changes no other."""
    from app.core.facts import facts
    from app.core.screening.contradiction import replaces

    first = facts("Bob lives in Porto.")
    first.append("changed by a caller")
    assert facts("Bob lives in Porto.") == first[:-1] and first[:-1]
    assert replaces("Bob lives in Lisbon.", "Bob lives in Porto.") == replaces("Bob lives in Lisbon.",
                                                                               "Bob lives in Porto.") is not None
