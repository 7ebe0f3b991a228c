"""SR-1 secret redaction (pure; no I/O).

``Redactor`` finds secrets in text and replaces each with ``<REDACTED:label>``.
Labels are stable identifiers, listed in ``LABELS``. Callers decide whether a
finding means "store redacted" or "reject"; this module only reports.

Guarantees:

* Findings carry a field path and a label, never the secret or any part of it.
* One finding per marker written (text order within each pass).
* Existing ``<REDACTED:...>`` markers are never re-detected, and redaction is
  idempotent: ``redact_text(redact_text(s)[0])`` changes nothing and finds nothing.
* When detections overlap, their union is replaced by one marker carrying the
  most specific label (order of ``LABELS``).

Registered secrets: a tenant registers secret values, but only
``RegisteredSecret(length, HMAC-SHA256(tenant_key, value))`` is stored. On write
the text is cut into candidate tokens, each candidate whose length equals a
registered length is HMAC'd and looked up. Candidates are: whitespace-separated
tokens (as-is and with surrounding punctuation stripped), tokens split on common
delimiters (quotes, brackets, ``, ; = : @ & ? # |`` and whitespace), and the
whole text (as-is and stripped). Limitation: a registered secret is found only
when it lines up with one of those candidates; one glued to other characters
(``xxhunter2``) or split by a delimiter it does not itself contain is missed.
A full sliding window over all substrings would close that gap but is too slow.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

MARKER_RE = re.compile(r"<REDACTED:[a-z_]+>")
MIN_REGISTERED_SECRET_LEN = 4

LABELS = (
    "registered_secret",
    "private_key",
    "jwt",
    "aws_access_key",
    "github_token",
    "slack_token",
    "stripe_key",
    "openai_key",
    "gcp_api_key",
    "aws_secret_key",
    "card_number",
    "password_assignment",
)
_PRIORITY = {label: rank for rank, label in enumerate(LABELS)}


def marker(label: str) -> str:
    """Return the replacement text for ``label``."""
    return f"<REDACTED:{label}>"


@dataclass(frozen=True)
class Finding:
    """One redacted span: where (JSON-pointer-like ``field``) and what kind."""

    field: str
    label: str


@dataclass(frozen=True)
class RedactionResult:
    """A redacted payload plus one ``Finding`` per marker written."""

    content: str
    tags: list[str]
    metadata: dict[str, Any]
    findings: list[Finding]


@dataclass(frozen=True)
class RegisteredSecret:
    """A tenant secret as stored: its length in characters and keyed hash."""

    length: int
    digest: bytes

    @classmethod
    def from_plaintext(cls, value: str, hmac_key: bytes) -> RegisteredSecret:
        """Hash ``value`` for storage; the plaintext is not kept."""
        if len(value) < MIN_REGISTERED_SECRET_LEN:
            raise ValueError(
                f"registered secrets must be at least {MIN_REGISTERED_SECRET_LEN} characters"
            )
        return cls(len(value), secret_digest(value, hmac_key))


def secret_digest(value: str, hmac_key: bytes) -> bytes:
    """HMAC-SHA256 of the UTF-8 encoding of ``value`` under ``hmac_key``."""
    return hmac.new(hmac_key, value.encode("utf-8"), hashlib.sha256).digest()


def luhn_valid(digits: str) -> bool:
    """True if the decimal string ``digits`` passes the Luhn checksum."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_ok(text: str) -> bool:
    digits = re.sub(r"[ -]", "", text)
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


@dataclass(frozen=True)
class _Detector:
    label: str
    pattern: re.Pattern[str]
    value_groups: tuple[str, ...] = ()  # first group that took part is the secret
    accept: Callable[[str], bool] | None = None


_QUOTED_OR_BARE_VALUE = (
    r"""(?:(?P<q>["'])(?P<quoted>(?:\\.|(?!(?P=q))[^\\\n])+)(?P=q)"""
    r"""|(?P<bare>[^\s"'`,;&<>(){}\[\]]+))"""
)

_DETECTORS: tuple[_Detector, ...] = (
    _Detector(
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
            # An unterminated block is redacted through the end of its body.
            r"(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|[A-Za-z0-9+/=\s]*)"
        ),
    ),
    _Detector(
        "jwt",
        re.compile(
            r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}"
            r"\.[A-Za-z0-9_-]{10,}(?![A-Za-z0-9_-])"
        ),
    ),
    _Detector("aws_access_key", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])")),
    _Detector(
        "github_token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"
            r"(?![A-Za-z0-9_])"
        ),
    ),
    _Detector(
        "slack_token", re.compile(r"(?<![A-Za-z0-9-])xox[abprs]-[A-Za-z0-9-]{10,}(?![A-Za-z0-9-])")
    ),
    _Detector(
        "stripe_key",
        re.compile(r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}(?![A-Za-z0-9_])"),
    ),
    _Detector(
        "openai_key",
        re.compile(
            r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}(?![A-Za-z0-9_-])"
        ),
    ),
    _Detector(
        "gcp_api_key", re.compile(r"(?<![A-Za-z0-9_-])AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])")
    ),
    _Detector(
        "aws_secret_key",
        re.compile(
            r"(?i)(?<![A-Za-z0-9])(?:aws_?)?secret_?(?:access_?)?key(?![A-Za-z0-9])[\"']?"
            r"\s*[:=]\s*[\"']?(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        ("value",),
    ),
    _Detector(
        "card_number",
        re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d])"),
        accept=_card_ok,
    ),
    _Detector(
        "password_assignment",
        re.compile(
            r"(?i)(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]*?"
            r"(?:passw(?:or)?d|pwd|secret(?:[_-]?key)?|api[_-]?key|apikey|token)"
            r"(?![A-Za-z0-9_])[\"']?\s*[:=](?!=)\s*" + _QUOTED_OR_BARE_VALUE
        ),
        ("quoted", "bare"),
    ),
)

