"""``contradiction``: the write restates a fact of a live memory with another value or polarity.

The service passes the texts of the nearest live memories (same agent and user); each is compared
by ``replaces``: the same subject and attribute with another value (``app.core.facts``: moves,
changes of employer, new phone numbers and e-mail addresses, new owners and titles, counts, in
several languages), or the same frame negated or given another value (``app.core.diff``'s
``detect_contradiction``); and, when the caller gives the texts' attribute readings
(``app.core.attributes.Meaning``, from the recall embedder's vectors), a change of state by meaning
(``changed_state``: one subject, one attribute, a word of change and none of a state held beside,
passing or past, a value the old text does not give). Approving a write that replaces a live memory retires it
(``app.services.memory.supersession``). Most contradictions are honest updates ("Bob lives in Lisbon"
after "Bob lives in Porto"): medium. A contradiction about something an attacker gains by
changing — money (bank, IBAN, account, payee, wallet), health (allergy, medication, dose, blood
type), identity and contact (email, phone, address, password, emergency contact) — is high.
Evidence points at the new value in the content (the whole content when it cannot be located).

A changed channel is high as well, even when the sentences share no frame: the write carries a
payment detail or contact channel (an e-mail address, a phone or account number, as
``app.core.high_impact`` parses them; digits only where the write names money or contact, so two
order numbers are not a "change"), a live memory carries one of the same kind, none of the values
is shared, and the two name the same subject (a content word in common besides the words for the
kind: "Acme's new IBAN is ..." against "Acme Supplies bank account: ..."). A supplier's new IBAN
or a clinic's new number, planted in what the agent read, is the commonest fraud on memory.
"""

from __future__ import annotations

import functools
import re
from typing import Callable, Sequence

from app.core import attributes, high_impact, statechange
from app.core.diff import Contradiction, detect_contradiction
from app.core.facts import Fact, facts
from app.core.screening import effects
from app.core.screening.flags import RiskFlag, Span

NAME = "contradiction"
SENSITIVE_SCORE, ORDINARY_SCORE = 0.8, 0.5
PRONOUN_COSINE = 0.6
"""How similar two texts must be for "she" in one to be the person the other names (only a caller
that knows the similarity can say; screening's texts come without it)."""
Model = Callable[[Sequence[tuple[str, str]]], list[float]]
"""The contradiction model (``app.nli``): (old, new) pairs to the probability that new rules old out."""
MODEL_THRESHOLD = 0.5
"""The model's probability at which a change the write reports is taken to be a change of that live text."""
MODEL_COSINE = 0.3
"""Below this cosine a live text is about something else, and the model is not asked."""
MODEL_NEIGHBOURS = 3
"""Nearest live texts the model reads per write (a model run is ~10 ms a pair on one core)."""
UNCHANGED = "It is still the same as before."
"""What a write that reports no change leaves true: the model reads a write that contradicts it as
reporting a change, in any language and with no word of change ("Car insurance: Progressive")."""
UNCUED_CHANGE = 0.95
"""The model's probability that a write contradicts ``UNCHANGED`` at which it reports a change."""
UNCUED_THRESHOLD = 0.97
"""The model's probability at which such a write rules a live text out: stricter than for a change
the write names, since nothing in its words ties it to one (tuned on the spent third and fourth
pair sets: +28 of 200 replacements for +9 of 200 compatible pairs)."""
_SENSITIVE = re.compile(
    r"\b(?:bank|iban|account|routing|sort code|swift|bic|payee|beneficiary|wallet|crypto|bitcoin|card|"
    r"salary|payment|pay|allerg\w*|medication|medicine|dose|dosage|blood|insulin|prescription|diagnos\w*|"
    r"pharmacy|doctor|email|e-mail|phone|mobile|number|address|password|passcode|pin|emergency|"
    r"next of kin|guardian|lawyer|ssn|passport|owner)\b")


