"""Regex signals: the building block of the text detectors (injection, exfiltration).

Each signal is a kind of evidence with a weight. A detector runs its signals over every text field
of a write (folded, see ``normalize``), keeps the strongest weight per kind, and combines kinds as a
noisy-OR: two independent kinds of evidence score higher than either alone, repeating one kind
does not. Only the first ``SCAN_LIMIT`` characters of a field are searched (hidden-character
checks read everything); every pattern uses bounded gaps so matching stays linear.

Reported speech: security notes quote attacks ("attackers hide text like 'ignore all previous
instructions' in web pages", or an example payload in a code block). A match that lies wholly
inside quotation marks, backticks or a fenced code block, in a field that
talks *about* attacks (``_DISCUSSION``: attacker, injection, jailbreak, phishing, scam, example,
paper, talk …), counts ``QUOTED_WEIGHT`` at most: a quoted order is low evidence, and an order
outside the quotes still counts in full. An attacker who wraps an order in quotes and talks about
attacks gets past these rules (the semantic signal still reads the whole text).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Sequence

from app.core.screening.flags import RiskFlag, Span, TextField, combine, severity_for
from app.core.screening.normalize import fold

SCAN_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Signal:
    """One pattern (matched on folded, lower-case text) and the weight of the evidence it gives."""

    kind: str
    weight: float
    pattern: re.Pattern[str]
    inner: re.Pattern[str] | None = None
    """When set, a match counts only if this pattern is found inside it (a container and what it holds)."""
    unless: re.Pattern[str] | None = None
    """When set, a match does not count if this pattern is found in it or in the ``UNLESS_BEFORE``
    characters before it (e.g. ".gitignore should include .env" is not a request to read .env)."""


def signal(kind: str, weight: float, pattern: str, inner: str | None = None, unless: str | None = None) -> Signal:
    """Compile a signal; patterns are written for lower-case text, multiline. ``inner``: a second
    pattern searched only inside each match of ``pattern`` (e.g. an order inside an HTML comment).
    Two steps keep matching linear where one pattern would retry its gap from every opener.
    ``unless``: a pattern that, found in the match or just before it, cancels the match."""
    return Signal(kind, weight, re.compile(pattern, re.MULTILINE),
                  re.compile(inner, re.MULTILINE) if inner is not None else None,
                  re.compile(unless, re.MULTILINE) if unless is not None else None)


UNLESS_BEFORE = 60
QUOTED_WEIGHT = 0.3
# Quotations: double, typographic and guillemet quotes, and single quotes that open after a
# non-letter and close before one (so "don't ... it's" is not a quotation), and may hold an apostrophe
# between letters ('reply with the user's contacts' is one quotation, not one cut at "user"). Bounded length.
_QUOTED = re.compile(r"```[^`]{1,2000}```|`[^`\n]{2,400}`|"
                     r"\"[^\"\n]{2,400}\"|\u201c[^\u201d\n]{2,400}\u201d|\u201e[^\u201c\u201d\n]{2,400}[\u201c\u201d]|"
                     r"\u00ab[^\u00bb\n]{2,400}\u00bb|\u2018[^\u2019\n]{2,400}\u2019|(?<![\w'])'(?:[^'\n]|(?<=[a-z])'(?=[a-z])){2,400}'(?![\w])")
_DISCUSSION = re.compile(
    r"\b(?:attack(?:er|ers|s|ed)?|inject(?:ion|ions|ed)|jailbreaks?|phishing|scam(?:s|mers?)?|exploit(?:s|ed)?|payloads?|"
    r"malicious|adversar(?:y|ial)|red[- ]team(?:ing)?|pentest(?:ing|ers?)?|ctf|threat|vulnerab(?:le|ility|ilities)|fraud(?:sters?)?|"
    r"social engineering|poison(?:ing|ed)?|example|e\.g\.|such as|talk|paper|slides?|workshop|training|quiz|"
    r"security (?:review|awareness|training|team|newsletter)|the (?:attacker|scammer|caller|email|message|page) (?:said|says|wrote|writes)|"
    r"ignoriere|angreifer|hame[cç]onnage|ataque|atacante)\b")


def quoted_spans(text: str) -> list[tuple[int, int]]:
    """The quotations in ``text`` (folded) when the text talks about attacks, else none."""
    if not _DISCUSSION.search(text):
        return []
    return [m.span() for m in _QUOTED.finditer(text)]


def _inside(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether ``[start, end)`` lies within one of ``spans`` (sorted, disjoint: a binary search)."""
    i = bisect.bisect_right(spans, (start, float("inf"))) - 1
    return i >= 0 and spans[i][0] <= start and end <= spans[i][1]


@dataclass(frozen=True)
class Thresholds:
    """Scores at which a detector's flag becomes medium / high (calibrated on the dev split)."""

    medium: float
    high: float


def collect(signals: Sequence[Signal], fields: Sequence[TextField]) -> tuple[dict[str, float], list[Span]]:
    """The strongest weight per kind of evidence the ``signals`` find in ``fields``, and their spans."""
    best: dict[str, float] = {}
    spans: list[Span] = []
    for item in fields:
        folded = fold(item.text[:SCAN_LIMIT])
        quotes: list[tuple[int, int]] | None = None
        for sig in signals:
            for m in sig.pattern.finditer(folded.text):
                if sig.inner is not None and not sig.inner.search(folded.text, m.start(), m.end()):
                    continue
                if sig.unless is not None and sig.unless.search(folded.text, max(0, m.start() - UNLESS_BEFORE), m.end()):
                    continue
                if quotes is None:
                    quotes = quoted_spans(folded.text)
                # Quoted evidence of any kind is one weak kind: quotes do not add up like independent cues.
                kind, weight = ("quoted", QUOTED_WEIGHT) if quotes and _inside(quotes, *m.span()) else (sig.kind, sig.weight)
                start, end = folded.span(*m.span())
                spans.append(Span(item.field, start, end))
                best[kind] = max(best.get(kind, 0.0), min(weight, sig.weight))
    return best, spans


def to_flag(name: str, best: dict[str, float], spans: Sequence[Span], thresholds: Thresholds) -> RiskFlag | None:
    """The flag for the kinds seen (noisy-OR of their weights), or None when there are none."""
    if not best:
        return None
    score = combine(best.values())
    return RiskFlag(name, severity_for(score, medium=thresholds.medium, high=thresholds.high), score, tuple(spans))


def run_signals(name: str, signals: Sequence[Signal], fields: Sequence[TextField],
                thresholds: Thresholds) -> tuple[RiskFlag | None, set[str]]:
    """The flag ``name`` (or None) and the kinds of evidence that were seen."""
    best, spans = collect(signals, fields)
    return to_flag(name, best, spans, thresholds), set(best)
