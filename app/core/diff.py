"""Diffs and cheap text comparisons shown to reviewers (pure).

* ``word_diff`` / ``similarity``: word-level comparison of two memory contents.
* ``unified_line_diff`` / ``unified_text``: line diffs of workspace files.
* ``detect_contradiction``: a heuristic hint that a new memory changes a fact.
* ``is_likely_duplicate``: thresholds for flagging near-duplicates.
* ``reveal_hidden``: splits text so invisible characters can be shown as visible markers.
"""

from __future__ import annotations

import difflib
import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Literal, Sequence

SegmentOp = Literal["equal", "insert", "delete"]
LineKind = Literal["header", "hunk", "context", "add", "remove", "note"]

# Whitespace runs, word runs, or single other characters: every character lands
# in exactly one token, so joining the tokens gives back the text.
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")

#: Token similarity at or above this marks a likely duplicate.
DUPLICATE_SIMILARITY = 0.9
#: Embedding cosine at or above this marks a likely duplicate.
DUPLICATE_COSINE = 0.92
#: Embedding cosine at or above which the closest live memory is about the same thing, so a reviewer
#: sees a word diff against it. Calibrated by `python -m dev.bench diff-match` (docs/benchmarks/):
#: related pairs (updates and contradictions of a live fact) against unrelated ones (other facts
#: about the same person; unrelated writes and their nearest fact).
STRONG_MATCH_COSINE = 0.6


@dataclass(frozen=True)
class Segment:
    """A run of text that is unchanged (``equal``), only in the new text (``insert``) or only in the old (``delete``)."""

    op: SegmentOp
    text: str


@dataclass(frozen=True)
class DiffLine:
    """One line of a unified diff; ``text`` keeps its diff prefix (``+``, ``-``, space, ``@@``, ``---``)."""

    kind: LineKind
    text: str


@dataclass(frozen=True)
class Contradiction:
    """``new`` gives another value (or the opposite polarity) for a frame ``existing`` already states."""

    frame: str
    old_value: str
    new_value: str
    kind: Literal["value_change", "negation"]


def tokenize(text: str) -> list[str]:
    """Split into whitespace runs, word runs and single punctuation characters; ``"".join`` inverts it."""
    return _TOKEN.findall(text)


