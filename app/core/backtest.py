"""A policy change tried before it goes live: replay writes under the policy in force and under the
candidate, and name every write the candidate would admit without a person that is known to be bad.

Two kinds of write are replayed. The tenant's own *history*: staged writes a person decided, with
what became of them (rejected by a reviewer, approved and later forgotten, approved and later pulled
back by a recover). And *known attacks*: the shipped corpora of poisoned writes, replayed as each
agent the candidate names or the tenant has, with no source and with a claimed ``user`` source
(the most trusted origin a key may be allowed to assert), each carrying the flags screening gives it.

A write is *admitted* when the policy's decision is ``allow``: it would be stored live with no one
deciding. A harmful write the candidate admits and the policy in force does not is *newly
admitted*; a known attack or a write a reviewer rejected or a recover pulled back among those is
what makes a change need an explicit override (``blocking``). The report carries ids, rule ids
and counts only, never a write's content: it is shown to admins and recorded in the audit log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from app.core.policy import Policy, WriteRequest

SHOWN = 50
"""Most newly admitted harmful writes named in a report (the counts cover all of them)."""

BLOCKING = ("known_attack", "rejected", "recovered")
"""Why a newly admitted write stops a change unless it is overridden: known poison, or a person's no."""


@dataclass(frozen=True)
class Replayed:
    """One write to replay: where it comes from, the request to evaluate, and what is known of it."""

    ref: str
    """A change id (history) or a corpus id with the agent and source it was replayed as."""
    origin: str
    """``history`` or ``corpus``."""
    request: WriteRequest
    harms: tuple[str, ...] = ()
    """What makes admitting it wrong: ``known_attack``, ``rejected``, ``recovered``, ``forgotten``."""
    family: str | None = None
    """A corpus write's attack family (a fixed label from the corpus, never tenant content)."""


@dataclass
class Report:
    """What a candidate policy would have done differently over the replayed writes."""

    replayed: dict[str, int] = field(default_factory=lambda: {"history": 0, "corpus": 0})
    admitted: dict[str, int] = field(default_factory=lambda: {"history": 0, "corpus": 0})
    admitted_now: dict[str, int] = field(default_factory=lambda: {"history": 0, "corpus": 0})
    newly_admitted: dict[str, int] = field(default_factory=lambda: {"history": 0, "corpus": 0})
    newly_staged: dict[str, int] = field(default_factory=lambda: {"history": 0, "corpus": 0})
    harmful: dict[str, int] = field(default_factory=lambda: {harm: 0 for harm in (*BLOCKING, "forgotten")})
    families: dict[str, int] = field(default_factory=dict)
    named: list[dict[str, Any]] = field(default_factory=list)

    @property
    def blocking(self) -> int:
        """Newly admitted writes that are known attacks, rejected by a reviewer or recovered."""
        return sum(self.harmful[harm] for harm in BLOCKING)

    def to_json(self) -> dict[str, Any]:
        return {"replayed": self.replayed, "admitted": self.admitted, "admitted_by_current": self.admitted_now,
                "newly_admitted": self.newly_admitted, "newly_staged": self.newly_staged,
                "newly_admitted_harmful": self.harmful, "known_attack_families": dict(sorted(self.families.items())),
                "blocking": self.blocking, "named": self.named, "named_limit": SHOWN}

    def summary(self) -> dict[str, Any]:
        """The counts alone: what the audit log records of a backtest."""
        doc = self.to_json()
        doc.pop("named")
        doc.pop("named_limit")
        doc.pop("known_attack_families")
        return doc


def replay(current: Policy, candidate: Policy, writes: Iterable[Replayed]) -> Report:
    """Evaluate every write under both policies and count what changes (see the module docstring)."""
    report = Report()
    for write in writes:
        origin = write.origin
        report.replayed[origin] += 1
        now = current.evaluate(write.request).action == "allow"
        then = candidate.evaluate(write.request)
        admitted = then.action == "allow"
        report.admitted[origin] += admitted
        report.admitted_now[origin] += now
        if now and not admitted:
            report.newly_staged[origin] += 1
        if not admitted or now:
            continue
        report.newly_admitted[origin] += 1
        if not write.harms:
            continue
        for harm in write.harms:
            report.harmful[harm] += 1
        if write.family is not None:
            report.families[write.family] = report.families.get(write.family, 0) + 1
        if len(report.named) < SHOWN:
            report.named.append({"ref": write.ref, "origin": origin, "harms": list(write.harms),
                                 "family": write.family, "rule_id": then.rule_id, "agent_id": write.request.agent_id})
    return report


def harms_of(status: str, memory_status: str | None, hard_deleted: bool) -> tuple[str, ...]:
    """What became of a decided staged write, as harms: a reviewer's rejection, an approval a recover
    later pulled back to review, or an approval later forgotten (or hard-deleted)."""
    if status == "rejected":
        return ("rejected",)
    if status != "approved":
        return ()
    if memory_status == "pending":
        return ("recovered",)
    if hard_deleted or memory_status == "forgotten":
        return ("forgotten",)
    return ()


def corpus_tags(candidate: Policy, limit: int = 6) -> list[tuple[str, ...]]:
    """The tag sets a known attack is replayed with: none, and each tag the candidate's rules name
    (a writer chooses its tags, so a rule scoped by a tag is open to any write that carries it)."""
    out: list[tuple[str, ...]] = [()]
    for rule in candidate.rules:
        for tag in (*(rule.match.tags_any or ()), *(rule.match.tags_within or ())):
            if len(out) > limit:
                return out
            if (tag,) not in out:
                out.append((tag,))
    return out


def corpus_agents(candidate: Policy, seen: Sequence[str], limit: int = 12) -> list[str]:
    """The agents a known attack is replayed as: every agent the candidate's rules name one by one
    (a glob is tried as itself, which matches it), then the tenant's busiest agents, then a generic one."""
    named: list[str] = []
    for rule in candidate.rules:
        for agent in rule.match.agents or ():
            if agent not in named:
                named.append(agent)
    for agent in (*seen, "agent"):
        if len(named) >= limit:
            break
        if agent not in named:
            named.append(agent)
    return named
