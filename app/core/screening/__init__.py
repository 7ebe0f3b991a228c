"""Write screening: named risk flags with evidence spans for a write, before it is stored or staged.

Pure code — no network, no database. The caller passes what screening cannot look up itself:
the texts of the nearest live memories (for ``contradiction``), the live FSM of the same name (for
``fsm_widening``) and the source globs the key may assert (for ``provenance_laundering``).

    result = screen(content, memory_type="semantic", tags=[...], metadata={...}, source="system",
                    live=["User lives in Porto"], live_fsm=None, allowed_sources=())
    result.risk          # "none" | "low" | "medium" | "high": the highest flag severity
    result.to_json()     # [{"name", "severity", "score", "evidence": [{"field", "start", "end"}]}]

Screening reads the *redacted* payload (it runs after SR-1), so secrets redaction caught are
markers by then. Evidence is offsets only; nothing here returns or logs the text itself.
One module per detector; each documents its evidence kinds, weights and known limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from app.core.screening import contradiction, exfiltration, fsm_widening, hidden, injection, provenance, sensitive
from app.core.screening.flags import LEVELS, SEVERITIES, RiskFlag, Span, level_rank, text_fields

__all__ = ["FLAG_NAMES", "LEVELS", "SEVERITIES", "RiskFlag", "Screening", "Span", "level_rank", "screen"]

#: Every flag name a detector can raise (the values policies may match with ``risk_flags``).
FLAG_NAMES = (
    injection.NAME, exfiltration.NAME, hidden.NAME, sensitive.SECRET, sensitive.PII, fsm_widening.NAME,
    contradiction.NAME, provenance.NAME,
)


@dataclass(frozen=True)
class Screening:
    """The flags raised for one write, most severe first."""

    flags: tuple[RiskFlag, ...] = ()

    @property
    def risk(self) -> str:
        """The overall level: the highest severity among the flags, ``none`` without flags."""
        return max((f.severity for f in self.flags), key=level_rank, default="none")

    @property
    def names(self) -> list[str]:
        """Flag names, sorted (what audit events record)."""
        return sorted(f.name for f in self.flags)

    def to_json(self) -> list[dict[str, Any]]:
        """Flags in their stored/API shape."""
        return [f.to_json() for f in self.flags]


def screen(content: str, *, memory_type: str, tags: Sequence[str] = (), metadata: Mapping[str, Any] | None = None,
           source: str | None = None, live: Sequence[str] = (), live_fsm: str | None = None,
           allowed_sources: Sequence[str] = ()) -> Screening:
    """Run every detector over one write and return its flags."""
    fields = text_fields(content, tags, metadata)
    found: list[RiskFlag | None] = [
        injection.detect(fields),
        exfiltration.detect(fields),
        hidden.detect(fields),
        *sensitive.detect(fields),
        contradiction.detect(content, live) if memory_type != "procedural" else None,
        fsm_widening.detect(content, live_fsm) if memory_type == "procedural" else None,
        provenance.detect(source, metadata, fields, allowed_sources),
    ]
    flags = sorted((f for f in found if f is not None), key=lambda f: (-level_rank(f.severity), -f.score, f.name))
    return Screening(tuple(flags))