def word_diff(old: str, new: str) -> list[Segment]:
    """Word-level diff of ``old`` → ``new``.

    Joining the ``equal`` and ``delete`` segments gives ``old`` exactly; ``equal``
    and ``insert`` give ``new``. Within a change, deletions come before insertions,
    and whitespace between two changed words is folded into the change so a
    reviewer reads ``[-red big-]{+blue small+}`` rather than word-by-word pairs.
    """
    a, b = tokenize(old), tokenize(new)
    raw: list[Segment] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            raw.append(Segment("equal", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            raw.append(Segment("delete", "".join(a[i1:i2])))
        if j2 > j1:
            raw.append(Segment("insert", "".join(b[j1:j2])))
    return _coalesce(_fold_whitespace(raw))


def _fold_whitespace(segments: list[Segment]) -> list[Segment]:
    """Merge whitespace-only equal runs sandwiched between changes into those changes."""
    out: list[Segment] = []
    i = 0
    while i < len(segments):
        if segments[i].op == "equal":
            out.append(segments[i])
            i += 1
            continue
        deleted: list[str] = []
        inserted: list[str] = []
        while i < len(segments):
            seg = segments[i]
            if seg.op == "equal":
                next_is_change = i + 1 < len(segments) and segments[i + 1].op != "equal"
                if not (seg.text.isspace() and next_is_change):
                    break
                deleted.append(seg.text)
                inserted.append(seg.text)
            elif seg.op == "delete":
                deleted.append(seg.text)
            else:
                inserted.append(seg.text)
            i += 1
        if deleted:
            out.append(Segment("delete", "".join(deleted)))
        if inserted:
            out.append(Segment("insert", "".join(inserted)))
    return out


def _coalesce(segments: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for seg in segments:
        if not seg.text:
            continue
        if out and out[-1].op == seg.op:
            out[-1] = Segment(seg.op, out[-1].text + seg.text)
        else:
            out.append(seg)
    return out


def similarity(old: str, new: str) -> float:
    """Ratio in [0, 1] of matching non-whitespace tokens, case-insensitive; two empty texts score 1."""
    a = [t.casefold() for t in tokenize(old) if not t.isspace()]
    b = [t.casefold() for t in tokenize(new) if not t.isspace()]
    if not a and not b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def is_likely_duplicate(similarity_score: float, cosine: float | None) -> bool:
    """Whether two memories are probably the same fact.

    True when token ``similarity`` ≥ 0.9 (``DUPLICATE_SIMILARITY``: a word or two
    differ in a sentence) or, when an embedding cosine is available, cosine ≥ 0.92
    (``DUPLICATE_COSINE``: paraphrases with MiniLM-class models). A short sentence
    whose only change is its value can stay below both yet contradict; check
    ``detect_contradiction`` before treating a pair as a duplicate.
    """
    if similarity_score >= DUPLICATE_SIMILARITY:
        return True
    return cosine is not None and cosine >= DUPLICATE_COSINE


def is_strong_match(cosine: float | None) -> bool:
    """Whether the closest live memory is close enough to diff against (``STRONG_MATCH_COSINE``).
    Below it a word diff would strike through an unrelated fact; a flagged contradiction or
    duplicate is diffed whatever the score (the caller checks those)."""
    return cosine is not None and cosine >= STRONG_MATCH_COSINE


# --- workspace line diffs -------------------------------------------------

_NO_NEWLINE = "\\ No newline at end of file"


def _lines(text: str) -> list[str]:
    # Split on "\n" only: str.splitlines would also break on \x0b, \x1c, \u2028 ...
    return re.findall(r"[^\n]*\n|[^\n]+", text)


def unified_line_diff(
    old: str, new: str, old_label: str, new_label: str, context: int = 3
) -> list[DiffLine]:
    """Unified diff of two files as typed lines; empty when the texts are equal.

    Line texts carry no line terminator. A changed last line without a final
    newline is followed by a ``note`` line ``\\ No newline at end of file`` (as git
    does), so a diff that only adds or drops the final newline is still visible.
    """
    if old == new:
        return []
    out: list[DiffLine] = []
    diff = difflib.unified_diff(_lines(old), _lines(new), old_label, new_label, n=context, lineterm="")
    for index, line in enumerate(diff):
        if index < 2:
            out.append(DiffLine("header", line))
            continue
        if line.startswith("@@"):
            out.append(DiffLine("hunk", line))
            continue
        kind: LineKind = {"+": "add", "-": "remove"}.get(line[:1], "context")  # type: ignore[assignment]
        if line.endswith("\n"):
            out.append(DiffLine(kind, line[:-1]))
        else:
            out.append(DiffLine(kind, line))
            out.append(DiffLine("note", _NO_NEWLINE))
    return out


def unified_text(
    old: str, new: str, old_label: str, new_label: str, context: int = 3
) -> str:
    """``unified_line_diff`` as patch text, one line each, newline-terminated ("" when equal)."""
    lines = unified_line_diff(old, new, old_label, new_label, context)
    return "".join(line.text + "\n" for line in lines)


# --- contradiction heuristic ----------------------------------------------

_FUNCTIONAL = "functional"  # one value at a time: a different value contradicts
_PREFERENCE = "preference"  # contradicts only for the same kind of thing (same head word)
_MULTI = "multi"            # many values can hold at once: only a negation contradicts
_COPULA = "copula"          # functional for attribute subjects ("Alice's colour"), else multi
_KEYVALUE = "keyvalue"      # "key: value" / "key = value"


@dataclass(frozen=True)
class _Relation:
    canonical: str
    cls: str
    positive: bool


def _relation_table() -> dict[str, list[tuple[tuple[str, ...], _Relation]]]:
    """Surface forms (token tuples) → relation, indexed by first token, longest first."""
    forms: list[tuple[str, _Relation]] = []
    verbs = {  # third person singular: (plural form, class)
        "lives in": ("live in", _FUNCTIONAL), "works at": ("work at", _FUNCTIONAL),
        "works for": ("work for", _FUNCTIONAL), "prefers": ("prefer", _PREFERENCE),
        "likes": ("like", _MULTI), "loves": ("love", _MULTI), "hates": ("hate", _MULTI),
        "dislikes": ("dislike", _MULTI), "enjoys": ("enjoy", _MULTI), "uses": ("use", _MULTI),
        "speaks": ("speak", _MULTI), "owns": ("own", _MULTI),
    }
    for third, (plural, cls) in verbs.items():
        pos, neg = _Relation(third, cls, True), _Relation(third, cls, False)
        forms += [(third, pos), (plural, pos), (f"no longer {third}", neg), (f"no longer {plural}", neg)]
        for aux in ("does not", "doesn't", "doesnt", "do not", "don't", "dont"):
            forms.append((f"{aux} {plural}", neg))
    copulas = {"is": "is", "are": "is", "am": "is", "was": "was", "were": "was"}
    contracted = {"is": "isn't", "are": "aren't", "was": "wasn't", "were": "weren't"}
    tails = {"": _COPULA, " from": _FUNCTIONAL, " based in": _FUNCTIONAL, " born in": _FUNCTIONAL,
             " born on": _FUNCTIONAL}
    for cop, canon in copulas.items():
        for tail, cls in tails.items():
            pos, neg = _Relation(canon + tail, cls, True), _Relation(canon + tail, cls, False)
            forms += [(cop + tail, pos), (f"{cop} not{tail}", neg), (f"{cop} no longer{tail}", neg)]
            if cop in contracted:
                forms.append((contracted[cop] + tail, neg))
    forms += [("=", _Relation("=", _KEYVALUE, True)), (":", _Relation("=", _KEYVALUE, True))]
    table: dict[str, list[tuple[tuple[str, ...], _Relation]]] = {}
    for surface, rel in forms:
        toks = tuple(surface.split())
        table.setdefault(toks[0], []).append((toks, rel))
    for entries in table.values():
        entries.sort(key=lambda e: -len(e[0]))
    return table


_RELATIONS = _relation_table()
_CLAIM_TOKEN = re.compile(r"\d+(?:[.:,]\d+)*|\w+(?:'\w+)*|[=:,]")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n+")
_SPELLING = {"favorite": "favourite", "color": "colour", "colors": "colours"}
_FILLER = frozenset({"currently", "now", "still", "also", "really", "actually", "definitely",
                     "nowadays", "truly"})
_DETERMINERS = frozenset({"the", "a", "an"})
_CLAUSE_BREAK = frozenset({",", "and", "but", "or", "because", "since", "although", "though",
                           "while", "whereas", "which", "who", "where", "when", "so", "if", "unless"})
_HEDGES = frozenset({"might", "may", "could", "would", "should", "maybe", "perhaps", "probably",
                     "possibly", "if", "unless", "whether", "not", "never", "no", "when"})
_POSSESSIVES = frozenset({"my", "your", "his", "her", "their", "our", "its", "of"})
_GENERIC_KEYS = frozenset({"note", "notes", "todo", "summary", "update", "reminder", "fyi", "tip",
                           "warning", "question", "answer", "q", "a", "re", "ps", "nb", "example"})
_MAX_SUBJECT, _MAX_VALUE, _MAX_KEY, _MAX_KV_VALUE = 8, 8, 4, 6
_MAX_SENTENCES, _MAX_SENTENCE_CHARS = 20, 300


@dataclass(frozen=True)
class _Claim:
    subject: tuple[str, ...]
    relation: _Relation
    value: tuple[str, ...]
    value_text: str


def detect_contradiction(new: str, existing: str) -> Contradiction | None:
    """Heuristic: does ``new`` restate a fact of ``existing`` with another value or the opposite polarity?

    Each text is split into sentences (at most 20, each at most 300 characters);
    each sentence is cut at its first relation word into ``(subject, relation,
    value)``: copulas (is/are/am, was/were, kept apart by tense), "is from", "is
    based in", "was born in", verbs ("lives in", "works at/for", "prefers", "likes",
    "loves", "hates", "enjoys", "uses", "speaks", "owns", present tense only), and
    ``key: value`` / ``key = value``. The value stops at the first comma or clause
    word ("and", "but", "because", "which", ...). Text is case-folded, leading
    articles and fillers ("currently", "now", "still") dropped, and favorite/color
    spelt the British way.

    A pair with the same subject and relation is reported as:

    * ``negation``: one side negated ("does not like", "is not", "isn't", "no
      longer lives in"), same value. The negated value is shown as ``not <value>``.
    * ``value_change``: both sides positive, values differ, and the relation takes
      one value at a time: "lives in", "works at", "is from", copulas whose subject
      is an attribute (possessive or "of": "Alice's favourite colour is", "the
      capital of France is"), ``key: value`` with a short, non-generic key, and
      "prefers" when both values end in the same word ("dark mode"/"light mode").

    Returns ``None`` whenever unsure. Known limits: no coreference ("She" ≠
    "Alice"), no synonyms or paraphrased values ("NYC" vs "New York" *is* flagged,
    "Alice is vegan" vs "Alice is vegetarian" is not), no past/present reasoning
    ("lived in" is ignored), "Alice is a doctor" vs "Alice is a nurse" is not
    flagged (entity subjects with "is" only count negations), questions and hedged
    sentences ("might", "maybe", "if") are skipped, and English only.
    """
    new_claims = _claims(new)
    if not new_claims:
        return None
    old_claims = _claims(existing)
    for fresh in new_claims:
        for old in old_claims:
            found = _compare(fresh, old)
            if found is not None:
                return found
    return None


def _claims(text: str) -> list[_Claim]:
    claims = []
    sentences = [s.strip() for s in _SENTENCE_SPLIT.split(text) if s.strip()]
    for sentence in sentences[:_MAX_SENTENCES]:
        if len(sentence) > _MAX_SENTENCE_CHARS or sentence.endswith("?"):
            continue
        claim = _parse(sentence)
        if claim is not None:
            claims.append(claim)
    return claims


@functools.lru_cache(maxsize=4096)  # screening parses each live neighbour's sentences write after write
def _parse(sentence: str) -> _Claim | None:
    # One-for-one character swap, so match offsets index the original sentence.
    plain = sentence.replace("\u2019", "'").replace("\u2018", "'")
    tokens: list[tuple[str, int, int]] = []
    for m in _CLAIM_TOKEN.finditer(plain):
        word = m.group().casefold()
        word = _SPELLING.get(word, word)
        if word not in _FILLER:
            tokens.append((word, m.start(), m.end()))
    words = [t[0] for t in tokens]
    start = 0
    while start < len(words):
        found = _find_relation(words, start)
        if found is None:
            return None
        at, length, relation = found
        subject = _strip_determiners(words[start:at])
        value_end = at + length
        while value_end < len(words) and words[value_end] not in _CLAUSE_BREAK:
            value_end += 1
        value_tokens = words[at + length:value_end]
        value = _strip_determiners(value_tokens)
        if relation.cls == _KEYVALUE and (
            not 0 < len(subject) <= _MAX_KEY or subject[-1] in _GENERIC_KEYS
        ):
            start = at + length  # "Note: Bob lives in Paris": read what follows the label
            continue
        if not subject or not value or len(subject) > _MAX_SUBJECT or len(value) > _MAX_VALUE:
            return None
        if relation.cls == _KEYVALUE and len(value) > _MAX_KV_VALUE:
            return None
        if any(w in _HEDGES or w == "," for w in subject):
            return None
        shown = at + length
        while words[shown] in (":", "="):
            shown += 1
        first, last = tokens[shown][1], tokens[value_end - 1][2]
        return _Claim(tuple(subject), relation, tuple(value), sentence[first:last])
    return None


def _find_relation(words: list[str], start: int) -> tuple[int, int, _Relation] | None:
    for i in range(start, len(words)):
        for form, relation in _RELATIONS.get(words[i], ()):
            if tuple(words[i:i + len(form)]) == form:
                return i, len(form), relation
    return None


def _strip_determiners(words: Sequence[str]) -> list[str]:
    words = list(words)
    while words and (words[0] in _DETERMINERS or words[0] in (":", "=")):
        words.pop(0)
    return words


def _is_attribute(subject: tuple[str, ...]) -> bool:
    return any(w.endswith("'s") or w in _POSSESSIVES for w in subject)


def _compare(new: _Claim, old: _Claim) -> Contradiction | None:
    if new.subject != old.subject or new.relation.canonical != old.relation.canonical:
        return None
    frame = " ".join(new.subject) + " " + new.relation.canonical
    if new.relation.positive != old.relation.positive:
        if new.value != old.value:
            return None
        return Contradiction(frame, _shown(old), _shown(new), "negation")
    if not new.relation.positive or new.value == old.value:
        return None
    cls = new.relation.cls
    functional = (
        cls in (_FUNCTIONAL, _KEYVALUE)
        or (cls == _COPULA and _is_attribute(new.subject))
        or (cls == _PREFERENCE and new.value[-1] == old.value[-1])
    )
    if not functional:
        return None
    return Contradiction(frame, old.value_text, new.value_text, "value_change")


def _shown(claim: _Claim) -> str:
    return claim.value_text if claim.relation.positive else "not " + claim.value_text


# --- hidden characters ---------------------------------------------------------------------------

#: Short names reviewers know; every other hidden character is shown by its code point.
_HIDDEN_NAMES = {
    "\u200b": "ZWSP", "\u200c": "ZWNJ", "\u200d": "ZWJ", "\u2060": "WJ", "\ufeff": "BOM", "\u00ad": "SHY",
    "\u180e": "MVS", "\u200e": "LRM", "\u200f": "RLM", "\u061c": "ALM",
}
#: Invisible but not format characters (Unicode category Cf): fillers that render as blank space.
_BLANK_LOOKALIKES = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_TAG_FIRST, _TAG_LAST = 0xE0000, 0xE007F


def _is_hidden(char: str) -> bool:
    code = ord(char)
    if char in "\t\n\r":
        return False
    if _TAG_FIRST <= code <= _TAG_LAST or 0xE0100 <= code <= 0xE01EF or 0xFE00 <= code <= 0xFE0E:
        return True  # tag characters and variation selectors smuggle data invisibly
    return char in _BLANK_LOOKALIKES or unicodedata.category(char) in ("Cf", "Cc", "Co", "Cn", "Zl", "Zp")


def _marker(run: str) -> str:
    first = ord(run[0])
    if _TAG_FIRST <= first <= _TAG_LAST:
        # A run of tag characters mirrors ASCII: show what it spells, so the smuggled text is reviewable.
        spelled = "".join(chr(ord(c) - _TAG_FIRST) if 0x20 <= ord(c) - _TAG_FIRST < 0x7F else "?" for c in run)
        return f"⟨TAG {spelled}⟩"
    return f"⟨{_HIDDEN_NAMES[run]}⟩" if run in _HIDDEN_NAMES else f"⟨U+{first:04X}⟩"


def reveal_hidden(text: str) -> list[tuple[str, str | None]]:
    """``text`` as (piece, marker) pairs: plain pieces have marker None; each hidden character
    (zero-width, bidi control, tag character, variation selector, other control/format character)
    is its own piece with a visible marker such as ``⟨ZWSP⟩`` or ``⟨U+202E⟩``; a run of tag
    characters is one piece, its marker spelling the ASCII it hides (``⟨TAG ignore⟩``).
    Joining the pieces gives back ``text``. Callers escape both parts before showing them."""
    out: list[tuple[str, str | None]] = []
    plain_start = i = 0
    n = len(text)
    while i < n:
        if not _is_hidden(text[i]):
            i += 1
            continue
        if plain_start < i:
            out.append((text[plain_start:i], None))
        j = i + 1
        if _TAG_FIRST <= ord(text[i]) <= _TAG_LAST:
            while j < n and _TAG_FIRST <= ord(text[j]) <= _TAG_LAST:
                j += 1
        out.append((text[i:j], _marker(text[i:j])))
        plain_start = i = j
    if plain_start < n:
        out.append((text[plain_start:], None))
    return out
