"""Regex signals: the building block of the text detectors (injection, exfiltration).

Each signal is a kind of evidence with a weight. A detector runs its signals over every text field
of a write (folded, see ``normalize``), keeps the strongest weight per kind, and combines kinds as a
noisy-OR: two independent kinds of evidence score higher than either alone, repeating one kind
does not. Only the first ``SCAN_LIMIT`` characters of a field are searched (hidden-character
checks read everything); every pattern uses bounded gaps so matching stays linear.
"""

from __future__ import annotations

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


def signal(kind: str, weight: float, pattern: str, inner: str | None = None) -> Signal:
    """Compile a signal; patterns are written for lower-case text, multiline. ``inner``: a second
    pattern searched only inside each match of ``pattern`` (e.g. an order inside an HTML comment).
    Two steps keep matching linear where one pattern would retry its gap from every opener."""
    return Signal(kind, weight, re.compile(pattern, re.MULTILINE),
                  re.compile(inner, re.MULTILINE) if inner is not None else None)


@dataclass(frozen=True)
class Thresholds:
    """Scores at which a detector's flag becomes medium / high (calibrated on the dev split)."""

    medium: float
    high: float


def run_signals(name: str, signals: Sequence[Signal], fields: Sequence[TextField],
                thresholds: Thresholds) -> tuple[RiskFlag | None, set[str]]:
    """The flag ``name`` (or None) and the kinds of evidence that were seen."""
    best: dict[str, float] = {}
    spans: list[Span] = []
    for item in fields:
        folded = fold(item.text[:SCAN_LIMIT])
        for sig in signals:
            for m in sig.pattern.finditer(folded.text):
                if sig.inner is not None and not sig.inner.search(folded.text, m.start(), m.end()):
                    continue
                start, end = folded.span(*m.span())
                spans.append(Span(item.field, start, end))
                best[sig.kind] = max(best.get(sig.kind, 0.0), sig.weight)
    if not best:
        return None, set()
    score = combine(best.values())
    severity = severity_for(score, medium=thresholds.medium, high=thresholds.high)
    return RiskFlag(name, severity, score, tuple(spans)), set(best)
