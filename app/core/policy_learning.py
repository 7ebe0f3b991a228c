"""Policy rules learned from a tenant's own review decisions. Pure: no database.

A suggested rule is never broader than the approvals it was learned from. Its match names the
exact agents those writes came from (literal ids, no glob), the memory types they had, the tags
they carried (a write with a tag none of them carried is not covered; one with none is not
covered when all of them had tags) and whether they named a source (and which). A tag or a
source the writer chooses is no evidence about another agent, so every rule names its agents.

Candidate rules are found by grouping the approvals around one anchor (an agent, a tag, or an
agent with a tag), optionally with one type, and with or without a source; the match is then
built from what the group's writes carried. A group becomes a suggestion when:

- its approvals were made on at least ``min_events`` distinct occasions on at least ``min_days``
  distinct days (UTC). An occasion is a batch: one person's decisions less than the batch gap
  apart (``batches``), so one bulk action is one piece of evidence, however many rows it approved;
- no person rejected a write the rule would match;
- it is not redundant: its approvals are not all behind a suggestion already kept.

Only approvals of writes screening raised no flag on count (``RISK_CEILING``), and the
evaluation of a learned rule (``app.core.policy.Policy.explain``) adds what a person's approval
cannot vouch for: it never waives the high-risk baseline, and it never approves a write carrying
high-impact structure (``app.core.high_impact``), since screening's silence is no proof.

Each suggestion carries its measured effect on the latest decisions (``measure``): how many of
them it would have auto-approved, and how many of those were later rejected, reverted, forgotten
or flagged by screening.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Protocol, Sequence

from app.core.ids import format_id
from app.core.policy import SCREENING_BASELINE, Match, Policy, Rule, WriteRequest
from app.core.screening import LEVELS, level_rank

#: Widest screening risk a learned rule may cover. A learned rule relaxes review only of writes in
#: which screening found nothing: a person approving an agent's clean writes says nothing about
#: its flagged ones (`memwarden bench reviewer` saw medium-risk PII slip through at "medium").
RISK_CEILING = "none"
MAX_SUGGESTIONS = 50
_GLOB_SPECIALS = str.maketrans({"*": "[*]", "?": "[?]", "[": "[[]"})
# Per condition, the longest value and the most values the policy schema admits.
_MAX_GLOB, _MAX_TAG, _MAX_VALUES = 256, 128, 64
Group = tuple[tuple[str, str | None], ...]  # sorted (condition, value) pairs: what approvals are grouped by
CONTENT_CLAUSE = ("only writes screening raised no flag on and that carry no link, address, number, command "
                  "or standing instruction")
"""What every learned rule leaves to a person, in the words its description uses."""


class Decided(Protocol):
    """What a decided staged write offers the miner (``app.repos.review.suggestions.DecidedWrite``)."""

    status: str
    risk_level: str
    agent_id: str
    type: str | None
    source: str | None
    tags: Sequence[str]
    memory_status: str | None
    hard_deleted: bool


@dataclass(frozen=True)
class Occasion:
    """When a decision was made: its batch (one person's run of decisions) and its UTC day."""

    batch: int
    day: str | None


@dataclass(frozen=True)
class Suggested:
    """One suggested auto-approve rule: its ``match`` document and the decisions behind it."""

    id: str
    match: dict[str, Any]
    approved: int
    """Approvals behind it."""
    events: int
    """Distinct occasions (batches) those approvals were made on."""
    days: int
    """Distinct days those occasions fell on."""
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


def batches(decided: Sequence[tuple[str | None, datetime | None]], gap_seconds: float) -> list[Occasion]:
    """The occasion of each ``(decided_by, decided_at)``, in the same order. One decider's decisions
    less than ``gap_seconds`` apart chain into one batch: a bulk action decides its rows back to
    back, so it is one occasion however many it approved. A decision with no time is a batch of its
    own on no day (it adds no spread in time)."""
    order = sorted(range(len(decided)), key=lambda i: (decided[i][0] or "", decided[i][1] is None,
                                                       decided[i][1] or datetime.min.replace(tzinfo=timezone.utc)))
    out: list[Occasion | None] = [None] * len(decided)
    batch, last = -1, None
    for i in order:
        by, at = decided[i]
        if at is None or last is None or last[0] != by or (at - last[1]).total_seconds() >= gap_seconds:
            batch += 1
        last = (by, at) if at is not None else None
        out[i] = Occasion(batch, None if at is None else _utc(at).date().isoformat())
    return out  # type: ignore[return-value]


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)


def _rank(level: str | None) -> int:
    return level_rank(level) if level in LEVELS else 0


def _learnable(d: Decided) -> bool:
    """Whether an approval can be evidence: clean, and every fact of it expressible in a match."""
    return (d.status == "approved" and _rank(d.risk_level) <= level_rank(RISK_CEILING) and bool(d.type)
            and bool(d.agent_id) and len(d.agent_id) <= _MAX_GLOB
            and (d.source is None or 0 < len(d.source) <= _MAX_GLOB)
            and all(t and len(t) <= _MAX_TAG for t in d.tags))


def _groups(d: Decided) -> Iterable[Group]:
    """The groups (sorted (condition, value) pairs) an approval belongs to: each is anchored on its
    agent, one of its tags, or both, with or without its type, and always with whether it named a
    source (a group never mixes writes with and without one)."""
    source = ("has_source", "yes" if d.source is not None else "no")
    anchors: list[Group] = [(("agent", d.agent_id),)]
    for tag in sorted(set(d.tags)):
        anchors += [(("tag", tag),), (("agent", d.agent_id), ("tag", tag))]
    for anchor in anchors:
        yield tuple(sorted((*anchor, source)))
        yield tuple(sorted((*anchor, source, ("type", d.type))))


