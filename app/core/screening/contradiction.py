"""``contradiction``: the write restates a fact of a live memory with another value or polarity.

The service passes the texts of the nearest live memories (same agent and user); each is compared
with ``app.core.diff.detect_contradiction`` (subject/relation/value frames, negation and value
change, the same heuristic the review diff shows). Most contradictions are honest updates ("Bob
lives in Lisbon" after "Bob lives in Porto"): medium. A contradiction about something an attacker
gains by changing — money (bank, IBAN, account, payee, wallet), health (allergy, medication, dose,
blood type), identity and contact (email, phone, address, password, emergency contact) — is high.
Evidence points at the new value in the content (the whole content when it cannot be located).
"""

from __future__ import annotations

import re
from typing import Sequence

from app.core.diff import detect_contradiction
from app.core.screening.flags import RiskFlag, Span

NAME = "contradiction"
SENSITIVE_SCORE, ORDINARY_SCORE = 0.8, 0.5
_SENSITIVE = re.compile(
    r"\b(?:bank|iban|account|routing|sort code|swift|bic|payee|beneficiary|wallet|crypto|bitcoin|card|"
    r"salary|payment|pay|allerg\w*|medication|medicine|dose|dosage|blood|insulin|prescription|diagnos\w*|"
    r"pharmacy|doctor|email|e-mail|phone|mobile|number|address|password|passcode|pin|emergency|"
    r"next of kin|guardian|lawyer|ssn|passport)\b")


def detect(content: str, live: Sequence[str]) -> RiskFlag | None:
    """The ``contradiction`` flag of ``content`` against the nearest live memories' texts, or None."""
    best: tuple[float, Span] | None = None
    for existing in live:
        if not existing:
            continue
        found = detect_contradiction(content, existing)
        if found is None:
            continue
        sensitive = bool(_SENSITIVE.search(f"{found.frame} {found.old_value} {found.new_value}".lower()))
        score = SENSITIVE_SCORE if sensitive else ORDINARY_SCORE
        value = found.new_value.removeprefix("not ")
        start = content.lower().find(value.lower()) if value else -1
        span = Span("content", start, start + len(value)) if start >= 0 else Span("content", 0, len(content))
        if best is None or score > best[0]:
            best = (score, span)
    if best is None:
        return None
    score, span = best
    return RiskFlag(NAME, "high" if score >= SENSITIVE_SCORE else "medium", score, (span,))