_WORD_RE = re.compile(r"\S+")
_DELIMITED_RE = re.compile(r"""[^\s"'`,;=:()\[\]{}<>@&?#|]+""")
_PUNCT = "\"'`()[]{}<>.,;:!?"


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    label: str


class Redactor:
    """Detects and redacts secrets; see the module docstring for guarantees.

    ``registered`` holds a tenant's ``RegisteredSecret`` entries; ``hmac_key``
    is the tenant key they were hashed with (required when any are given).
    """

    def __init__(
        self, registered: Sequence[RegisteredSecret] = (), hmac_key: bytes | None = None
    ) -> None:
        if registered and not hmac_key:
            raise ValueError("hmac_key is required to match registered secrets")
        self._hmac_key = hmac_key
        self._registered = frozenset((r.length, r.digest) for r in registered)
        self._lengths = frozenset(r.length for r in registered)

    def __repr__(self) -> str:
        return f"Redactor(registered={len(self._registered)})"

    def redact_text(self, text: str) -> tuple[str, list[str]]:
        """Return ``text`` with secrets replaced and the label of each marker written."""
        labels: list[str] = []
        while True:
            # Removing a secret can expose a new candidate token (e.g. a
            # registered secret glued to an AWS key), so repeat to a fixpoint.
            text, found = self._redact_once(text)
            if not found:
                return text, labels
            labels.extend(found)

    def redact_payload(
        self, content: str, tags: Sequence[str], metadata: Mapping[str, Any]
    ) -> RedactionResult:
        """Redact a memory's content, each tag and every string inside ``metadata``.

        Metadata is walked recursively through dicts and lists; only string
        values are redacted (keys and other scalars are untouched). Inputs are
        not mutated. Finding paths look like ``content``, ``tags/0``,
        ``metadata/a/b`` (keys escaped as in JSON Pointer).
        """
        findings: list[Finding] = []

        def redact(value: str, path: str) -> str:
            new, labels = self.redact_text(value)
            findings.extend(Finding(path, label) for label in labels)
            return new

        new_content = redact(content, "content")
        new_tags = [redact(tag, f"tags/{i}") for i, tag in enumerate(tags)]
        new_metadata = _walk(metadata, "metadata", redact)
        return RedactionResult(new_content, new_tags, new_metadata, findings)

    def _redact_once(self, text: str) -> tuple[str, list[str]]:
        out: list[str] = []
        labels: list[str] = []
        pos = 0
        for m in MARKER_RE.finditer(text):
            out.append(self._redact_segment(text[pos : m.start()], labels))
            out.append(m.group())
            pos = m.end()
        out.append(self._redact_segment(text[pos:], labels))
        return "".join(out), labels

    def _redact_segment(self, segment: str, labels: list[str]) -> str:
        if not segment:
            return segment
        spans = _merge([*self._pattern_spans(segment), *self._registered_spans(segment)])
        if not spans:
            return segment
        out: list[str] = []
        pos = 0
        for span in spans:
            out.append(segment[pos : span.start])
            out.append(marker(span.label))
            labels.append(span.label)
            pos = span.end
        out.append(segment[pos:])
        return "".join(out)

    def _pattern_spans(self, segment: str) -> Iterator[_Span]:
        for det in _DETECTORS:
            for m in det.pattern.finditer(segment):
                group = next((g for g in det.value_groups if m.group(g) is not None), 0)
                start, end = m.span(group)
                if end > start and (det.accept is None or det.accept(m.group(group))):
                    yield _Span(start, end, det.label)

    def _registered_spans(self, segment: str) -> Iterator[_Span]:
        if not self._registered:
            return
        seen: set[tuple[int, int]] = set()
        for start, end in _candidates(segment):
            if end <= start or (start, end) in seen or (end - start) not in self._lengths:
                continue
            seen.add((start, end))
            assert self._hmac_key is not None
            digest = secret_digest(segment[start:end], self._hmac_key)
            if (end - start, digest) in self._registered:
                yield _Span(start, end, "registered_secret")


def _candidates(segment: str) -> Iterator[tuple[int, int]]:
    yield 0, len(segment)
    yield _strip_span(segment, 0, len(segment), " \t\r\n")
    for m in _WORD_RE.finditer(segment):
        yield m.span()
        yield _strip_span(segment, m.start(), m.end(), _PUNCT)
    for m in _DELIMITED_RE.finditer(segment):
        yield m.span()


def _strip_span(text: str, start: int, end: int, chars: str) -> tuple[int, int]:
    while start < end and text[start] in chars:
        start += 1
    while end > start and text[end - 1] in chars:
        end -= 1
    return start, end


def _merge(spans: list[_Span]) -> list[_Span]:
    """Union overlapping spans, keeping the most specific label."""
    merged: list[_Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if merged and span.start < merged[-1].end:
            last = merged[-1]
            label = min(last.label, span.label, key=_PRIORITY.__getitem__)
            merged[-1] = _Span(last.start, max(last.end, span.end), label)
        else:
            merged.append(span)
    return merged


def _escape_pointer(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _walk(value: Any, path: str, redact: Callable[[str, str], str]) -> Any:
    if isinstance(value, str):
        return redact(value, path)
    if isinstance(value, Mapping):
        return {k: _walk(v, f"{path}/{_escape_pointer(k)}", redact) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_walk(v, f"{path}/{i}", redact) for i, v in enumerate(value)]
    return value
