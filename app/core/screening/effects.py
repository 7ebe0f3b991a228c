"""Categories of effect: what a write would change if the agent believed it, whatever its wording.

Attacks on an agent's memory are judged here by what they would do, not by how attacks have
sounded. Each category is a flag a reviewer and a policy can name:

* ``directive``: a standing directive or a trigger for later turns (a schedule or a condition in
  the same sentence as an order, or the head reads one);
* ``authority``: a grant or claim of authority, trust, role, access or approval, or an exemption
  from a check (the head: this has no structure of its own);
* ``destination``: somewhere to send data or money (a link, an address, an account, a phone, a
  path) in the same sentence as an order, or beside a head that reads a destination, or the head
  alone (a shared sheet, a form);
* ``high_impact_fact``: payment or bank details, a contact channel (phone, e-mail), a credential,
  or a safety-critical value (a dose, a limit or threshold with its unit); a link when the head
  reads it as a contact channel or portal;
* ``trusted_source``: a designation of trusted, preferred or authoritative sources, or distrust of
  a legitimate one (the head);
* ``command``: a tool call or a command to run (shell and SQL shapes; code beside an order or read
  as one by the head).

Half of a category's structure (a schedule or an order without the other, a reachable thing with
no English order, code with no order, a link) raises it when its head's ``support`` cut agrees; a
head above its ``alone`` cut raises it with no structure at all.

The structures are ``app.core.high_impact``'s (one parser per shape, shared with the learned-rule
guard) plus quantities with a unit (here). The heads are ``effect_heads``. A category raised by
structure alone is ``low``; confirmed by its head, or raised by a head alone, ``medium``. Severity
does not decide staging: the policy's provenance baseline stages a category from an untrusted
origin whatever its severity (``app.core.policy``), so from the user these flags only inform.

Evidence is the structures' spans, or the whole content when a head alone raised the category.
Only the content is read: tags and metadata values are short labels, which ``protected`` reads.
Every pattern is bounded and runs once over at most ``high_impact.SCAN_LIMIT`` characters.
Known limits: the grammar checks read English (other languages lean on the heads); an order with
no schedule, condition or imperative shape and a meaning the heads miss passes; a user's own
contacts raise ``high_impact_fact`` (which the provenance default does not stage).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import defaultdict
from typing import Sequence

from app.core import high_impact
from app.core.redaction import MARKER_RE
from app.core.screening import effect_heads
from app.core.screening.flags import RiskFlag, Span
from app.core.screening.sensitive import iban_valid

DIRECTIVE, AUTHORITY, DESTINATION = "directive", "authority", "destination"
FACT, TRUSTED_SOURCE, COMMAND = "high_impact_fact", "trusted_source", "command"
NAMES = (DIRECTIVE, AUTHORITY, DESTINATION, FACT, TRUSTED_SOURCE, COMMAND)
"""Every category, in a fixed order (the heads' order too)."""

STRUCTURE_SCORE = 0.35
"""The score of a category raised by structure alone (low)."""

#: Where a thing can be reached or sent: the structures a destination or a changed channel is made of.
REACHABLE = frozenset({"link", "email", "phone", "number", "path"})
#: Facts an attacker gains by planting: payment details, contact channels, secrets.
FACT_SHAPES = frozenset({"email", "phone", "number", "credential"})
_TRIGGERS = frozenset({"schedule", "condition"})

# A quantity with a unit a safe dose, limit or threshold is stated in: medicine, pressure,
# temperature, voltage. Bounded digit groups; the unit must end the token.
_QUANTITY = re.compile(
    r"(?<![\w.])\d{1,6}(?:[.,]\d{1,3})?\s?(?:mg|mcg|µg|μg|ug|ml|mmol|iu|units?|einheiten|unités|unidades|"
    r"tablets?|drops|bar|psi|kpa|volts?|kv|amps?|°\s?[cf]|degrees)(?![\w])", re.IGNORECASE)
#: Words that name money or a contact channel, in the languages the examples cover.
CHANNEL_WORDS = re.compile(
    r"(?i)\b(?:bank\w*|iban|bic|swift|account|acct|routing|sort code|payee|beneficiary|remittance|wallet|card|"
    r"payments?|pay|wire|transfer|invoices?|phone|mobile|cell|tel|telephone|fax|whatsapp|signal|hotline|helpline|"
    r"call|ring|text|sms|reach|reached|contact|dial|kontakt|anrufen|appel(?:er|ez)?|llam[ae]\w*|chiam\w*|"
    r"number|e-?mail|konto|bankverbindung|telefon|handy|nummer|compte|virement|t[ée]l[ée]phone|num[ée]ro|cuenta|"
    r"tel[ée]fono|n[úu]mero|conto|bonifico|telefono|numero|conta|rekening|nummer)\b")
_TOKEN = re.compile(r"[\w+/=-]+")
_IBAN_SHAPE = re.compile(r"[A-Za-z]{2}\d{2}")
_SENTENCE_END = re.compile(r"[.!?;\n。！？]+(?:\s|$)")


def detect(content: str, embedding: Sequence[float] | None = None, embedder: str | None = None,
           heads: effect_heads.Heads | None = None) -> list[RiskFlag]:
    """The category flags of one write's content (none, one or several)."""
    if not content.strip():
        return []
    # Redaction took the secrets out: a marker gives an attacker nothing, and its angle brackets are
    # no markup. Blanked to spaces of the same length, so offsets still point into the content.
    raw = content[:high_impact.SCAN_LIMIT]
    markers = [m.span() for m in MARKER_RE.finditer(raw)]
    text = MARKER_RE.sub(lambda m: " " * len(m.group()), raw)
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    by_kind: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for kind, start, end in high_impact.locate(text):
        if kind == "credential" and (any(m_start <= end + 1 and start <= m_end + 1 for m_start, m_end in markers)
                                     or not _secret_like(text[start:end])):
            continue  # a label whose value redaction took ("password is <REDACTED:…>"), or an id
        by_kind[kind].append((start, end))
    # A bare digit run is an order, ticket or postcode as often as an account or a phone: it is a
    # payment or contact detail when a valid IBAN (or, a phone, written with "+" or "("), or when its
    # sentence names money or a channel.
    named = {bisect_right(ends, m.start()) for m in CHANNEL_WORDS.finditer(text)}
    by_kind["number"] = [s for s in by_kind.get("number", ())
                         if (_IBAN_SHAPE.match(text, s[0]) and iban_valid(text[s[0]:s[1]].upper()))
                         or bisect_right(ends, s[0]) in named]
    by_kind["phone"] = [s for s in by_kind.get("phone", ())
                        if text[s[0]] in "+(" or bisect_right(ends, s[0]) in named]
    for m in _QUANTITY.finditer(text):
        by_kind["quantity"].append(m.span())
    sentences: dict[str, dict[int, list[tuple[int, int]]]] = {
        kind: _by_sentence(spans, ends) for kind, spans in by_kind.items()}
    found = {
        DIRECTIVE: _together(sentences, _TRIGGERS, {"imperative"}),
        DESTINATION: _together(sentences, REACHABLE, {"imperative"}),
        FACT: [s for kind in FACT_SHAPES | {"quantity"} for s in by_kind.get(kind, ())],
        COMMAND: [s for kind in ("shell", "sql") for s in by_kind.get(kind, ())]
        + _together(sentences, {"code"}, {"imperative"}),
        AUTHORITY: [], TRUSTED_SOURCE: [],
    }
    # Half of a category's structure (a destination with no English order, code with no order, a
    # link) raises it only when its head agrees: in another language the grammar checks see no order.
    partial = {
        DIRECTIVE: [s for kind in _TRIGGERS | {"imperative"} for s in by_kind.get(kind, ())],
        DESTINATION: [s for kind in REACHABLE for s in by_kind.get(kind, ())],
        FACT: by_kind.get("link", []),
        COMMAND: by_kind.get("code", []),
    }
    read = effect_heads.read(content, embedding, embedder, heads)
    loaded = heads or effect_heads.load()
    flags = []
    for index, name in enumerate(NAMES):
        probability = read.get(name)
        if probability is None or loaded is None:  # no reading: only the structure can raise it
            probability, support, alone = 0.0, False, False
        else:
            support = probability >= float(loaded.support[index])
            alone = probability >= float(loaded.alone[index])
        spans = found[name] or (partial.get(name, []) if support else [])
        if spans:
            evidence = tuple(Span("content", s, e) for s, e in spans)
            if support:
                flags.append(RiskFlag(name, "medium", max(probability, 0.5), evidence))
            else:
                flags.append(RiskFlag(name, "low", STRUCTURE_SCORE, evidence))
        elif alone:
            flags.append(RiskFlag(name, "medium", probability, (Span("content", 0, len(content)),)))
    return flags


def _secret_like(found: str) -> bool:
    """A labelled secret ("pin: 4821", a PEM header) or a token that mixes upper case, lower case and
    digits; a bare lower-case token is a commit hash, a UUID or a slug far more often than a key."""
    if not _TOKEN.fullmatch(found):
        return True
    return any(c.isupper() for c in found) and any(c.islower() for c in found) and any(c.isdigit() for c in found)


def _by_sentence(spans: list[tuple[int, int]], ends: list[int]) -> dict[int, list[tuple[int, int]]]:
    grouped: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for span in spans:
        grouped[bisect_right(ends, span[0])].append(span)
    return grouped


def _together(sentences: dict[str, dict[int, list[tuple[int, int]]]], first: set[str] | frozenset[str],
              second: set[str]) -> list[tuple[int, int]]:
    """Spans of both kinds in every sentence that holds a structure of ``first`` and one of ``second``."""
    def per_sentence(kinds: set[str] | frozenset[str]) -> dict[int, list[tuple[int, int]]]:
        merged: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for kind in kinds:
            for sentence, spans in sentences.get(kind, {}).items():
                merged[sentence] += spans
        return merged

    a, b = per_sentence(first), per_sentence(second)
    return [span for sentence in a.keys() & b.keys() for span in a[sentence] + b[sentence]]