def replaces(new: str, old: str, *, similarity: float | None = None,
             meaning: tuple[attributes.Reading, attributes.Reading, float] | None = None,
             model: Model | None = None, unnamed: bool = True) -> Contradiction | None:
    """Whether `new` states a fact that makes `old`'s no longer true (same subject and attribute,
    another value; or the same frame negated), and which; None when they can both hold. With
    `meaning` (the two texts' attribute readings and their cosine) a change of state is read too,
    and with `model` confirmed by the contradiction model where the rules cannot tie it to `old`:
    see ``changed_state`` (`unnamed` as there)."""
    fresh, held = facts(new), facts(old)
    for a in fresh:
        for b in held:
            if _same_subject(a.subject, b.subject, similarity) and a.attribute == b.attribute and _conflict(a, b):
                frame = f"{a.subject} {a.attribute}"
                return Contradiction(frame, b.shown, ("not " if a.ends else "") + a.shown,
                                     "negation" if a.ends else "value_change")
    if fresh and held and _agree(fresh, held):
        return None  # the frames say the same thing; the word-level reader would only misread a rephrasing
    return changed_state(new, old, meaning, model, unnamed) if meaning is not None else detect_contradiction(new, old)


_SHOWN = 120


def changed_state(new: str, old: str, meaning: tuple[attributes.Reading, attributes.Reading, float],
                  model: Model | None = None, unnamed: bool = True) -> Contradiction | None:
    """`new` reports a change of the state `old` states: a word of change in `new` and none saying
    the old state still holds or the new one passes (``statechange.cues``), a value `old` does not
    already give (``statechange.restates``), and either one subject (``statechange.same_subject``)
    and one attribute by meaning (``attributes.same_attribute``), or the contradiction model
    reading the pair as one that cannot both hold (a role in place of a name, the attribute said
    in other words, another script). With `unnamed` the model also reads a change the write names
    in no word; the caller passes False where the two are records of events rather than states
    (a second shipment, trip or quiz result does not make the first one untrue). Falls back to
    the word-level reader."""
    reading_new, reading_old, cosine = meaning
    said = statechange.cues(new)
    if not said.held and not statechange.restates(new, old):
        # The model alone calls two notes that merely differ a contradiction; a change the write
        # reports is what it confirms: named by a word of change, or read by the model itself
        # (``UNCHANGED``) and then held to a stricter bar.
        if said.change:
            tied = statechange.same_subject(new, old) and attributes.same_attribute(reading_new, reading_old, cosine)
            confirmed = tied or _model_rules_out(model, old, new, cosine, MODEL_THRESHOLD)
        else:
            confirmed = (unnamed and model is not None and cosine >= MODEL_COSINE and not _distinct_items(new, old)
                         and _reports_change(model, new) and _model_rules_out(model, old, new, cosine, UNCUED_THRESHOLD))
        if confirmed:
            return Contradiction(reading_old.attribute.replace("_", " "), _short(old), _short(new), "value_change")
    return detect_contradiction(new, old)


_ITEM = re.compile(r"\W*((?:[^\W\d_]+\s+){0,2}[^\W\d_]+\b)\s*(?:#|no\.\s*|n[º°]\s*)?(\w*\d[\w./-]*)")
"""A text that opens by naming a numbered item: its label ("Security incident", "Ticket", "Room") and
its identifier (a token with a digit: "5", "LH123", "A-17")."""


def _distinct_items(new: str, old: str) -> bool:
    """Whether the two texts open on the same label with other identifiers ("Incident 5: ..." and
    "Incident 2: ..."): two items, not one item's old and new state. With no word of change only the
    model ties them, and it reads two records that differ in a number as one changing."""
    a, b = _ITEM.match(new), _ITEM.match(old)
    return (a is not None and b is not None and a.group(1).casefold() == b.group(1).casefold()
            and a.group(2).casefold() != b.group(2).casefold())


