"""Policy rules learned from a tenant's own review decisions (issue 22 item 6). Pure: no database.

A *pattern* is a conjunction of facts a staged ``remember`` carried: its agent, type, source, one
of its tags, and a screening-risk ceiling. A pattern is suggested as an auto-approve rule when at
least ``min_decisions`` writes matching it were approved by a person and none matching it was
rejected. Patterns that a more general suggested pattern already covers are left out, so the
list stays short. The screening ceiling is ``RISK_CEILING`` (``none``: a learned rule approves
only writes screening raised no flag on), and the evaluation of a learned rule
(``app.core.policy.Policy.explain``) refuses to let it waive the high-risk baseline anyway.

Each suggestion carries its measured effect on the latest decisions (``measure``): how many of
them it would have auto-approved, and how many of those were later rejected, reverted, forgotten
or flagged by screening.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable, Protocol, Sequence

from app.core.ids import format_id
from app.core.policy import SCREENING_BASELINE, Match, Policy, Rule, WriteRequest
from app.core.screening import LEVELS, level_rank

#: Widest screening risk a learned rule may cover. A learned rule relaxes review only of writes in
#: which screening found nothing: a person approving an agent's clean writes says nothing about
#: its flagged ones (`memwarden bench reviewer` saw medium-risk PII slip through at "medium").
RISK_CEILING = "none"
MAX_SUGGESTIONS = 50
_GLOB_SPECIALS = str.maketrans({"*": "[*]", "?": "[?]", "[": "[[]"})
# Per condition, the longest value the policy schema admits.
_MAX_GLOB, _MAX_TAG = 256, 128


class Decided(Protocol):
    """What a decided staged write offers the miner (``app.repos.suggestions.DecidedWrite``)."""

    status: str
    risk_level: str
    agent_id: str
    type: str | None
    source: str | None
    tags: Sequence[str]
    memory_status: str | None
    hard_deleted: bool


@dataclass(frozen=True)
class Suggested:
    """One suggested auto-approve rule: its ``match`` document and the decisions behind it."""

    id: str
    match: dict[str, Any]
    approved: int
    description: str

    @property
    def action(self) -> str:
        return "allow"


def literal_glob(value: str) -> str:
    """An fnmatch pattern matching exactly ``value`` (``*``, ``?`` and ``[`` escaped)."""
    return value.translate(_GLOB_SPECIALS)


def suggestion_id(match: dict[str, Any], action: str = "allow") -> str:
    """A stable id for a pattern: the same match keeps its id while its evidence changes."""
    digest = hashlib.sha256(json.dumps([action, match], sort_keys=True).encode()).digest()
    return format_id("sug", int.from_bytes(digest[:17], "big"))


def rule_id_for(suggestion: str) -> str:
    """The policy rule id an accepted suggestion becomes."""
    return "learned-" + suggestion.removeprefix("sug_")[:16]


def _rank(level: str | None) -> int:
    return level_rank(level) if level in LEVELS else 0


def _base_patterns(d: Decided) -> Iterable[tuple[tuple[str, str], ...]]:
    """Every pattern (sorted (condition, value) pairs) this decision belongs to. Each names an
    agent, a source or a tag: a type alone would be far too broad to learn from."""
    agent = d.agent_id if d.agent_id and len(d.agent_id) <= _MAX_GLOB else None
    source = d.source if d.source and len(d.source) <= _MAX_GLOB else None
    tags = sorted({t for t in d.tags if t and len(t) <= _MAX_TAG})
    anchors: list[tuple[str, str]] = []
    if agent:
        anchors.append(("agents", agent))
    if source:
        anchors.append(("sources", source))
    anchors += [("tags_any", tag) for tag in tags]
    for anchor in anchors:
        yield (anchor,)
        if d.type:
            yield tuple(sorted((anchor, ("types", d.type))))
    if agent:
        for other in anchors[1:]:
            yield tuple(sorted((("agents", agent), other)))


def _match_doc(pattern: tuple[tuple[str, str], ...], ceiling: int) -> dict[str, Any]:
    doc: dict[str, Any] = {"operations": ["remember"]}
    for key, value in pattern:
        doc[key] = [literal_glob(value) if key in ("agents", "sources") else value]
    doc["risk_at_most"] = LEVELS[ceiling]
    return doc


def describe(match: dict[str, Any]) -> str:
    """A plain sentence naming what a learned match covers."""
    parts = []
    labels = {"agents": "by agent", "sources": "from source", "tags_any": "tagged", "types": "of type"}
    for key, label in labels.items():
        if key in match:
            parts.append(f"{label} {', '.join(match[key])}")
    risk = match.get("risk_at_most", "none")
    risk_text = "no screening flags" if risk == "none" else f"screening risk at most {risk}"
    return f"Auto-approve remembers {' '.join(parts)} with {risk_text}"


def mine(decisions: Sequence[Decided], min_decisions: int, limit: int = MAX_SUGGESTIONS) -> list[Suggested]:
    """Auto-approve suggestions supported by at least ``min_decisions`` approvals and no rejection.

    A pattern's risk ceiling is the highest risk among its approvals, lowered below the lowest risk
    of any rejection it would otherwise match, and never above ``RISK_CEILING``.
    """
    ceiling_cap = level_rank(RISK_CEILING)
    approved: dict[tuple, list[list[int]]] = {}  # pattern -> per risk rank, the approvals' indexes
    rejected: dict[tuple, list[int]] = {}  # pattern -> per risk rank, how many rejections
    for index, d in enumerate(decisions):
        if d.status not in ("approved", "rejected"):
            continue
        rank = _rank(d.risk_level)
        for pattern in set(_base_patterns(d)):
            if d.status == "approved":
                approved.setdefault(pattern, [[] for _ in LEVELS])[rank].append(index)
            else:
                rejected.setdefault(pattern, [0] * len(LEVELS))[rank] += 1
    found: list[tuple[tuple, int, frozenset[int]]] = []
    for pattern, by_rank in approved.items():
        contrary = rejected.get(pattern, [0] * len(LEVELS))
        lowest_contrary = next((r for r, n in enumerate(contrary) if n), len(LEVELS))
        # The highest risk a person approved below the first rejection, never above the cap.
        ceiling = max((r for r, ids in enumerate(by_rank) if ids and r < min(lowest_contrary, ceiling_cap + 1)),
                      default=-1)
        if ceiling < 0:
            continue
        covered = frozenset(i for ids in by_rank[: ceiling + 1] for i in ids)
        if len(covered) >= min_decisions:
            found.append((pattern, ceiling, covered))
    # General, then best supported, patterns first. Drop a pattern a kept one covers (its conditions
    # ⊆ ours and its ceiling ≥ ours), and one whose every supporting decision a kept one already
    # rests on (an agent that always writes from one source with one tag would otherwise be
    # suggested three times).
    found.sort(key=lambda f: (len(f[0]), -len(f[2]), f[0]))
    kept: list[tuple[tuple, int, frozenset[int]]] = []
    for pattern, ceiling, covered in found:
        if any((set(k) <= set(pattern) and kc >= ceiling) or covered <= kcov for k, kc, kcov in kept):
            continue
        kept.append((pattern, ceiling, covered))
    kept.sort(key=lambda f: (-len(f[2]), len(f[0]), f[0]))
    out = []
    for pattern, ceiling, covered in kept[:limit]:
        doc = _match_doc(pattern, ceiling)
        out.append(Suggested(suggestion_id(doc), doc, len(covered), describe(doc)))
    return out


def _request(d: Decided) -> WriteRequest:
    return WriteRequest(operation="remember", agent_id=d.agent_id, type=d.type, source=d.source,
                        tags=tuple(d.tags), risk_level=d.risk_level if d.risk_level in LEVELS else "none")


def measure(match_doc: dict[str, Any], window: Sequence[Decided], policy: Policy | None = None) -> dict[str, int]:
    """The effect ``match_doc`` as a learned allow rule would have had on ``window`` (the latest
    decisions): how many it would have auto-approved (never one the screening baseline stages, nor
    one that the tenant's ``policy``, with the rule first as an accepted one goes, leaves to a later
    two-person or deny rule), and of those how many were rejected, later forgotten or hard-deleted,
    later reverted (an approved memory a recover pulled back to review: pending again), or raised
    screening flags."""
    match = Match.from_doc(match_doc)
    candidate = None if policy is None else Policy((
        Rule(id="candidate", match=match, action="allow", provenance={"kind": "learned"}), *policy.rules),
        policy.categories)
    counts = {"window": len(window), "would_auto_approve": 0, "later_rejected": 0, "later_forgotten": 0,
              "later_reverted": 0, "flagged": 0}
    for d in window:
        request = _request(d)
        if not match.matches(request) or SCREENING_BASELINE.match.matches(request):
            continue
        if candidate is not None and candidate.evaluate(request).rule_id != "candidate":
            continue
        counts["would_auto_approve"] += 1
        counts["later_rejected"] += d.status == "rejected"
        counts["later_forgotten"] += d.hard_deleted or d.memory_status == "forgotten"
        counts["later_reverted"] += d.status == "approved" and d.memory_status == "pending"
        counts["flagged"] += _rank(d.risk_level) > 0
    return counts


def contrary(match_doc: dict[str, Any], decisions: Sequence[Decided]) -> int:
    """How many rejections in ``decisions`` the rule would have approved (must be 0 to accept)."""
    match = Match.from_doc(match_doc)
    return sum(1 for d in decisions if d.status == "rejected" and match.matches(_request(d)))
