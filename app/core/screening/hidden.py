"""``hidden_characters``: text a reviewer cannot see but a model reads.

* Unicode tag characters (U+E0000–E007F) spell invisible ASCII ("ASCII smuggling"): high.
  The one legitimate use, subdivision flag emoji (🏴 + tags + U+E007F), is skipped.
* Bidirectional overrides and isolates (U+202A–202E, U+2066–2069, U+200E/F, U+061C) reorder what
  is displayed ("Trojan Source"): high. A direction mark (U+200E/F, U+061C) next to Arabic or Hebrew
  letters is ordinary mixed-direction writing and is skipped.
* Zero-width and other invisible format characters (U+200B–200D, U+2060–2064, U+FEFF, U+180E,
  U+00AD …): high, except a zero-width joiner between emoji (👩‍💻) or a joiner/non-joiner inside a
  word of a script that needs them (Arabic, Persian, Indic …), which is ordinary writing.
* Terminal escape sequences (ESC, e.g. ``ESC[8m`` "concealed" text): high.
* Other control characters except tab/newline/carriage return: medium.
* Homoglyph-mixed words: one word mixing Latin letters with Cyrillic or Greek letters
  ("pаypal" with a Cyrillic а): high. Whole words in one script (Russian, Greek text) are fine.

Every run of such characters, or each mixed word, is one evidence span.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Sequence

from app.core.screening.flags import RiskFlag, Span, TextField, combine, severity_for

NAME = "hidden_characters"
WEIGHTS = {"tag": 0.95, "bidi": 0.9, "invisible": 0.8, "ansi_escape": 0.8, "mixed_script": 0.75, "control": 0.5}
MEDIUM, HIGH = 0.4, 0.7

_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
_JOINERS = frozenset("\u200c\u200d")
#: Direction marks (LRM, RLM, ALM): invisible, but they only nudge neutral characters next to
#: right-to-left text; overrides and isolates (the "Trojan Source" ones) stay high everywhere.
_MARKS = frozenset("\u200e\u200f\u061c")
_RTL_SCRIPTS = ("ARABIC", "HEBREW", "SYRIAC", "THAANA", "NKO")
_FLAG_BASE = "\U0001F3F4"
_CANCEL_TAG = "\U000E007F"
_WORD = re.compile(r"\w+")
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Scripts that use ZWJ/ZWNJ in normal writing.
_JOINING_SCRIPTS = ("ARABIC", "SYRIAC", "DEVANAGARI", "BENGALI", "GURMUKHI", "GUJARATI", "ORIYA", "TAMIL",
                    "TELUGU", "KANNADA", "MALAYALAM", "SINHALA", "MONGOLIAN", "NKO", "THAANA", "KHMER", "MYANMAR")
_CONFUSABLE_SCRIPTS = frozenset(("CYRILLIC", "GREEK"))


def _kind(text: str, i: int) -> str | None:
    ch = text[i]
    code = ord(ch)
    if 0xE0000 <= code <= 0xE007F:
        return None if _in_flag_sequence(text, i) else "tag"
    if ch in _MARKS and _beside_rtl(text, i):
        return None  # a direction mark beside Arabic or Hebrew text is how mixed-direction text is written
    if ch in _BIDI:
        return "bidi"
    if ch in _JOINERS and _ordinary_joiner(text, i):
        return None
    category = unicodedata.category(ch)
    if category == "Cf":
        if ch == "\ufeff" and i == 0:
            return None  # a byte-order mark at the very start is an encoding artefact
        return "invisible"
    if ch == "\x1b":
        return "ansi_escape"
    if category == "Cc" and ch not in "\t\n\r":
        return "control"
    return None


def _in_flag_sequence(text: str, i: int) -> bool:
    """Tag characters between 🏴 and the cancel tag form a subdivision flag (🏴󠁧󠁢󠁳󠁣󠁴󠁿)."""
    start = i
    while start > 0 and 0xE0000 <= ord(text[start - 1]) <= 0xE007F:
        start -= 1
    end = i
    while end < len(text) and 0xE0020 <= ord(text[end]) <= 0xE007E:
        end += 1
    return start > 0 and text[start - 1] == _FLAG_BASE and end < len(text) and text[end] == _CANCEL_TAG


def _beside_rtl(text: str, i: int) -> bool:
    """Whether the letter just before or after position ``i`` (skipping spaces) is right-to-left."""
    for step in (-1, 1):
        j = i + step
        while 0 <= j < len(text) and j > i - 4 and j < i + 4 and text[j] in " \t\u200e\u200f\u061c":
            j += step
        if 0 <= j < len(text) and unicodedata.name(text[j], "").startswith(_RTL_SCRIPTS):
            return True
    return False


def _ordinary_joiner(text: str, i: int) -> bool:
    before = text[i - 1] if i > 0 else ""
    after = text[i + 1] if i + 1 < len(text) else ""
    if not before or not after:
        return False
    if text[i] == "\u200d" and _pictographic(before) and _pictographic(after):
        return True
    return _joining_script(before) and _joining_script(after)


def _pictographic(ch: str) -> bool:
    code = ord(ch)
    return (0x1F000 <= code <= 0x1FAFF or 0x2600 <= code <= 0x27BF or code == 0xFE0F
            or unicodedata.category(ch) == "So")


def _joining_script(ch: str) -> bool:
    name = unicodedata.name(ch, "")
    return name.startswith(_JOINING_SCRIPTS) or unicodedata.category(ch) in ("Mn", "Mc")


def _script(ch: str) -> str | None:
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    return name.split(" ", 1)[0] if name else None


def _mixed_script_words(text: str) -> list[tuple[int, int]]:
    spans = []
    for m in _WORD.finditer(text):
        word = m.group()
        if word.isascii():
            continue
        scripts = {_script(ch) for ch in word} - {None}
        if "LATIN" in scripts and scripts & _CONFUSABLE_SCRIPTS:
            spans.append(m.span())
    return spans


def detect(fields: Sequence[TextField]) -> RiskFlag | None:
    """The ``hidden_characters`` flag for a write's text fields, or None."""
    best: dict[str, float] = {}
    spans: list[Span] = []
    for item in fields:
        text = item.text
        if text.isascii() and not _ASCII_CONTROL.search(text):
            continue  # the common case: nothing below can fire
        run_start = None
        for i in range(len(text) + 1):
            kind = _kind(text, i) if i < len(text) else None
            if kind is not None:
                best[kind] = max(best.get(kind, 0.0), WEIGHTS[kind])
            if kind is not None and run_start is None:
                run_start = i
            elif kind is None and run_start is not None:
                spans.append(Span(item.field, run_start, i))
                run_start = None
        for start, end in _mixed_script_words(text):
            best["mixed_script"] = WEIGHTS["mixed_script"]
            spans.append(Span(item.field, start, end))
    if not best:
        return None
    score = combine(best.values())
    return RiskFlag(NAME, severity_for(score, medium=MEDIUM, high=HIGH), score, tuple(spans))
