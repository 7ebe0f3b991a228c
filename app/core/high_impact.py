"""Structure in a write that makes it high-impact whatever its words: something to reach (a link,
an e-mail address, a phone or account number, a file path), something to run (code, a shell
command, an SQL statement), a secret-like token, or a standing instruction (a schedule, a
trigger condition, an order given in the imperative). Pure: no database, no model.

A learned policy rule (``app.core.policy``) trusts what a person approved before; it must not
trust screening's silence on writes like these, because a screening miss would then go live with
no one deciding. So a learned rule never approves a write in which ``features`` finds anything:
such a write goes to whatever the rest of the policy says (usually a person).

The checks are shapes, not sentences: URL and address grammar, digit runs, shell operators and
flags, SQL's keyword-clause structure, recurrence and condition grammar, and a clause opening
with a bare verb (the imperative mood). The verb list is of English action verbs, not of attack
phrasings. A false positive costs one review; a false negative costs a write no one approved, so
the shapes are broad on purpose. Not detected: instructions with none of these shapes in the
first ``SCAN_LIMIT`` characters, and languages other than English for the grammar-based checks.
"""

from __future__ import annotations

import re
from typing import Iterator

from app.core.redaction import MARKER_RE
from app.core.screening.normalize import fold

SCAN_LIMIT = 64 * 1024
"""Only this much of a write is examined (as much as a policy's ``content_pattern`` searches)."""

FEATURES = ("link", "email", "phone", "number", "path", "code", "shell", "sql", "credential", "schedule",
            "condition", "imperative")
"""Every feature name ``features`` can return, in a fixed order."""

_F = re.IGNORECASE

_LINK = re.compile(
    r"\b[a-z][a-z0-9+.-]{1,15}://\S"                       # any scheme://
    r"|\b(?:mailto|data|javascript|file|tel|sms):\S"
    r"|\bwww\d?\.\S"
    r"|(?<![\w.@-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,12}(?::\d{2,5})?/"  # host/...
    r"|(?<![\w.@-])(?:[a-z0-9-]+\.)*[a-z0-9-]+\.(?:com|net|org|io|co|info|biz|xyz|app|dev|sh|me|ly|gg|cc|ru|cn|tk"
    r"|top|site|online|link|click|example|local|internal|onion|[a-z]{2})(?::\d{2,5})?(?![\w-])"  # bare host
    r"|(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)"           # IPv4
    r"|\[?[0-9a-f]{1,4}(?::[0-9a-f]{0,4}){4,7}\]?", _F)     # IPv6
_EMAIL = re.compile(r"(?<![\w.+'-])[\w.+'-]{1,64}(?:@|\s?(?:\[at\]|\(at\))\s?)[\w-]{1,63}"
                    r"(?:(?:\.|\s?(?:\[dot\]|\(dot\))\s?)[\w-]{1,63}){1,8}", _F)
# Every repetition below is bounded: the text is an attacker's, and an unbounded one inside a
# pattern tried at every position costs quadratic time on a long run of word characters.
# Dates and clock times are common in plain facts; they are taken out before digits are counted.
_DATE_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?)?\b|\b\d{1,2}[./]\d{1,2}[./]\d{2,4}\b"
                        r"|\b\d{1,2}:\d{2}(?::\d{2})?\b", _F)
_PHONE = re.compile(r"(?<![\w+])\+?\(?\d[\d\s().-]{6,}\d(?!\w)")
_IBAN = re.compile(r"\b[a-z]{2}\d{2}(?:\s?[a-z0-9]{4}){2,7}(?:\s?[a-z0-9]{1,4})?\b", _F)
_IBAN_DIGITS = 10  # an IBAN carries at least this many digits; words shaped like one do not
_LONG_DIGITS = re.compile(r"\d[\d\s-]{4,}\d")
_PATH = re.compile(r"(?:^|[\s'\"(=])(?:~|\.{1,2})?/(?:[\w.@%+-]+/)*[\w.@%+-]+|\b[a-z]:\\|\\\\[\w.-]+\\|"
                   r"(?:^|\s)~[\w.-]*/|\$[a-z_][a-z0-9_]*\b|%[a-z_]+%", _F)
