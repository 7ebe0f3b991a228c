"""The shape every detector returns: named risk flags with evidence spans (never content).

A flag is ``{"name", "severity", "score", "evidence": [{"field", "start", "end"}]}``. ``field``
names where the evidence is (``content``, ``tags/0``, ``metadata/a/b`` as in redaction findings,
or ``source``); ``start``/``end`` are Unicode code point offsets into that field's stored value,
end exclusive. Evidence never carries text, so flags can be stored, shown and audited without
repeating what was written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from app.core.jsontext import pointer_segment

SEVERITIES = ("low", "medium", "high")
#: Overall risk levels, least to most; "none" when no detector fired.
LEVELS = ("none", *SEVERITIES)
_RANK = {level: rank for rank, level in enumerate(LEVELS)}
MAX_EVIDENCE = 20
"""Spans kept per flag; enough for a reviewer to find the pattern, bounded for hostile input."""


def level_rank(level: str) -> int:
    """Position of ``level`` in ``LEVELS`` (``none`` < ``low`` < ``medium`` < ``high``)."""
    return _RANK[level]


@dataclass(frozen=True)
class Span:
    """Where a detector saw something: a field and code point offsets into its value."""

    field: str
    start: int
    end: int

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "start": self.start, "end": self.end}


@dataclass(frozen=True)
class RiskFlag:
    """One named risk with a 0..1 score, its severity and the spans that raised it."""

    name: str
    severity: str
    score: float
    evidence: tuple[Span, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")
        object.__setattr__(self, "score", round(min(1.0, max(0.0, float(self.score))), 3))
        spans = sorted(set(self.evidence), key=lambda s: (s.field, s.start, s.end))
        object.__setattr__(self, "evidence", tuple(spans[:MAX_EVIDENCE]))

    def to_json(self) -> dict[str, Any]:
        """The stored and API shape of a flag."""
        return {"name": self.name, "severity": self.severity, "score": self.score,
                "evidence": [s.to_json() for s in self.evidence]}


def severity_for(score: float, *, medium: float, high: float) -> str:
    """Map a score to a severity with a detector's two thresholds."""
    if score >= high:
        return "high"
    if score >= medium:
        return "medium"
    return "low"


def combine(weights: Iterable[float]) -> float:
    """Noisy-OR of independent signal weights: 1 - prod(1 - w)."""
    miss = 1.0
    for w in weights:
        miss *= 1.0 - w
    return 1.0 - miss


@dataclass(frozen=True)
class TextField:
    """One string of the write that detectors read: its field path and value."""

    field: str
    text: str


def text_fields(content: str, tags: Sequence[str] = (), metadata: Mapping[str, Any] | None = None
                ) -> list[TextField]:
    """Content, each tag and every string in metadata (walked like redaction does, same paths)."""
    fields = [TextField("content", content)]
    fields += [TextField(f"tags/{i}", tag) for i, tag in enumerate(tags)]
    fields += list(_walk(metadata or {}, "metadata"))
    return fields


def _walk(value: Any, path: str) -> Iterator[TextField]:
    if isinstance(value, str):
        yield TextField(path, value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(item, f"{path}/{pointer_segment(key)}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}/{i}")
