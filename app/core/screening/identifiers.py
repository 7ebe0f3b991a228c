"""National identity numbers and dates of birth in many countries' formats, for the ``pii`` detector.

A personal profile (a name with a birth date, a national id number, a phone and an email) is the
kit for impersonation and account-recovery fraud, whatever country it is from. The ``pii``
detector (``sensitive``) counts what this module finds:

* ``find_ids``: national id / tax / social-security / passport numbers
  - **labelled** in some thirty languages ("PESEL 850…", "codice fiscale …", "身份证 …",
    "주민등록번호 …", "n° sécu …", "ת.ז. …"): at least five digits after the label. Where the label
    names a scheme with a check digit and the value passes it, the number is *verified*;
  - **unlabelled** only where the format itself carries a checksum, so a random number rarely
    passes: Brazilian CPF (``123.456.789-09``, two mod-11 digits), Chinese resident id (18
    characters, ISO 7064 mod 11-2, a valid birth date), Korean resident registration number
    (``YYMMDD-NNNNNNN``, a valid date), Italian codice fiscale (its check letter), Spanish DNI / NIE
    (the mod-23 letter), Romanian CNP (weighted mod 11, a valid date), Swedish personnummer
    (``YYYYMMDD-NNNN``, Luhn), French NIR (the mod-97 key).
* ``find_birth_dates``: a date after a birth label in those languages ("geboren", "née le",
  "nascido em", "sinh ngày", "生年月日" …), in numeric, written-month or ``1992年4月8日`` form.

Everything is a regular expression with bounded repetition, run once over the (at most 64 KiB)
field: linear time. Checksums keep false positives down: a phone number or an order number of the
same length passes one in ten or fewer. Known limits: a bare 9-12 digit number without a label
and without a checksummed format (a passport, a Vietnamese CCCD, an Aadhaar without its label) is
not recognised as an id; labels in scripts or languages not listed are not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Callable, Iterator

# --- check digits ------------------------------------------------------------------------------------


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def luhn(number: str) -> bool:
    """The Luhn (mod 10) check over the digits of ``number``."""
    digits = [int(c) for c in _digits(number)]
    if len(digits) < 2:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _valid_date(year: int, month: int, day: int) -> bool:
    try:
        date(year, month, day)
    except ValueError:
        return False
    return True


def cpf(text: str) -> bool:
    """Brazilian CPF: 11 digits, two mod-11 check digits, not all the same digit."""
    d = [int(c) for c in _digits(text)]
    if len(d) != 11 or len(set(d)) == 1:
        return False
    for n in (9, 10):
        check = sum(d[i] * (n + 1 - i) for i in range(n)) * 10 % 11 % 10
        if check != d[n]:
            return False
    return True


def china_id(text: str) -> bool:
    """Chinese resident identity number: 17 digits and a check character (ISO 7064 mod 11-2), with a birth date."""
    value = text.upper()
    if len(value) != 18 or not value[:17].isdigit():
        return False
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    check = "10X98765432"[sum(int(c) * w for c, w in zip(value, weights)) % 11]
    return check == value[17] and _valid_date(int(value[6:10]), int(value[10:12]), int(value[12:14]))


def korea_rrn(text: str) -> bool:
    """Korean resident registration number: a valid YYMMDD, then a gender/century digit 1-8."""
    d = _digits(text)
    return len(d) == 13 and d[6] in "12345678" and _valid_date(2000 + int(d[:2]), int(d[2:4]), int(d[4:6]))


_CF_ODD = dict(zip("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                   (1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8,
                    12, 14, 16, 10, 22, 25, 24, 23)))


def codice_fiscale(text: str) -> bool:
    """Italian codice fiscale: 15 characters and their check letter."""
    value = text.upper()
    if len(value) != 16:
        return False
    total = 0
    for i, c in enumerate(value[:15]):
        total += _CF_ODD[c] if i % 2 == 0 else (int(c) if c.isdigit() else ord(c) - 65)
    return chr(65 + total % 26) == value[15]


def spain_dni(text: str) -> bool:
    """Spanish DNI (8 digits) or NIE (X/Y/Z and 7 digits) and the mod-23 control letter."""
    value = re.sub(r"[\s-]", "", text.upper())
    if len(value) != 9:
        return False
    body = value[:8]
    if body[0] in "XYZ":
        body = str("XYZ".index(body[0])) + body[1:]
    return body.isdigit() and "TRWAGMYFPDXBNJZSQVHLCKE"[int(body) % 23] == value[8]


def romania_cnp(text: str) -> bool:
    """Romanian CNP: 13 digits, a valid birth date and the weighted mod-11 check digit."""
    d = _digits(text)
    if len(d) != 13 or d[0] == "0":
        return False
    check = sum(int(c) * w for c, w in zip(d, (2, 7, 9, 1, 4, 6, 3, 5, 8, 2, 7, 9))) % 11
    century = {"1": 1900, "2": 1900, "3": 1800, "4": 1800, "5": 2000, "6": 2000}.get(d[0], 1900)
    return (1 if check == 10 else check) == int(d[12]) and _valid_date(century + int(d[1:3]), int(d[3:5]), int(d[5:7]))


def sweden_pnr(text: str) -> bool:
    """Swedish personnummer: (YY)YYMMDD-NNNN, a valid date and the Luhn check over the last 10 digits."""
    d = _digits(text)
    if len(d) not in (10, 12):
        return False
    short = d[-10:]
    return luhn(short) and _valid_date(2000 + int(short[:2]), int(short[2:4]), int(short[4:6]) % 60)


def france_nir(text: str) -> bool:
    """French NIR (social security number): 13 characters and the two-digit key 97 - (number mod 97)."""
    value = re.sub(r"\s", "", text.upper())
    if len(value) != 15 or value[0] not in "12":
        return False
    body = value[:13].replace("2A", "19").replace("2B", "18")
    return body.isdigit() and value[13:].isdigit() and 97 - int(body) % 97 == int(value[13:])


def pesel(text: str) -> bool:
    """Polish PESEL: 11 digits and the weighted mod-10 check digit."""
    d = _digits(text)
    if len(d) != 11:
        return False
    total = sum(int(c) * w for c, w in zip(d, (1, 3, 7, 9, 1, 3, 7, 9, 1, 3)))
    return (10 - total % 10) % 10 == int(d[10])


def bsn(text: str) -> bool:
    """Dutch BSN: 9 digits passing the "elfproef" (weights 9..2, and -1 for the last)."""
    d = _digits(text)
    if len(d) != 9:
        return False
    total = sum(int(c) * w for c, w in zip(d, (9, 8, 7, 6, 5, 4, 3, 2, -1)))
    return total > 0 and total % 11 == 0


_VERHOEFF_D = [[(i + j) % 5 + 5 * ((i // 5 + j // 5) % 2) if i < 5 and j < 5 else 0 for j in range(10)]
               for i in range(10)]
_VERHOEFF_MUL = (
    (0, 1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 3, 4, 0, 6, 7, 8, 9, 5), (2, 3, 4, 0, 1, 7, 8, 9, 5, 6),
    (3, 4, 0, 1, 2, 8, 9, 5, 6, 7), (4, 0, 1, 2, 3, 9, 5, 6, 7, 8), (5, 9, 8, 7, 6, 0, 4, 3, 2, 1),
    (6, 5, 9, 8, 7, 1, 0, 4, 3, 2), (7, 6, 5, 9, 8, 2, 1, 0, 4, 3), (8, 7, 6, 5, 9, 3, 2, 1, 0, 4),
    (9, 8, 7, 6, 5, 4, 3, 2, 1, 0))
_VERHOEFF_PERM = (
    (0, 1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 5, 7, 6, 2, 8, 3, 0, 9, 4), (5, 8, 0, 3, 7, 9, 6, 1, 4, 2),
    (8, 9, 1, 6, 0, 4, 3, 5, 2, 7), (9, 4, 5, 3, 1, 2, 6, 8, 7, 0), (4, 2, 8, 6, 5, 7, 3, 9, 0, 1),
    (2, 7, 9, 3, 8, 0, 6, 4, 1, 5), (7, 0, 4, 6, 9, 1, 3, 2, 5, 8))


def aadhaar(text: str) -> bool:
    """Indian Aadhaar: 12 digits, not starting with 0 or 1, and the Verhoeff check digit."""
    d = _digits(text)
    if len(d) != 12 or d[0] in "01":
        return False
    check = 0
    for i, c in enumerate(reversed(d)):
        check = _VERHOEFF_MUL[check][_VERHOEFF_PERM[i % 8][int(c)]]
    return check == 0


def turkey_tckn(text: str) -> bool:
    """Turkish TC kimlik no: 11 digits, not starting with 0, and its two check digits."""
    d = [int(c) for c in _digits(text)]
    if len(d) != 11 or d[0] == 0:
        return False
    tenth = ((d[0] + d[2] + d[4] + d[6] + d[8]) * 7 - (d[1] + d[3] + d[5] + d[7])) % 10
    return tenth == d[9] and sum(d[:10]) % 10 == d[10]


def israel_id(text: str) -> bool:
    """Israeli teudat zehut: up to 9 digits, Luhn-style weights 1,2 (the standard check)."""
    d = _digits(text).zfill(9)
    return len(d) == 9 and luhn(d)


def _any_digits(minimum: int) -> Callable[[str], bool]:
    return lambda value: sum(c.isdigit() for c in value) >= minimum


# --- labelled numbers --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scheme:
    """A label pattern (lower-case, folded text) and the check its value must pass to be *verified*."""

    label: str
    check: Callable[[str], bool] | None = None


#: Labels of national id, tax, social-security, passport and licence numbers. A value after any
#: label counts as an id number when it has at least five digits; ``check`` (where the scheme has
#: a check digit) makes it verified.
SCHEMES = (
    Scheme(r"(?-i:CPF)", cpf), Scheme(r"pesel", pesel), Scheme(r"bsn|burgerservicenummer|sofinummer", bsn),
    Scheme(r"aadhaa?r(?: no\.?| number)?|(?-i:UIDAI)", aadhaar), Scheme(r"codice fiscale|c\.f\.", codice_fiscale),
    Scheme(r"(?-i:DNI|NIE|NIF)|documento nacional de identidad", spain_dni), Scheme(r"(?-i:CNP)", romania_cnp),
    Scheme(r"personnummer|person ?nr", sweden_pnr), Scheme(r"tc kimlik(?: no)?|t\.c\. kimlik|kimlik no", turkey_tckn),
    Scheme(r"n[°o] ?s[ée]cu(?:rit[ée] sociale)?|num[ée]ro de s[ée]curit[ée] sociale|(?-i:NIR)|insee", france_nir),
    Scheme(r"身份证(?:号码?)?|身份證(?:號碼?)?|居民身份证", china_id),
    Scheme(r"주민등록번호|주민번호|(?-i:RRN)|resident registration(?: number)?", korea_rrn),
    Scheme(r"ת\.ז\.?|תעודת זהות|teudat zehut", israel_id),
    Scheme(r"(?-i:SIN)|social insurance(?: number)?", luhn),
    Scheme(r"(?-i:My ?Number)|マイナンバー|個人番号|cccd|cmnd|căn cước(?: công dân)?|(?-i:CIN|CNI)|carte d'identit[ée]|"
           r"personalausweis(?:nummer)?|ausweis(?:nummer)?|steuer-?id|steuernummer|steuer-identifikationsnummer|"
           r"sozialversicherungsnummer|svnr|ahv(?:-nr\.?)?|reisepass(?:nummer)?|passeport|pasaporte|passaporto|"
           r"paspoort|passport(?: no\.?| number| #)?|pasport|паспорт|ppsn?|pps number|prsi|nric|(?-i:FIN)|hkid|"
           r"emirates id|curp|(?-i:RFC|RUT|RUN|DUI|NIT|EGN|OIB|AMKA|AFM)|c[ée]dula|rodn[ée] [čc][íi]slo|"
           r"henkil[öo]tunnus|hetu|f[øo]dselsnummer|cpr(?:-nr\.?| number)?|kennitala|national id(?: number| no\.?)?|"
           r"id card(?: number| no\.?)?|identity card|citizen id|id number|id no\.?|tax (?:id|file number|number|code)|"
           r"(?-i:TIN|TFN|SSN|NINO|PAN)|social security(?: number| no\.?)?|medicare|nhs(?: number| no\.?)?|ni number|"
           r"national insurance(?: number| no\.?)?|pan (?:card|no\.?|number)|driver'?s? licen[cs]e(?: number| no\.?)?|"
           r"driving licen[cs]e(?: number| no\.?)?|licen[cs]e number|f[üu]hrerschein(?:nummer)?|permis de conduire|"
           r"prawo jazdy|rijbewijs|patente|carteira de identidade|(?-i:RG)|n[úu]mero de identidad|"
           r"n[úu]mero de identificaci[óo]n|visa number|residence permit|aufenthaltstitel"),
)
#: One pattern for every label: the label, up to a few separator characters or words ("number",
#: "no.", "is", ":"), then the value: letters and digits in up to five groups.
_LABELLED = re.compile(
    r"(?<![\w.])(?P<label>" + "|".join(f"(?:{s.label})" for s in SCHEMES) + r")(?![\w])"
    r"[^\w\n]{0,4}(?:(?:is|was|number|no|nr|n[°o]|num|#|reads|de|da|do)\b[^\w\n]{0,4}){0,2}"
    r"(?P<value>[a-z0-9](?:[a-z0-9]|[./-](?=[a-z0-9])| (?=\d)){3,28})(?![a-z0-9])",
    re.IGNORECASE)
_SCHEME_RES = tuple((re.compile(rf"(?:{s.label})", re.IGNORECASE), s.check) for s in SCHEMES)

# --- unlabelled, checksummed formats ----------------------------------------------------------------

_UNLABELLED: tuple[tuple[re.Pattern[str], Callable[[str], bool]], ...] = (
    (re.compile(r"(?<![\d.])\d{3}\.\d{3}\.\d{3}-\d{2}(?![\d-])"), cpf),
    (re.compile(r"(?<![\w])\d{17}[\dXx](?![\w])"), china_id),
    (re.compile(r"(?<![\w-])\d{6}-[1-8]\d{6}(?![\w-])"), korea_rrn),
    (re.compile(r"(?<![\w])[A-Z]{6}\d{2}[A-EHLMPR-T]\d{2}[A-Z]\d{3}[A-Z](?![\w])"), codice_fiscale),
    (re.compile(r"(?<![\w-])(?:\d{8}|[XYZ]\d{7})-?[A-Z](?![\w])"), spain_dni),
    (re.compile(r"(?<![\w])[1-8]\d{12}(?![\w])"), romania_cnp),
    (re.compile(r"(?<![\w-])(?:19|20)?\d{6}[-+]\d{4}(?![\w-])"), sweden_pnr),
    (re.compile(r"(?<![\w])[12] ?\d{2} ?\d{2} ?(?:\d{2}|2[AB]) ?\d{3} ?\d{3} ?\d{2}(?![\w])"), france_nir),
)


@dataclass(frozen=True)
class Found:
    """One identifier: its span in the scanned text and whether a checksum verified it."""

    start: int
    end: int
    verified: bool


def _scheme_check(label: str) -> Callable[[str], bool] | None:
    for pattern, check in _SCHEME_RES:
        if pattern.fullmatch(label):
            return check
    return None


def find_ids(text: str) -> Iterator[Found]:
    """National id numbers in ``text`` (labelled with at least five digits, or a checksummed format)."""
    for m in _LABELLED.finditer(text):
        value = m.group("value").rstrip("./- ")
        if sum(c.isdigit() for c in value) < 5:
            continue
        check = _scheme_check(m.group("label"))
        yield Found(m.start("value"), m.start("value") + len(value), bool(check and check(value)))
    for pattern, check in _UNLABELLED:
        for m in pattern.finditer(text):
            if check(m.group()):
                yield Found(m.start(), m.end(), True)


_BIRTH_LABEL = (
    r"date of birth|d\.?o\.?b\.?|born(?: on| in)?|birth ?date|birthday|b-day|geb\.?|geboren(?: am)?|geburtsdatum|"
    r"geburtstag|n[ée]e? le|née|né|date de naissance|nacid[oa] el|nacid[oa]|fecha de nacimiento|f\. nac\.|"
    r"nascid[oa] em|nascid[oa]|data de nascimento|data di nascita|nat[oa] il|geboortedatum|geb\. datum|"
    r"urodzon[ya]|data urodzenia|f[öo]delsedatum|f[öo]dd|f[øo]dt|f[øo]dselsdato|syntym[äa]aika|"
    r"do[ğg]um tarihi|sinh ng[àa]y|ng[àa]y sinh|生年月日|出生日期|出生年月日|생년월일|дата рождения"
)
_DATE = (r"\d{1,4}[./-]\d{1,2}[./-]\d{1,4}|\d{1,2}(?:st|nd|rd|th)?\.?(?: of)? [a-zà-ÿ]{3,9}\.?,? \d{4}|"
         r"[a-zà-ÿ]{3,9}\.? \d{1,2}(?:st|nd|rd|th)?,? \d{4}|\d{4}\s?年\s?\d{1,2}\s?月\s?\d{1,2}\s?日|"
         r"\d{4}\s?년\s?\d{1,2}\s?월\s?\d{1,2}\s?일|\d{1,2} de [a-zç]{4,9} de \d{4}")
_BIRTH = re.compile(r"(?<![\w])(?:" + _BIRTH_LABEL + r")(?![\w])[^\d\n]{0,20}?(?P<d>" + _DATE + r")", re.IGNORECASE)


def find_birth_dates(text: str) -> Iterator[tuple[int, int]]:
    """Spans of dates written after a birth label (any of the languages above)."""
    for m in _BIRTH.finditer(text):
        yield m.span("d")