def _model_rules_out(model: Model | None, old: str, new: str, cosine: float, threshold: float) -> bool:
    return model is not None and cosine >= MODEL_COSINE and model([(old, new)])[0] >= threshold


@functools.lru_cache(maxsize=256)
def _reports_change(model: Model, new: str) -> bool:
    """Whether the model reads `new` as reporting a change (cached: a write meets several live texts)."""
    return model([(new, UNCHANGED)])[0] >= UNCUED_CHANGE


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN else text[:_SHOWN - 1] + "…"


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


_CHANNELS = {"email": "email", "phone": "digits", "number": "digits"}
_WORD = re.compile(r"[^\W\d_]{3,24}")
# Function words and the words for the kinds themselves: what two texts about different subjects share.
_COMMON = frozenset(
    "the and for with that this from are was were has have had new now our your their his her its who whom "
    "which will can may use used please note details detail contact reach call via number numbers phone mobile "
    "email mail address account iban bank swift bic sort code payment payments pay paid changed change "
    "updated update moved is der die das und ist neue neuer nummer konto les des est nouveau nouvelle numéro "
    "compte los las del nuevo nueva número cuenta nuovo nuova numero conto novo nova conta".split())


_CACHED_CHANNEL_TEXT = 2000
"""Texts up to this many characters keep their channels (`_channels`): the same live neighbours
are read write after write; 2,048 of them hold at most a few MB."""


def _channels(text: str) -> tuple[dict[str, frozenset[str]], dict[str, tuple[tuple[int, int], ...]]]:
    """Values of each channel kind in ``text`` (normalised) and their spans; maybe cached, so never
    to be changed by a caller (frozen sets and tuples inside)."""
    return _cached_channels(text) if len(text) <= _CACHED_CHANNEL_TEXT else _read_channels(text)


@functools.lru_cache(maxsize=2048)
def _cached_channels(text: str) -> tuple[dict[str, frozenset[str]], dict[str, tuple[tuple[int, int], ...]]]:
    return _read_channels(text)


def _read_channels(text: str) -> tuple[dict[str, frozenset[str]], dict[str, tuple[tuple[int, int], ...]]]:
    values: dict[str, set[str]] = {}
    spans: dict[str, list[tuple[int, int]]] = {}
    named = bool(effects.CHANNEL_WORDS.search(text[:high_impact.SCAN_LIMIT]))
    for feature, start, end in high_impact.locate(text):
        kind = _CHANNELS.get(feature)
        if kind is None or (kind == "digits" and not named):
            continue
        raw = text[start:end]
        value = "".join(c for c in raw if c.isalnum()).lower() if kind == "digits" else raw.strip().lower()
        values.setdefault(kind, set()).add(value)
        spans.setdefault(kind, []).append((start, end))
    return {k: frozenset(v) for k, v in values.items()}, {k: tuple(v) for k, v in spans.items()}


def _subject(text: str, spans: Sequence[tuple[int, int]]) -> set[str]:
    """Content words of ``text`` outside the channel values."""
    kept = list(text[:high_impact.SCAN_LIMIT])
    for start, end in spans:
        kept[start:end] = " " * (end - start)
    return {w for w in _WORD.findall("".join(kept).lower()) if w not in _COMMON}


_USER = frozenset({"user", "users"})


def _same_subject_words(new: set[str], old: set[str]) -> bool:
    """Whether two channel sentences name the same subject. "User" is in nearly every note of an
    assistant's memory, so it alone ties them only when neither names anyone else: "User's mobile
    number is …" against "User's mobile number is …", not "User's sister Ines: …" against it."""
    shared = new & old
    if shared - _USER:
        return True
    return bool(shared) and not (new - _USER) and not (old - _USER)


_MONEY = re.compile(r"(?i)\b(?:bank\w*|iban|bic|swift|account|acct|routing|sort code|payee|beneficiary|wallet|"
                    r"card|payments?|pay|wire|transfer|invoices?|konto|compte|cuenta|conto|conta|rekening)\b")
