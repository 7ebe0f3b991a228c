"""Whether a text is (mostly) English: a cheap script and function-word reading, no model.

Used to decide which writes another embedder should also read. A text is *not* English when more
than ``NON_LATIN_SHARE`` of its letters are outside ASCII (CJK, Cyrillic, Arabic, Devanagari,
Greek, or Latin heavy with diacritics), or when its words hold more of the commonest function words
of other Latin-script languages than of English. Short texts with neither count as English.
The word lists name grammar (articles, prepositions, conjunctions), never anything a write asks.
One pass over at most ``SCAN_LIMIT`` characters.
"""

from __future__ import annotations

import re

SCAN_LIMIT = 4096
NON_LATIN_SHARE = 0.2
_WORD = re.compile(r"[^\W\d_]{1,40}")
ENGLISH = frozenset(
    "the a an and or but to of in on at for with from by is are was were be been it its this that these those "
    "he she they his her their them we our you your i my me not no if when will would should can".split())
OTHER = frozenset(
    # German, French, Spanish, Italian, Portuguese, Dutch, Polish, Swedish, Turkish
    "der die das und ist nicht mit für auf ein eine zu den von im dem des sich auch "
    "le la les et est une un pour dans du que qui en au aux sur pas ne "
    "el los las y es una por con para del se su al lo como "
    "il gli di che per non della nel alla sono "
    "o os é um uma não com em do da dos das ao "
    "het een en van niet met voor op zijn ook "
    "w z na się nie jest do że od po "
    "och att är som för med av inte "
    "ve bir bu ile için da de".split()) - ENGLISH


def mostly_english(text: str) -> bool:
    """True when ``text`` reads as English (or is too short to tell)."""
    sample = text[:SCAN_LIMIT]
    letters = sum(c.isalpha() for c in sample)
    if not letters:
        return True
    if sum(c.isalpha() and not c.isascii() for c in sample) > NON_LATIN_SHARE * letters:
        return False
    words = [w.lower() for w in _WORD.findall(sample)]
    english = sum(w in ENGLISH for w in words)
    other = sum(w in OTHER for w in words)
    return other <= english or other < 2
