"""``secret_leftover`` and ``pii``: sensitive values that redaction (SR-1) left in the write.

Screening runs on the redacted payload, so whatever ``app.core.redaction`` caught is already a
``<REDACTED:label>`` marker and is skipped here. These detectors look for what its patterns do
not cover:

``secret_leftover`` (high unless noted):
* an account credential stated in words — "the password is hunter2", "card PIN: 4821", "backup
  code 8812-2291" (the value must contain a digit or symbol, or be quoted, so "the password is
  stored in the vault" is not one); a door / gate / alarm / access code is medium: people ask
  assistants to remember those, and they do not open accounts;
* a login pair after its label ("SFTP credentials: user bob / Falcon79$");
* a URL with embedded credentials (``postgres://app:s3cret@db``);
* a bearer token (``Bearer eyJhbGciOi…`` / ``Bearer 7f9a…``);
* a long high-entropy token (≥ 32 characters, upper, lower and digits, ≥ 4.2 bits/char): medium.

``pii``:
* US social security numbers (valid area/group/serial) and 9 digits after "SSN": high;
* IBANs that pass the mod-97 check: high (a changed payee account is a classic fraud);
* national id, tax, social-security, passport and licence numbers after their label in some thirty
  languages (at least five digits), UK National Insurance numbers by their shape, and the formats
  that carry a checksum even without a label (CPF, Chinese and Korean resident numbers, codice
  fiscale, DNI/NIE, CNP, personnummer, NIR; see ``identifiers``): medium;
* email addresses and phone numbers (international ``+44 7700 900123`` / ``0044…``, trunk-prefixed
  ``07700 900123``, grouped national forms; 9 to 15 digits, not a date or IP address): low (users' own contact
  details are ordinary memories; the flag only tells the reviewer they are there);
* a date of birth after its label ("DOB", "date of birth", "born on", "geboren", "née le",
  "生年月日" …): low;
* a "profile", the kit for account-recovery fraud and impersonation, high: a date of birth together
  with two other identifiers (phone, email, id number, SSN, IBAN, postal address) or with an id number; an id
  number with two others (phone, email, IBAN, postal address: a label, "lives at", or a house number
  beside a street word); or an id number whose check digit passes with any
  other identifier.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Sequence

from app.core.redaction import MARKER_RE
from app.core.screening import identifiers
from app.core.screening.flags import RiskFlag, Span, TextField, combine, severity_for
from app.core.screening.signals import SCAN_LIMIT

SECRET, PII = "secret_leftover", "pii"
MEDIUM, HIGH = 0.4, 0.7

_CREDENTIAL = re.compile(
    r"(?i)\b(?:password|passwd|passcode|passphrase|pin(?: code| number)?|otp|one[- ]time (?:code|password)|"
    r"2fa code|mfa code|recovery code|backup code|security code|secret answer|security answer|"
    r"access code|alarm code|door code|gate code|wifi key|wi-fi password|api key|token)s?\b"
    r"[^.\n:=]{0,30}?(?:\bis\b|\bwas\b|\bare\b|:|=|-)\s*(?:now\s+|still\s+|set to\s+)?"
    r"(?P<value>\"[^\"\n]{3,80}\"|'[^'\n]{3,80}'|`[^`\n]{3,80}`|[^\s,;]{4,80})")
_LOGIN_PAIR = re.compile(
    r"(?i)\b(?:credentials?|creds|login|log-in|sign-in)\b[^:\n]{0,40}:\s*(?:user(?:name)?\s+)?[^\s/]{1,64}\s*/\s*"
    r"(?P<value>[^\s,;]{4,80})")
_PHYSICAL_CODE = re.compile(r"(?i)(?:access|alarm|door|gate) code")
_URL_CREDENTIALS = re.compile(r"(?i)\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@]{1,64}:[^\s@/]{1,128}@[^\s/]{1,255}")
_BEARER = re.compile(r"(?i)\bbearer\s+[a-z0-9._~+/-]{20,}=*")
_TOKEN = re.compile(r"(?<![A-Za-z0-9_+/=-])[A-Za-z0-9_+/=-]{32,512}(?![A-Za-z0-9_+/=-])")
_SSN = re.compile(r"(?<![\d-])(?P<a>\d{3})-(?P<g>\d{2})-(?P<s>\d{4})(?![\d-])")
_SSN_LABELLED = re.compile(r"(?i)\b(?:ssn|social security(?: number| no\.?)?)\b[^\d\n]{0,20}(?P<n>\d{3}[ -]?\d{2}[ -]?\d{4})(?!\d)")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_ID_NUMBER = re.compile(
    r"(?i)\b(?:passport|driver'?s? licen[cs]e|driving licen[cs]e|licen[cs]e number|national id|id card|tax id|"
    r"tax file number|nin|ni number|national insurance|nhs number|social insurance|sin|personal id|"
    r"personnummer|residence permit|visa number|medicare|aadhaar|pan card|citizen id|identity card|dni|nie|"
    r"id number|id no|mrn|medical record(?: number)?|patient id|member id|insurance id|steuer-?id)\b(?: number| no\.?| #| nr\.?)?[^\w\n]{0,4}(?:(?:is|was|reads|number|no)\b[^\w\n]{0,4}){0,2}"
    r"(?P<value>(?:[A-Z]{1,3}[ -]?)?\d{2,14}(?:[ -]\d{2,8}){0,3}[A-Z]?)\b")
# UK National Insurance numbers have a fixed, checkable shape (two prefix letters, six digits, A-D).
_NINO = re.compile(r"\b(?!BG|GB|NK|KN|TN|NT|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b")
_EMAIL = re.compile(r"(?i)\b[a-z0-9._%+-]{1,64}@[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})*\.[a-z]{2,24}\b")
_DOB = re.compile(
    r"(?i)\b(?:date of birth|d\.?o\.?b\.?|born(?: on| in)?|birth ?date|birthday|b-day|geb\.?|n\u00e9e? le)\b[^\d\n]{0,20}"
    r"(?P<d>\d{1,4}[./-]\d{1,2}[./-]\d{1,4}|\d{1,2}(?:st|nd|rd|th)?(?: of)? [a-z]{3,9},? \d{4}|"
    r"[a-z]{3,9}\.? \d{1,2}(?:st|nd|rd|th)?,? \d{4}|\d{4}-\d{2}-\d{2})")
# Phone numbers: international (+44 / 0044), trunk-prefixed (07700 900123) or grouped national
# forms; groups are separated, so matching stays linear. ``_phone_like`` then checks the digit count.
_PHONE = re.compile(r"(?<![\w+])(?:\+\d{7,14}\b|(?:(?:\+|00)\d{1,3}[ .-]?)?(?:\(0?\d{1,5}\)[ .-]?)?\d{1,6}"
                    r"(?:[ .-]\d{2,8}){1,4})(?![\w-])")


def _entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(c / len(token) * math.log2(c / len(token)) for c in counts.values())


def _random_token(token: str) -> bool:
    return (any(c.islower() for c in token) and any(c.isupper() for c in token)
            and any(c.isdigit() for c in token) and _entropy(token) >= 4.2)


def _credential_value(value: str) -> bool:
    if value[0] in "\"'`":
        return True
    if value.startswith("//"):
        return False  # "confirm your password at http://…": the colon was the URL's, the value a link
    # Contractions and hyphenated words ("it's", "well-known") are words, not secrets.
    return any(c.isdigit() for c in value) or any(not c.isalnum() and c not in "'-" for c in value.rstrip(".!?"))


def iban_valid(text: str) -> bool:
    """Whether ``text`` (spaces allowed) is an IBAN whose mod-97 check passes (shared with ``effects``)."""
    compact = "".join(text.split())
    if not 15 <= len(compact) <= 34 or not (compact.isascii() and compact.isalnum()):
        return False
    rearranged = compact[4:] + compact[:4]
    digits = "".join(str(int(c, 36)) for c in rearranged)
    return int(digits) % 97 == 1


def _ssn_valid(area: str, group: str, serial: str) -> bool:
    return area not in ("000", "666") and not area.startswith("9") and group != "00" and serial != "0000"


def _phone_like(text: str) -> bool:
    """9 to 15 digits and not a date, time or version ("2024-03-12 10:15", "1.2.3.4")."""
    digits = sum(c.isdigit() for c in text)
    if not 9 <= digits <= 15:
        return False
    if re.fullmatch(r"\d{4}[-./]\d{2}[-./]\d{2}.*|\d{1,3}(?:\.\d{1,3}){3}", text):
        return False
    return True


# A postal address: after its label in the languages the id labels cover, after "lives at", or a
# house number beside a street word (English number-first, German/Dutch/Scandinavian word-first).
# Alone it is no flag (businesses print theirs); it counts toward a profile beside an id or a birth date.
_ADDRESS = re.compile(
    r"(?i)(?:\b(?:home |postal |street |permanent |mailing )?(?:address|addr|adresse|anschrift|direcci[oó]n|domicilio|"
    r"indirizzo|endere[cç]o|adres)\b[^\w\n]{0,4}(?=[^\n]{0,12}\d)|\blives at\b|\bwohnt in\b|\bvive en\b|"
    r"\b\d{1,5}[a-z]?,? (?:[a-z][\w'.-]{1,20} ){1,3}(?:st|street|rd|road|ave|avenue|lane|ln|blvd|boulevard|drive|"
    r"dr|way|court|ct|place|pl|crescent|close|terrace)\b|"
    r"\b[a-zäöüåéè-]{2,30}(?:stra(?:ß|ss)e|str\.|weg|gasse|platz|gracht|laan|straat|v[aä]gen|gatan|gade) ?\d{1,4}\b)"
    r"|(?:住址|地址|주소|住所)")


_FIVE_DIGITS = re.compile(r"\d(?:[ ./-]?\d){4}")


def _profile(kinds: set[str]) -> bool:
    """A date of birth with two other identifiers or an id number; an id number with two others
    (phone, email, IBAN, postal address); a checksum-verified id number with any other identifier.
    An address counts only beside a birth date or an id number (businesses print address and phone)."""
    ids = kinds & {"id_number", "ssn", "verified_id"}
    others = kinds & {"email", "phone", "iban", "date_of_birth", "address"}
    if "date_of_birth" in kinds and (len(kinds & {"email", "phone", "iban", "address"}) + bool(ids) >= 2 or ids):
        return True
    return bool(ids) and (len(others) >= 2 or ("verified_id" in ids and len(others | (ids - {"verified_id"})) >= 1))


def _unmasked(text: str) -> str:
    """Redaction markers replaced by spaces of equal length, so offsets stay true and they never match."""
    return MARKER_RE.sub(lambda m: " " * len(m.group()), text)


def detect(fields: Sequence[TextField]) -> list[RiskFlag]:
    """The ``secret_leftover`` and ``pii`` flags (zero, one or both) for a write's text fields."""
    secret: dict[str, float] = {}
    pii: dict[str, float] = {}
    secret_spans: list[Span] = []
    pii_spans: list[Span] = []
    kinds_only: set[str] = set()

    def hit(store: dict[str, float], spans: list[Span], kind: str, weight: float, field: str, span: tuple[int, int]) -> None:
        store[kind] = max(store.get(kind, 0.0), weight)
        spans.append(Span(field, *span))

    for item in fields:
        text = _unmasked(item.text[:SCAN_LIMIT])
        f = item.field
        for m in _CREDENTIAL.finditer(text):
            if _credential_value(m.group("value")):
                physical = _PHYSICAL_CODE.match(m.group())
                hit(secret, secret_spans, "physical_code" if physical else "credential", 0.5 if physical else 0.85,
                    f, m.span("value"))
        for m in _LOGIN_PAIR.finditer(text):
            hit(secret, secret_spans, "credential", 0.85, f, m.span("value"))
        for m in _URL_CREDENTIALS.finditer(text):
            hit(secret, secret_spans, "url_credentials", 0.9, f, m.span())
        for m in _BEARER.finditer(text):
            hit(secret, secret_spans, "bearer", 0.85, f, m.span())
        for m in _TOKEN.finditer(text):
            if _random_token(m.group()):
                hit(secret, secret_spans, "random_token", 0.6, f, m.span())
        for m in _SSN.finditer(text):
            if _ssn_valid(m.group("a"), m.group("g"), m.group("s")):
                hit(pii, pii_spans, "ssn", 0.8, f, m.span())
        for m in _SSN_LABELLED.finditer(text):
            digits = re.sub(r"\D", "", m.group("n"))
            if _ssn_valid(digits[:3], digits[3:5], digits[5:]):
                hit(pii, pii_spans, "ssn", 0.85, f, m.span("n"))
        for m in _IBAN.finditer(text):
            if iban_valid(m.group()):
                hit(pii, pii_spans, "iban", 0.75, f, m.span())
        for m in _ID_NUMBER.finditer(text):
            if sum(c.isdigit() for c in m.group("value")) >= 5:
                hit(pii, pii_spans, "id_number", 0.55, f, m.span("value"))
        if _FIVE_DIGITS.search(text):  # every id format has five digits; most writes have none
            for found in identifiers.find_ids(text):
                hit(pii, pii_spans, "verified_id" if found.verified else "id_number", 0.6 if found.verified else 0.55,
                    f, (found.start, found.end))
        for m in _NINO.finditer(item.text[:SCAN_LIMIT]):
            hit(pii, pii_spans, "id_number", 0.55, f, m.span())
        for m in _EMAIL.finditer(text):
            hit(pii, pii_spans, "email", 0.2, f, m.span())
        taken = [(s.start, s.end) for s in pii_spans if s.field == f]
        for m in _PHONE.finditer(text):
            overlaps = any(m.start() < end and start < m.end() for start, end in taken)
            if _phone_like(m.group()) and not overlaps and not _SSN.fullmatch(m.group()):
                hit(pii, pii_spans, "phone", 0.2, f, m.span())
        for m in _DOB.finditer(text):
            hit(pii, pii_spans, "date_of_birth", 0.3, f, m.span("d"))
        if any(c.isdigit() for c in text):
            for span in identifiers.find_birth_dates(text):
                hit(pii, pii_spans, "date_of_birth", 0.3, f, span)
            # Kept as a kind, not a score: an address raises nothing alone (see ``_profile``).
            address = _ADDRESS.search(text)
            if address:
                kinds_only.add("address")
                pii_spans.append(Span(f, *address.span()))
    if pii and _profile(set(pii) | kinds_only):
        # Enough to impersonate the person: the answers to account-recovery questions and the kit
        # for identity fraud, in any country's formats.
        pii["profile"] = 0.6
    flags = []
    for name, store, spans in ((SECRET, secret, secret_spans), (PII, pii, pii_spans)):
        if store:
            score = combine(store.values())
            flags.append(RiskFlag(name, severity_for(score, medium=MEDIUM, high=HIGH), score, tuple(spans)))
    return flags