_CODE = re.compile(r"`|<\s*/?\s*[a-z][a-z0-9-]*(?:\s[^<>]*)?>|[{}]|=>|->|::|\b[a-z_][\w.]{0,64}\([^()\n]{0,200}\)"
                   r"|^\s*(?:#!|>>>|\$\s)|;\s*$|\b(?:def|lambda|eval|exec)\b[\s(]", _F | re.M)
# A redirection names a path, a descriptor or a variable: ``</b>.`` (a closing tag, then a full stop) is none.
_SHELL = re.compile(r"&&|\|\||(?<![|])\|(?![|])\s*[a-z]|\$\(|>>?\s*(?:[/~$]|\.{1,2}/|&\d)|\s<\s*[/~.]|(?:^|\s)-{1,2}[a-z][\w-]*(?:=\S+)?"
                    r"(?=\s|$)|(?:^|[\s;])(?:sudo|chmod|chown|rm|curl|wget|nc|ssh|scp|dd|mkfs)\s", _F | re.M)
_SQL = re.compile(
    r"\b(?:select\s+[\w*,.\s()]{1,200}?\s+from\s+\w|insert\s+into\s+\w|update\s+\w+\s+set\s+\w|delete\s+from\s+\w"
    r"|(?:drop|truncate|alter|create)\s+(?:table|database|schema|index|user|role|view)\b|grant\s+\w+(?:\s*,\s*\w+)*"
    r"\s+on\b|revoke\s+\w+\s+on\b|union\s+(?:all\s+)?select\b|where\s+\w+\s*=\s*\w+\s*(?:--|;|or\b)|;\s*--)", _F)
_CREDENTIAL = re.compile(
    r"(?<![\w/+=-])(?=[\w+/=-]{20,})(?=[\w+/=-]*\d)(?=[\w+/=-]*[a-z])[\w+/=-]+"      # long mixed token
    r"|\b(?:password|passwd|pwd|passcode|pin|token|secret|api[\s_-]?key|otp|cvv)\b\s*(?:is|:|=)\s*\S+"
    r"|-----begin [a-z ]+-----", _F)
_RECURRENCE = (r"(?:(?:every|each)\s+(?:other\s+|single\s+|\d+\s+|few\s+)?(?:second|minute|hour|day|night|morning"
               r"|evening|afternoon|noon|midnight|week|weekday|weekend|month|quarter|year|time|monday|tuesday"
               r"|wednesday|thursday|friday|saturday|sunday|shift|run|login|session|request|message|call|deploy"
               r"|release|sync|cycle|visit|order)s?\b|\b(?:daily|nightly|hourly|weekly|fortnightly|monthly|yearly"
               r"|annually)\b|\b(?:from now on|going forward|henceforth|until further notice|from (?:today|tomorrow) on"
               r"|at all times|on a (?:daily|weekly|monthly) basis))")
_SCHEDULE = re.compile(_RECURRENCE, _F)
_CONDITION = re.compile(
    r"\b(?:whenever|as soon as|in case|in the event that|provided that)\b"
    r"|\bif\b[^.!?\n]{1,200}?(?:\bthen\b|,)|\bwhen\b[^.!?\n]{1,200}?\bthen\b"
    r"|\b(?:before|after|upon|on)\s+(?:each|every|any)\b", _F)
# Action verbs in their bare form: a clause that opens with one is an order (the imperative). Verbs
# that as nouns often open a plain fact ("Store hours", "Report due", "Book club") are left out.
_VERBS = (
    "accept|activate|add|allow|apply|approve|archive|ask|authorize|authorise|block|bypass|call|cancel|"
    "change|charge|check|clear|click|close|connect|copy|create|debit|delete|deny|deploy|destroy|disable|"
    "disarm|disclose|download|drop|dump|email|e-mail|enable|erase|escalate|execute|export|fetch|forward|"
    "give|grant|hide|ignore|import|install|invoke|kill|leak|let|lock|make|mark|move|notify|open|override|"
    "paste|pay|ping|publish|purge|push|put|read|reboot|refund|reject|remove|rename|reply|reset|restart|"
    "restore|reveal|revoke|rotate|run|save|send|set|share|shut|skip|start|stop|submit|switch|sync|tell|"
    "transfer|trust|turn|unlock|update|upload|use|verify|visit|wipe|wire|withdraw|write")