def _match_doc(group: Group, writes: Sequence[Decided]) -> dict[str, Any] | None:
    """The narrowest match covering ``writes``; None when it would name more values than a rule may."""
    keys = dict(group)
    agents = sorted({literal_glob(d.agent_id) for d in writes})
    seen_tags = sorted({t for d in writes for t in d.tags})
    sources = sorted({literal_glob(d.source) for d in writes if d.source is not None})
    if max(len(agents), len(seen_tags), len(sources)) > _MAX_VALUES:
        return None
    doc: dict[str, Any] = {"operations": ["remember"], "types": sorted({d.type for d in writes}), "agents": agents}
    if keys["has_source"] == "yes":
        doc["sources"] = sources
    else:
        doc["has_source"] = False
    if "tag" in keys:
        doc["tags_any"] = [keys["tag"]]
    elif all(d.tags for d in writes):
        doc["tags_any"] = seen_tags
    doc["tags_within"] = seen_tags
    doc["risk_at_most"] = RISK_CEILING
    return Match.from_doc(doc).to_doc()  # the canonical order of conditions


def describe(match: dict[str, Any], limit: int | None = None) -> str:
    """A plain sentence naming exactly what a learned match covers. Past ``limit`` characters (a
    rule's description is at most 500) long lists are counted instead of named: the rule's match
    still lists them."""
    text = _describe(match, lambda key, sep: sep.join(match[key]))
    if limit is None or len(text) <= limit:
        return text
    return _describe(match, lambda key, sep: (sep.join(match[key]) if len(match[key]) == 1
                                              else f"any of the {len(match[key])} in the rule's match"))[:limit]


def _describe(match: dict[str, Any], names: Callable[[str, str], str]) -> str:
    parts = []
    agents = match.get("agents")
    parts.append(f"by agent{'s' if len(agents) > 1 else ''} {names('agents', ', ')}" if agents else "by any agent")
    if match.get("types"):
        parts.append(f"of type {names('types', ' or ')}")
    if match.get("tags_any"):
        parts.append(f"tagged {names('tags_any', ' or ')}")
    if "tags_within" in match:
        parts.append(f"with no tag other than {names('tags_within', ', ')}" if match["tags_within"] else "with no tags")
    if match.get("sources"):
        parts.append(f"from source {names('sources', ', ')}")
    elif match.get("has_source") is False:
        parts.append("naming no source")
    risk = match.get("risk_at_most", "none")
    tail = CONTENT_CLAUSE if risk == "none" else (
        f"only writes with screening risk at most {risk} and that carry no link, address, number, command or "
        "standing instruction")
    return f"Auto-approve remembers {', '.join(parts)}: {tail}"


def mine(decisions: Sequence[Decided], occasions: Sequence[Occasion], *, min_events: int, min_days: int,
         limit: int = MAX_SUGGESTIONS) -> list[Suggested]:
    """Auto-approve suggestions whose approvals span ``min_events`` occasions on ``min_days`` days
    and which no rejection contradicts. ``occasions[i]`` is when ``decisions[i]`` was made."""
    if len(occasions) != len(decisions):
        raise ValueError("one occasion per decision")
    grouped: dict[Group, list[int]] = {}
    rejected_by_agent: dict[str, list[WriteRequest]] = {}
    for index, d in enumerate(decisions):
        if d.status == "rejected":
            rejected_by_agent.setdefault(d.agent_id, []).append(_request(d))
        elif _learnable(d):
            for group in _groups(d):
                grouped.setdefault(group, []).append(index)
    found: list[tuple[Group, dict[str, Any], frozenset[int], int, int]] = []
    for group, indexes in grouped.items():
        events = len({occasions[i].batch for i in indexes})
        days = len({occasions[i].day for i in indexes if occasions[i].day is not None})
        if events < min_events or days < min_days:
            continue
        doc = _match_doc(group, [decisions[i] for i in indexes])
        if doc is None:
            continue
        match = Match.from_doc(doc)
        # Every learned match names its agents, so only those agents' rejections can contradict it.
        if any(match.matches(r) for agent in {decisions[i].agent_id for i in indexes}
               for r in rejected_by_agent.get(agent, ())):
            continue
        found.append((group, doc, frozenset(indexes), events, days))
    # Fewest anchors, then best supported, first; leave out a group whose every approval a kept one
    # already rests on (an agent that always writes with one tag would otherwise be suggested thrice).
    found.sort(key=lambda f: (len(f[0]), -f[3], -len(f[2]), f[0]))
    kept: list[tuple[Group, dict[str, Any], frozenset[int], int, int]] = []
    ids: set[str] = set()
    for entry in found:
        sid = suggestion_id(entry[1])
        if sid in ids or any(entry[2] <= k[2] for k in kept):
            continue
        ids.add(sid)
        kept.append(entry)
    kept.sort(key=lambda f: (-f[3], -len(f[2]), len(f[0]), f[0]))
    return [Suggested(suggestion_id(doc), doc, len(covered), events, days, describe(doc))
            for _group, doc, covered, events, days in kept[:limit]]


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


def supporters(match_doc: dict[str, Any], decisions: Sequence[Decided]) -> list[str]:
    """The deciders (actor labels) of the approvals in ``decisions`` the rule matches: the people a
    learned rule was learned from (a reviewer who misses canaries suspends the rules they taught)."""
    match = Match.from_doc(match_doc)
    deciders = (getattr(d, "decided_by", None) for d in decisions if d.status == "approved" and match.matches(_request(d)))
    return sorted({who for who in deciders if isinstance(who, str) and who})
