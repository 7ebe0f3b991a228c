"""Folding text for matching while keeping offsets into the original.

Attackers dodge keyword matching with full-width letters (``ｉｇｎｏｒｅ``), look-alike letters
from other scripts (Cyrillic ``о`` for Latin ``o``) and invisible characters inside words
(``ign\u200bore``). ``fold`` undoes those per character — NFKC, case folding, a small
confusables table, invisible format characters dropped — and records for every folded character
the index of the original one it came from, so a match in folded text maps back to a span of what
was written.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

# Cyrillic and Greek letters that render like Latin ones (lower case; input is case-folded first).
CONFUSABLES = {
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c",
    "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i", "ј": "j", "ԁ": "d", "ԛ": "q", "ԝ": "w",
    "ɡ": "g", "ο": "o", "α": "a", "ι": "i", "κ": "k", "ν": "v", "ρ": "p", "τ": "t", "υ": "u", "χ": "x",
    "ϲ": "c", "ϳ": "j", "ɑ": "a", "ı": "i",
}


@dataclass(frozen=True)
class Folded:
    """Folded text and, per folded character, the index of its original character."""

    text: str
    origin: tuple[int, ...]
    length: int
    """Length of the original text."""

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original ``[start, end)`` that folded ``[start, end)`` came from."""
        if end <= start:
            pos = self.origin[start] if start < len(self.origin) else self.length
            return pos, pos
        return self.origin[start], self.origin[end - 1] + 1


def is_invisible(ch: str) -> bool:
    """Format characters (Cf: zero-width, bidi controls, tag characters, soft hyphen)."""
    return unicodedata.category(ch) == "Cf"


def fold(text: str) -> Folded:
    """Lower-case, NFKC, confusable-mapped text without invisible characters, with an offset map."""
    if text.isascii():
        return Folded(text.lower(), tuple(range(len(text))), len(text))
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        if is_invisible(ch):
            continue
        for part in unicodedata.normalize("NFKC", ch).casefold():
            part = CONFUSABLES.get(part, part)
            out.append(part)
            origin.append(i)
    return Folded("".join(out), tuple(origin), len(text))


def finditer(pattern: re.Pattern[str], folded: Folded) -> Iterator[tuple[int, int]]:
    """Matches of ``pattern`` in folded text, as original ``(start, end)`` spans."""
    for m in pattern.finditer(folded.text):
        yield folded.span(*m.span())
