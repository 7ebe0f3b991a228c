"""``contradiction``: the write restates a fact of a live memory with another value or polarity.

The service passes the texts of the nearest live memories (same agent and user); each is compared
by ``replaces``: the same subject and attribute with another value (``app.core.facts``: moves,
changes of employer, new phone numbers and e-mail addresses, new owners and titles, counts, in
several languages), or the same frame negated or given another value (``app.core.diff``'s
``detect_contradiction``). Approving a write that replaces a live memory retires it
(``app.services.supersession``). Most contradictions are honest updates ("Bob lives in Lisbon"
after "Bob lives in Porto"): medium. A contradiction about something an attacker gains by
changing — money (bank, IBAN, account, payee, wallet), health (allergy, medication, dose, blood
type), identity and contact (email, phone, address, password, emergency contact) — is high.
Evidence points at the new value in the content (the whole content when it cannot be located).
"""

from __future__ import annotations

import re
from typing import Sequence

from app.core.diff import Contradiction, detect_contradiction
from app.core.facts import Fact, facts
from app.core.screening.flags import RiskFlag, Span

NAME = "contradiction"
SENSITIVE_SCORE, ORDINARY_SCORE = 0.8, 0.5
PRONOUN_COSINE = 0.6
"""How similar two texts must be for "she" in one to be the person the other names (only a caller
that knows the similarity can say; screening's texts come without it)."""
_SENSITIVE = re.compile(
    r"\b(?:bank|iban|account|routing|sort code|swift|bic|payee|beneficiary|wallet|crypto|bitcoin|card|"
    r"salary|payment|pay|allerg\w*|medication|medicine|dose|dosage|blood|insulin|prescription|diagnos\w*|"
    r"pharmacy|doctor|email|e-mail|phone|mobile|number|address|password|passcode|pin|emergency|"
    r"next of kin|guardian|lawyer|ssn|passport|owner)\b")


def replaces(new: str, old: str, *, similarity: float | None = None) -> Contradiction | None:
    """Whether `new` states a fact that makes `old`'s no longer true (same subject and attribute,
    another value; or the same frame negated), and which; None when they can both hold."""
    fresh, held = facts(new), facts(old)
    for a in fresh:
        for b in held:
            if _same_subject(a.subject, b.subject, similarity) and a.attribute == b.attribute and _conflict(a, b):
                frame = f"{a.subject} {a.attribute}"
                return Contradiction(frame, b.shown, ("not " if a.ends else "") + a.shown,
                                     "negation" if a.ends else "value_change")
    if fresh and held and _agree(fresh, held):
        return None  # the frames say the same thing; the word-level reader would only misread a rephrasing
    return detect_contradiction(new, old)


def _same_subject(a: str, b: str, similarity: float | None) -> bool:
    if a == b:
        return True
    if "pronoun" in (a, b):
        other = b if a == "pronoun" else a
        return other not in ("pronoun", "user") and similarity is not None and similarity >= PRONOUN_COSINE
    if "'s" in a or "'s" in b or "user" in (a, b):
        return False
    short, long_ = sorted((a.split(), b.split()), key=len)
    return long_[:len(short)] == short  # "Heidi" is "Heidi Larsen"


def _conflict(new: Fact, old: Fact) -> bool:
    if old.ends:
        return False
    if new.ends:
        return _same_value(new.value, old.value)
    return not new.additive and not _same_value(new.value, old.value)


def _same_value(a: str, b: str) -> bool:
    if a == b:
        return True
    x, y = set(re.findall(r"\w+", a)), set(re.findall(r"\w+", b))
    return bool(x) and bool(y) and (x <= y or y <= x)  # "Oslo" and "Oslo Norway", "Google" and "Google DeepMind"


def _agree(fresh: list[Fact], held: list[Fact]) -> bool:
    return any(a.subject == b.subject and a.attribute == b.attribute and _same_value(a.value, b.value)
               for a in fresh for b in held)


def detect(content: str, live: Sequence[str]) -> RiskFlag | None:
    """The ``contradiction`` flag of ``content`` against the nearest live memories' texts, or None."""
    best: tuple[float, Span] | None = None
    for existing in live:
        if not existing:
            continue
        found = replaces(content, existing)
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