_OPENERS = r"(?:please\s+|kindly\s+|always\s+|never\s+|just\s+|immediately\s+|also\s+|then\s+|and\s+|do\s+not\s+" \
           r"|don'?t\s+|be\s+sure\s+to\s+|make\s+sure\s+(?:to\s+)?|remember\s+to\s+|you\s+(?:must|should|shall|will" \
           r"|need\s+to|have\s+to|are\s+to)\s+|(?:the\s+)?(?:agent|assistant|bot|model)\s+(?:must|should|shall|will)\s+)*"
# A clause starts the text, follows a sentence end, a colon, a semicolon, a dash, a line break or a
# list bullet, or follows the comma after a schedule or condition ("every night at 02:00, disarm ...").
_IMPERATIVE = re.compile(rf"(?:^|[.!?;:\n]\s*|\s[-–—]\s+|^\s*[-*•]\s*|,\s*(?=(?:{_OPENERS})(?:{_VERBS})\b))\s*"
                         rf"(?:{_OPENERS})(?:{_VERBS})\b(?!['’]s)(?![-]\w)", _F | re.M)
_MODAL_ORDER = re.compile(r"\byou\s+(?:must|shall|are\s+to|have\s+to|need\s+to)\b|\b(?:must|shall)\s+(?:always|never)\b",
                          _F)


def locate(text: str | None) -> Iterator[tuple[str, int, int]]:
    """Every high-impact structure in ``text`` as ``(feature, start, end)``: code point offsets into
    ``text`` itself (matching runs on folded text; ``normalize.Folded.span`` maps back). Linear time."""
    if not text:
        return
    raw = text[:SCAN_LIMIT]
    folded = fold(raw)
    for name, pattern in (("link", _LINK), ("email", _EMAIL)):
        for m in pattern.finditer(folded.text):
            yield (name, *folded.span(*m.span()))
    for pattern in (MARKER_RE, _CREDENTIAL):
        for m in pattern.finditer(raw):
            yield ("credential", *m.span())
    # Dates and times are blanked to spaces of the same length, so offsets into folded text still hold.
    digits_text = _DATE_TIME.sub(lambda m: " " * len(m.group()), folded.text)
    for name, pattern, least in (("phone", _PHONE, 7), ("number", _IBAN, _IBAN_DIGITS), ("number", _LONG_DIGITS, 6)):
        for m in pattern.finditer(digits_text):
            if sum(ch.isdigit() for ch in m.group(0)) >= least:
                yield (name, *folded.span(*m.span()))
    for name, pattern in (("path", _PATH), ("code", _CODE), ("shell", _SHELL), ("sql", _SQL),
                          ("schedule", _SCHEDULE), ("condition", _CONDITION), ("imperative", _IMPERATIVE),
                          ("imperative", _MODAL_ORDER)):
        for m in pattern.finditer(folded.text):
            yield (name, *folded.span(*m.span()))


def features(text: str | None) -> tuple[str, ...]:
    """The high-impact structures found in ``text`` (names from ``FEATURES``), or ``()``."""
    found = {name for name, _start, _end in locate(text)}
    return tuple(name for name in FEATURES if name in found)


def describe(found: tuple[str, ...]) -> str:
    """The features in a short phrase for a trace ("a link and a command")."""
    words = {"link": "a link", "email": "an e-mail address", "phone": "a phone number", "number": "an account-like "
             "number", "path": "a file path", "code": "code", "shell": "a shell command", "sql": "an SQL statement",
             "credential": "a secret-like token", "schedule": "a schedule", "condition": "a trigger condition",
             "imperative": "an order"}
    names = [words[f] for f in found]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
