"""``provenance_laundering``: the write claims to come from somewhere more trusted than its key.

An agent's key may say where a memory came from (``source``), and agents reading memories give
more weight to "system" or "verified" ones. A key asserting an origin it does not have launders
an untrusted write into a trusted one. Claims looked at:

* ``source`` naming a privileged origin — ``system``, ``admin``, ``operator``, ``developer``,
  ``security``, ``policy``, ``memwarden``, ``official``, ``trusted``, ``verified``, ``*:verified``
  (e.g. ``user:verified``), each also with a ``:suffix`` — high; ``tool:*`` (a tool's output) medium.
* the same values under metadata keys ``source``, ``origin``, ``provenance``, ``author``,
  ``verified_by``, ``authority``, ``issuer``: same severities; ``verified``/``trusted: true``: medium.
* content claiming approval by an authority ("verified by the administrator", "approved by
  security"): medium.

A claim matching one of the key's allowed source globs is not flagged. Matching is done on folded
text, so ``ѕystem`` with a Cyrillic ``ѕ`` is still ``system``.

**The provenance vocabulary.** Besides laundering, ``source`` says where the content came from, by
its first segment (before the first ``:`` or ``/``; ``email:inbox`` and ``email/gmail`` are both
``email``), exact and in lower-case ASCII:

* ``user``: the user said it;
* ``document``, ``email``, ``web``, ``tool``: the agent read it (a file, a message, a page, a
  tool's output);
* ``inferred``: the agent concluded it.

Only ``user`` is *trusted* (``TRUSTED_ORIGINS``). Every other origin, any value outside the
vocabulary (``feed:partner``, ``chat``, a look-alike ``uѕer``) and an **absent** ``source`` are
*untrusted*: the safe default, since what an agent read is where planted memories arrive, and a
writer that says nothing about origin cannot be assumed to mean the user. The policy's category
baseline stages the categories of effect (``effects``) of untrusted writes (``app.core.policy``).

A key can be limited in the origins it may claim (``memwarden apikey create --origins``, e.g.
every origin but ``user`` for an agent that reads mail): a write naming another documented origin
is refused with 403 before anything is screened or stored (``Principal.may_claim``), on every
surface. An absent or undocumented source claims nothing, so it passes, and is untrusted.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Mapping, Sequence

from app.core.screening.flags import RiskFlag, Span, TextField, combine, severity_for
from app.core.screening.normalize import fold

NAME = "provenance_laundering"
MEDIUM, HIGH = 0.4, 0.7
PRIVILEGED = re.compile(
    r"^(?:system|sys|admin|administrator|root|operator|developer|dev-team|security|secops|policy|memwarden|"
    r"official|trusted|verified|platform|owner|superuser|moderator)(?:[:/._-].*)?$|^[^:]{1,64}:verified$|"
    r"^verified[:/._-].*$")
TOOL = re.compile(r"^tool[:/].+$")
_CLAIM_KEYS = frozenset({"source", "origin", "provenance", "author", "verified_by", "authority", "issuer",
                         "approved_by", "created_by"})
_FLAG_KEYS = frozenset({"verified", "trusted", "official", "system"})
_CONTENT_CLAIM = re.compile(
    r"\b(?:verified|approved|confirmed|authori[sz]ed|endorsed|certified|signed off)\s+by\s+(?:the\s+)?"
    r"(?:system|administrator|admin|security(?: team)?|it(?: department)?|compliance|developers?|operator|"
    r"platform|memwarden|openai|anthropic)\b")


ORIGINS = ("user", "document", "email", "web", "tool", "inferred")
"""The documented origins, by a source's first segment."""
UNKNOWN = "unknown"
"""The origin of an absent source or one outside ``ORIGINS``."""
TRUSTED_ORIGINS = frozenset({"user"})
_FIRST_SEGMENT = re.compile(r"[^:/]{1,64}")


def origin(source: str | None) -> str:
    """The write's origin in ``ORIGINS``, or ``UNKNOWN`` (absent, empty or outside the vocabulary)."""
    found = _FIRST_SEGMENT.match(source or "")
    segment = found.group() if found else ""
    return segment if segment in ORIGINS else UNKNOWN


def trusted(source: str | None) -> bool:
    """Whether the write's origin is trusted (the user said it); absent and unknown sources are not."""
    return origin(source) in TRUSTED_ORIGINS


def _claim_weight(value: str) -> float:
    folded = fold(value.strip()).text
    if PRIVILEGED.match(folded):
        return 0.85
    if TOOL.match(folded):
        return 0.5
    return 0.0


def _allowed(value: str, allowed_sources: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(value, pattern) for pattern in allowed_sources)


def detect(source: str | None, metadata: Mapping[str, Any] | None, fields: Sequence[TextField],
           allowed_sources: Sequence[str] = ()) -> RiskFlag | None:
    """The ``provenance_laundering`` flag, or None. ``allowed_sources`` are globs the key may assert."""
    weights: list[float] = []
    spans: list[Span] = []
    if source and not _allowed(source, allowed_sources):
        weight = _claim_weight(source)
        if weight:
            weights.append(weight)
            spans.append(Span("source", 0, len(source)))
    for key, value in (metadata or {}).items():
        path = "metadata/" + str(key).replace("~", "~0").replace("/", "~1")
        lowered = str(key).lower()
        if lowered in _CLAIM_KEYS and isinstance(value, str) and not _allowed(value, allowed_sources):
            weight = _claim_weight(value)
            if weight:
                weights.append(weight)
                spans.append(Span(path, 0, len(value)))
        elif lowered in _FLAG_KEYS and value is True:
            weights.append(0.5)
            spans.append(Span(path, 0, 0))
    for item in fields:
        folded = fold(item.text[:64 * 1024])
        for m in _CONTENT_CLAIM.finditer(folded.text):
            weights.append(0.45)
            spans.append(Span(item.field, *folded.span(*m.span())))
    if not weights:
        return None
    score = combine(sorted(weights, reverse=True)[:2])
    return RiskFlag(NAME, severity_for(score, medium=MEDIUM, high=HIGH), score, tuple(spans))