_QUALIFIER = re.compile(
    r"(?i)\b(?:work|personal|home|mobile|cell|office|business|private|landline|desk|travel|professionnel\w*|"
    r"portable|perso\w*|privé\w*|privat\w*|geschäftlich\w*|dienstlich\w*|handy|trabajo|móvil|celular|lavoro|"
    r"werk|zakelijk\w*)\b")


def _beside(content: str, existing: str) -> bool:
    """A contact channel given beside the live one, not instead of it: "also", "a second", or
    another qualifier ("work" against "mobile"). Never for money: a second account for a payee is
    what a fraud would say."""
    if _MONEY.search(content) or _MONEY.search(existing):
        return False
    if statechange.cues(content).held:
        return True
    new, old = ({q.casefold() for q in _QUALIFIER.findall(t)} for t in (content, existing))
    return bool(new) and bool(old) and not new & old


def changed_channel(content: str, live: Sequence[str]) -> tuple[Span, ...]:
    """Spans of the write's channel values that replace a live memory's value of the same kind for
    the same subject, or ``()``: not a contact channel given beside the live one (``_beside``)."""
    values, spans = _channels(content)
    if not values:
        return ()
    subject = _subject(content, [s for found in spans.values() for s in found])
    for existing in live:
        if not existing:
            continue
        old, old_spans = _channels(existing)
        changed = [kind for kind in values if old.get(kind) and not values[kind] & old[kind]]
        if changed and _beside(content, existing):
            continue
        if changed and _same_subject_words(subject, _subject(existing, [s for found in old_spans.values()
                                                                         for s in found])):
            return tuple(Span("content", *s) for kind in changed for s in spans[kind])
    return ()


def detect(content: str, live: Sequence[str], meaning: attributes.Meaning | None = None,
           model: Model | None = None, unnamed: Sequence[bool] | None = None) -> RiskFlag | None:
    """The ``contradiction`` flag of ``content`` against the nearest live memories' texts, or None;
    `meaning` (the write's and the live texts' attribute readings, in `live`'s order) lets it read
    changes of state as well, `model` (the contradiction model) confirms them for the
    ``MODEL_NEIGHBOURS`` nearest; `unnamed` says, per live text, whether it may read a change the
    write names in no word (``changed_state``; every one when omitted)."""
    best: tuple[float, Span] | None = None
    for index, existing in enumerate(live):
        if not existing:
            continue
        found = replaces(content, existing, meaning=meaning.pair(index) if meaning is not None else None,
                         model=model if index < MODEL_NEIGHBOURS else None,
                         unnamed=unnamed[index] if unnamed is not None else True)
        if found is None:
            continue
        # A change read by meaning (the attribute each whole text is nearest) is the least certain
        # reading, and its "values" are the whole texts: medium, so an ordinary update it finds is
        # retired on approval without every preference change going to review as high risk.
        by_meaning = found.old_value == existing and found.new_value == content
        said = f"{found.frame} {found.old_value} {found.new_value}".lower()
        sensitive = not by_meaning and bool(_SENSITIVE.search(said))
        score = SENSITIVE_SCORE if sensitive else ORDINARY_SCORE
        value = found.new_value.removeprefix("not ")
        start = content.lower().find(value.lower()) if value else -1
        span = Span("content", start, start + len(value)) if start >= 0 else Span("content", 0, len(content))
        if best is None or score > best[0]:
            best = (score, span)
    channel = changed_channel(content, live) if live else ()
    if channel:
        return RiskFlag(NAME, "high", SENSITIVE_SCORE, channel + ((best[1],) if best else ()))
    if best is None:
        return None
    score, span = best
    return RiskFlag(NAME, "high" if score >= SENSITIVE_SCORE else "medium", score, (span,))
