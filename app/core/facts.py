"""Facts a short memory text states, read structurally: (subject, attribute, value) (pure).

An attribute here takes one value at a time, so a second value for the same subject replaces
the first: where someone lives (``residence``: "lives in", "moved to", "relocated to"), whom they
work for (``employer``: "works at", "joined", "now works at", "was hired by"; "left" ends it), their
phone number and e-mail address (``phone``, ``email``: read by the value's type, whatever the
sentence around it, kept apart by a qualifier such as work or home), their title (``title``: "was
promoted to", "became", "is now", "is the CTO"), a definite thing's owner (``owner``: "bought",
"is owned by", "belongs to"; "sold" ends it) and how many of something they have (``count:<noun>``:
"has 3 cats"). German, French, Spanish, Portuguese, Italian and Dutch residence, employer and count
phrasings are read the same way; phone numbers and e-mail addresses in any language.

Subjects are names (a possessive "Heidi's" is Heidi's own attribute, "Heidi's sister" is someone
else); "I", "me", "my" and "the user" are one subject, ``user``; a pronoun ("she") is ``pronoun``,
which only the caller may decide to match (it knows how similar the two texts are). A hedged,
future, questioned or negated sentence states no fact ("might move to", "is moving to", "didn't
join"); "also", "another", "a second" mark a value added beside the old one (``additive``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"(?<![\w+])\+?\d[\d ().-]{5,}\d(?!\w)")
_PRONOUNS = frozenset({"she", "he", "they", "her", "him", "his", "them", "their", "sie", "er", "elle", "il",
                       "ella", "él", "ele", "ela", "lei", "lui", "zij", "hij", "ze"})
_USER = frozenset({"i", "me", "my", "user", "the user", "user's", "the user's", "ich", "je", "yo", "eu", "io", "ik"})
_HEDGE = re.compile(
    r"\b(?:might|may|could|would|should|maybe|perhaps|probably|possibly|plans?|planning|wants?|wanted|hopes?|"
    r"hoping|considering|thinking|will|going to|is moving|are moving|am moving|if|unless|whether|not|never|"
    r"didn't|doesn't|don't|isn't|wasn't|hasn't|haven't|won't|used to|rumou?red|said to|allegedly|"
    r"vielleicht|nicht|peut-être|pas|quizás|quizá|talvez|forse|misschien|niet|no)\b")
_ADDITIVE = re.compile(r"\b(?:also|too|as well|another|a second|second|additional|part-time|side|besides|"
                       r"auch|aussi|también|também|anche|ook)\b")
_ARTICLE = re.compile(r"^(?:the|a|an|der|die|das|le|la|les|l'|el|los|las|o|os|a|as|il|lo|de|het|een)\s+")
_CUT = re.compile(
    r"\s*(?:,|;|\(|\bsince\b|\bafter\b|\bbefore\b|\bbecause\b|\bwhere\b|\bwhich\b|\bwho\b|\bwith\b|\bfrom\b|"
    r"\band\b|\bbut\b|\bas\b|\bfor\b|\bon\b|\bat the\b|\bback in\b|\bin (?:early |late |mid-?)?"
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december|spring|"
    r"summer|autumn|fall|winter|\d{4})\b|\blast\b|\bthis\b|\bnext\b|\byesterday\b|\btoday\b|\brecently\b|"
    r"\bearlier\b|\bago\b|\bnow\b|\bpermanently\b|\bfor good\b|\bletzt\w*\b|\bseit\b|\bim\b|\bdernier\w*\b|"
    r"\bdepuis\b|\ben (?:janvier|\d{4})\b|\bel (?:mes|año)\b|\bpasad[oa]\b|\bdesde\b|\bno (?:mês|ano)\b|"
    r"\bpassad[oa]\b|\bscors[oa]\b|\bdal\b|\bvorig\w*\b|\bsinds\b|\bund\b|\bet\b|\by\b|\be\b|\ben\b).*$")
_NOT_A_PLACE = re.compile(r"\b(?:team|department|division|role|position|job|project|office|group|unit|desk|"
                          r"floor|shift|plan|tier|account|channel|phase|stage|level)\b")
_HOME = re.compile(r"^(?:(?:a|an|the|her|his|their|my|our)\s+)?(?:new\s+|bigger\s+|smaller\s+)?"
                   r"(?:apartment|flat|house|home|place|condo|studio)\s+(?:in|on|near)\s+")
_MEMBERSHIP = re.compile(r"\b(?:club|team|group|gym|choir|league|band|class|course|committee|board|community|"
                         r"society|meetup|union|church|program|programme|project|call|meeting|chat|channel|"
                         r"discord|slack|waitlist|newsletter|party|crew|squad)\b")
_TITLES = frozenset(
    "ceo cto cfo coo cio cmo cpo ciso vp svp evp president chair chairman chairwoman chairperson director "
    "manager head lead principal partner founder cofounder co-founder owner engineer developer designer "
    "analyst architect scientist researcher consultant officer secretary treasurer captain chief editor "
    "professor lecturer teacher nurse doctor surgeon lawyer attorney accountant intern associate "
    "supervisor coordinator administrator admin specialist strategist producer marketer recruiter".split())
_QUALIFIERS = frozenset({"work", "office", "home", "landline", "fax", "business", "personal", "private", "school",
                         "university", "backup", "secondary", "emergency", "desk"})
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
            "ten": 10, "eleven": 11, "twelve": 12, "zwei": 2, "drei": 3, "vier": 4, "deux": 2, "trois": 3,
            "quatre": 4, "dos": 2, "tres": 3, "cuatro": 4, "dois": 2, "duas": 2, "três": 3, "due": 2, "tre": 3,
            "twee": 2, "drie": 3}

# (verb phrase, attribute, ends it): the subject stands before the phrase, the value after it.
_FORWARD: list[tuple[str, str, bool]] = [
    (r"(?:now |currently )?(?:lives|live|resides|reside|is living|are living|am living) (?:in|on)", "residence", False),
    (r"(?:has |have |had |just )?(?:moved|relocated|moved back|relocated back|emigrated) (?:to|into)", "residence", False),
    (r"(?:is|are|am) (?:now )?(?:based|settled) in", "residence", False),
    (r"(?:now )?(?:works|work|is working|am working|are working) (?:at|for)", "employer", False),
    (r"(?:is|are|am) (?:now )?(?:employed|working) (?:by|at|for)", "employer", False),
    (r"(?:has |have |just )?(?:joined|started at|started working at|started working for|got a job at|took a job at"
     r"|took a job with|signed with|went to work for|switched to)", "employer", False),
    (r"(?:was|were|got|has been) (?:hired|recruited) (?:by|at)", "employer", False),
    (r"(?:has |have |just )?(?:left|quit|resigned from|was fired from|was laid off from|no longer works (?:at|for))",
     "employer", True),
    (r"(?:was|were|got|has been) promoted to", "title", False),
    (r"(?:has |have |just )?became", "title", False),
    (r"(?:was|were|has been) (?:named|appointed|made)", "title", False),
    (r"(?:is|are|am) now", "title", False),
    (r"(?:is|are|am|was)", "title", False),
    (r"(?:now )?(?:has|have|owns|own)", "count", False),
    # German, French, Spanish, Portuguese, Italian, Dutch
    (r"(?:wohnt|lebt|wohne|lebe) (?:jetzt |nun )?in", "residence", False),
    (r"(?:ist|bin) (?:jetzt |nun |letzten monat |letztes jahr )?nach", "residence", False),
    (r"(?:zog|zieht) (?:nach|in)", "residence", False),
    (r"(?:arbeitet|arbeite) (?:jetzt |nun )?(?:bei|für)", "employer", False),
    (r"(?:habite|vit|vis|demeure|réside) (?:maintenant |désormais )?(?:à|a|en|au)", "residence", False),
    (r"(?:a|ai|est|s'est) (?:déménagé|démenagé|installée?|partie?) (?:à|a|en|au|pour)", "residence", False),
    (r"(?:travaille|travailles) (?:maintenant |désormais )?(?:chez|pour)", "employer", False),
    (r"(?:a|ai) rejoint", "employer", False),
    (r"(?:vive|vivo|reside|resido) (?:ahora )?en", "residence", False),
    (r"(?:se mudó|se ha mudado|me mudé|se trasladó) (?:a|en)", "residence", False),
    (r"(?:trabaja|trabajo) (?:ahora )?(?:en|para)", "employer", False),
    (r"(?:se unió|entró|se incorporó) a", "employer", False),
    (r"(?:mora|moro|vive|vivo) (?:agora )?(?:em|no|na|nos|nas)", "residence", False),
    (r"(?:se mudou|mudou-se|mudou|me mudei) (?:para|pra)", "residence", False),
    (r"(?:trabalha|trabalho) (?:agora )?(?:em|no|na|para)", "employer", False),
    (r"(?:vive|vivo|abita|abito) (?:ora |adesso )?(?:a|in)", "residence", False),
    (r"(?:si è trasferit[oa]|mi sono trasferit[oa]) (?:a|in)", "residence", False),
    (r"(?:lavora|lavoro) (?:ora |adesso )?(?:presso|per|da|alla|al|in)", "employer", False),
    (r"(?:woont|woon) (?:nu )?in", "residence", False),
    (r"(?:is|ben) (?:verhuisd|verhuist) naar|verhuisde naar", "residence", False),
    (r"(?:werkt|werk) (?:nu )?(?:bij|voor)", "employer", False),
    (r"(?:hat|habe|a|ai|tiene|tengo|tem|tenho|ha|ho|heeft|heb) (?:jetzt |maintenant |ahora |agora |ora |nu )?",
     "count", False),
]
# The owner of a definite thing: (phrase, thing stands before it, ends it).
_OWNER: list[tuple[str, bool, bool]] = [
    (r"(?:now )?(?:owns|bought|purchased|acquired|inherited|took over|has bought|has acquired)", False, False),
    (r"(?:sold|has sold|gave away)", False, True),
    (r"(?:is|was|has been) (?:now )?(?:owned by|sold to|bought by|acquired by|transferred to)", True, False),
    (r"(?:now )?belongs to", True, False),
]


@dataclass(frozen=True)
class Fact:
    subject: str
    attribute: str
    value: str
    shown: str
    additive: bool = False
    ends: bool = False
    """The fact says the value stopped holding ("left Acme", "sold the car")."""


def _compile(phrase: str) -> re.Pattern[str]:
    return re.compile(r"(?:^|(?<=\s))(?:" + phrase + r")(?=\s|$)")


_FORWARD_RE = [(_compile(p), a, e) for p, a, e in _FORWARD]
_OWNER_RE = [(_compile(p), before, e) for p, before, e in _OWNER]
_LEAD = re.compile(r"^(?:(?:as of|since|in|last|this|after|yesterday|today|recently|update|note|fyi|btw|"
                   r"actually|so|and|but|now|also|anyway)\b[^,:]*[,:]\s*)+")


def facts(text: str) -> list[Fact]:
    """The facts `text` states (at most 20 sentences of at most 300 characters are read)."""
    found: list[Fact] = []
    sentences = [s.strip() for s in _SENTENCE.split(text or "") if s.strip()]
    for sentence in sentences[:20]:
        if len(sentence) <= 300 and not sentence.endswith("?"):
            found += _sentence_facts(sentence)
    return found


SENTENCE_CACHE = 4096
"""Sentences whose facts are kept: a write is compared with each of its nearest live memories,
and the same neighbours come back write after write, so each sentence is read once, not once per
comparison (the reading was a fifth of a remember's Python time at 8 clients)."""


@functools.lru_cache(maxsize=SENTENCE_CACHE)
def _sentence_facts(sentence: str) -> tuple[Fact, ...]:
    """The facts of one sentence (a tuple: cached, shared between callers)."""
    return tuple(_read_sentence(sentence))


def _read_sentence(sentence: str) -> list[Fact]:
    original = sentence.replace("\u2019", "'").strip().rstrip(".!")
    low = _LEAD.sub("", original.casefold())
    found = _typed(original)
    for pattern, before, ends in _OWNER_RE:
        match = pattern.search(low)
        if match is None or _HEDGE.search(low[:match.start()]):
            continue
        left, right = low[:match.start()].strip(), _value(low[match.end():])
        thing, owner = (left, right) if before else (right, left)
        if _definite(thing, original) and owner and (subject := _subject(owner)):
            found.append(Fact(_thing(thing), "owner", subject, owner, ends=ends))
            return found
    for pattern, attribute, ends in _FORWARD_RE:
        match = pattern.search(low)
        if match is None:
            continue
        subject = _subject(low[:match.start()])
        if subject is None or _HEDGE.search(low[:match.start()]):
            continue
        rest = low[match.end():].strip()
        if re.match(r"^(?:not|no longer|never|nicht|pas|no|não|niet)\b", rest):
            break  # "is not the CTO": a negation, which the frame reader compares
        fact = _read(attribute, subject, rest, ends, bool(_ADDITIVE.search(low)))
        if fact is not None:
            found.append(fact)
        break  # the sentence's first verb phrase is its claim
    return found


def _read(attribute: str, subject: str, rest: str, ends: bool, additive: bool) -> Fact | None:
    if attribute == "count":
        match = re.match(r"^(?:(?:about|around|exactly|only|just|over)\s+)?(\d+|[a-zà-ÿ]+)\s+(?:[a-zà-ÿ-]+\s+)?"
                         r"([a-zà-ÿ-]+?)(?:e?s)?\b", rest)
        if match is None:
            return None
        number = int(match.group(1)) if match.group(1).isdigit() else _NUMBERS.get(match.group(1))
        if number is None:
            return None
        return Fact(subject, "count:" + match.group(2), str(number), match.group(1), additive=additive)
    if attribute == "title":
        value = _value(rest)
        head = _title_head(value)
        if head is None:
            return None
        return Fact(subject, "title", head, value, additive=additive)
    value = _value(rest)
    if attribute == "residence":
        value = _HOME.sub("", value)
        if not value or _NOT_A_PLACE.search(value):
            return None
    if attribute == "employer" and (not value or _MEMBERSHIP.search(value)):
        return None
    if not value or len(value.split()) > 6:
        return None
    return Fact(subject, attribute, value, value, additive=additive, ends=ends)


def _value(rest: str) -> str:
    value = _CUT.sub("", rest.strip()).strip(" .!\"'")
    value = re.sub(r"^(?:back |permanently |over )", "", value)
    while _ARTICLE.match(value):
        value = _ARTICLE.sub("", value, count=1)
    return value.strip()


def _title_head(value: str) -> str | None:
    """The title word of "(the new) head of sales", "senior engineer", "CTO at Acme", or None."""
    words = re.split(r"\s+(?:of|at|for|in|with|on)\s+", value)[0].replace("new ", "").split()
    return next((w for w in reversed(words) if w.strip("-") in _TITLES), None) if 0 < len(words) <= 5 else None


def _subject(left: str) -> str | None:
    """The subject standing before a verb phrase, normalised; None when it is not a short name phrase."""
    words = re.sub(r"[^\w'\s-]", " ", left).split()
    while words and words[0] in ("the", "a", "an", "now", "so", "and", "then", "recently", "finally"):
        words = words[1:]
    if not 0 < len(words) <= 4:
        return None
    phrase = " ".join(words)
    if phrase in _USER:
        return "user"
    if phrase in _PRONOUNS:
        return "pronoun"
    if any(w in _PRONOUNS - {"her", "his", "their"} for w in words):
        return None
    return phrase


def _thing(text: str) -> str:
    return re.sub(r"^(?:the|der|die|das|le|la|el|o|a|il|de|het)\s+", "", _value(text))


def _definite(thing: str, original: str) -> bool:
    """A specific thing ("the Tesla", "Acme Corp", "Bob's house"), not "a car"."""
    if not thing or len(thing.split()) > 6:
        return False
    if re.match(r"^(?:a|an|some|one|two|\d+)\s", thing):
        return False
    return thing.startswith(("the ", "der ", "die ", "das ", "le ", "la ", "el ")) or "'s " in thing \
        or any(w[:1].isupper() for w in original.split()[1:] if w.casefold().strip(".,") in thing.split())


def _typed(sentence: str) -> list[Fact]:
    """Phone numbers and e-mail addresses, read by their shape: the subject is the name the sentence
    is about (a possessive or the first name in it), in any language."""
    found: list[Fact] = []
    subject = _typed_subject(sentence)
    if subject is None:
        return found
    low = _PHONE.sub(" ", _EMAIL.sub(" ", sentence)).casefold()  # the words around the values, not inside them
    if re.search(r"\b(?:old|former|previous|used to|was|ancien\w*|alt\w*|antigu\w*)\b", low):
        return found  # a past value, not the current one
    qualifier = next((w for w in re.findall(r"[\w-]+", low) if w in _QUALIFIERS), "")
    additive = bool(_ADDITIVE.search(low)) or bool(_HEDGE.search(low))
    for match in _EMAIL.finditer(sentence):
        found.append(Fact(subject, "email" + (":" + qualifier if qualifier else ""), match.group().casefold(),
                          match.group(), additive=additive))
    for match in _PHONE.finditer(sentence):
        digits = re.sub(r"\D", "", match.group())
        if len(digits) >= 7 and not re.fullmatch(r"(?:19|20)\d\d", digits[:4]) or len(digits) >= 9:
            found.append(Fact(subject, "phone" + (":" + qualifier if qualifier else ""), digits[-9:], match.group(),
                              additive=additive))
    return found


def _typed_subject(sentence: str) -> str | None:
    possessive = re.search(r"\b([A-Z][\w-]+(?:\s[A-Z][\w-]+)?)'s\b", sentence)
    if possessive:
        return possessive.group(1).casefold()
    low = sentence.casefold()
    if re.search(r"\b(?:my|i|me|user's|the user)\b", low):
        return "user"
    names = [w for w in re.findall(r"\b[A-ZÀ-Ý][\w-]+", sentence)[:4]
             if w.casefold() not in _STOP_CAPS]
    return names[0].casefold() if names else None


_STOP_CAPS = frozenset({"the", "new", "his", "her", "their", "phone", "email", "e-mail", "mobile", "call", "reach",
                        "contact", "update", "note", "tel", "cell", "number", "mail", "die", "der", "das", "le",
                        "la", "el", "o", "a", "il", "de", "het", "seine", "ihre", "sa", "son", "su", "nuevo",
                        "neue", "neuer", "nouveau", "nouvelle", "nuovo", "nieuw", "nieuwe", "novo", "nova",
                        "telefon", "téléphone", "teléfono", "telefone", "telefono", "telefoon", "she", "he",
                        "they", "as", "since", "from", "in", "on", "last", "now", "fyi", "btw", "work", "home"})
