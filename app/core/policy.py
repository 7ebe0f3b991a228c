"""Tenant review policies (contract §4): which writes need review, which are refused.

A policy is an ordered list of rules, read like firewall rules: the first
*enabled* rule whose ``match`` holds decides the write; when none matches, the
built-in ``SCREENING_BASELINE`` rule is tried (writes whose screening risk is
high go to review), and when that does not match either the write is allowed.
The baseline comes *after* every tenant rule, so a tenant can waive or tighten
it with an earlier rule (``{"match": {"risk_at_least": "high"}, "action":
"deny"}``, or a catch-all ``allow``). Independently of the rules, an agent that
asks for review (``approval_required: true``) always gets it, unless a rule
denies the write.

A *learned* rule (one with ``provenance``: accepted from a suggestion mined from
the tenant's own decisions, ``app.services.review.suggestions``) only relaxes review:
it never waives the screening baseline (a write the baseline would stage is
staged even when a learned allow rule matches), never overrides a deny rule
listed after it, and never waives a hand-written rule that asks for two or more
approvals (a two-person rule: a person decided one reviewer is not enough, so a
learned rule cannot make it none), applies only to the agents it lists one by one
(a learned rule with no agents, or with a wildcard, is passed over), and never
approves a write whose content has
high-impact structure (a link, an address, a number, a command, a secret-like
token or a standing instruction: ``app.core.high_impact``), since screening may
have missed what such a write asks for. A learned rule passed over for its
agents or its content is skipped, not obeyed: the rules after it decide, as they
would have without it. That guard lives here, in evaluation, so no path can skip it.

A second built-in rule, the **category baseline**, follows: a ``remember`` whose screening raised
a category of effect (``app.core.screening.CATEGORY_NAMES``) from an *untrusted* origin (the
``source`` read with ``app.core.screening.provenance``'s vocabulary: only ``user`` is trusted, an
absent source is not) goes to review. The document's optional ``categories`` tunes it, e.g.
``{"command": {"untrusted": "deny", "tool": "stage"}}``: per category, an action (``stage``,
``deny``, ``allow``) per class (``trusted`` / ``untrusted``) or per origin (which beats its class).
Defaults: untrusted stage, trusted allow; the strictest action of a write's categories applies; a
``deny`` is tried before the screening baseline. A learned rule never waives it.

``Policy.parse`` validates a document against ``schemas/policy.json`` and the
checks a schema cannot express (unique ids, compilable and non-catastrophic
regexes, ``approvals_required`` only with ``require_approval``).
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, Mapping, Sequence

from jsonschema import Draft202012Validator

from app.core import high_impact
from app.core.screening import CATEGORY_NAMES, LEVELS, level_rank, provenance
from app.paths import SCHEMAS_DIR

try:  # CPython's regex parser; only used for the nested-quantifier check.
    from re import _parser as _re_parser  # type: ignore[attr-defined]  # (private: not in the stubs)
except ImportError:  # pragma: no cover - other interpreters skip that check
    _re_parser = None

SCHEMA_PATH = SCHEMAS_DIR / "policy.json"

Action = Literal["allow", "require_approval", "deny"]
Operation = Literal[
    "remember", "forget", "merge", "expire", "delete", "workspace_write", "workspace_delete"
]
OPERATIONS: frozenset[str] = frozenset(
    ("remember", "forget", "merge", "expire", "delete", "workspace_write", "workspace_delete")
)
ACTIONS: frozenset[str] = frozenset(("allow", "require_approval", "deny"))

#: Only this much of a write's content is searched by ``content_pattern`` (characters).
CONTENT_SCAN_LIMIT = 64 * 1024
MAX_PATTERN_LENGTH = 500
# A quantifier bounded above this many repetitions is treated like an unbounded one.
_LARGE_REPEAT = 10

# Canonical order of match conditions in `to_doc` (also the schema's order).
_MATCH_KEYS = (
    "operations", "types", "agents", "sources", "has_source", "tags_any", "tags_within", "content_pattern",
    "confidence_below", "hard_delete", "rows_affected_above", "paths", "risk_flags", "risk_at_least",
    "risk_at_most",
)


class PolicyError(ValueError):
    """A policy document is invalid; ``problems`` lists ``{"path", "message"}`` (JSON pointers).
    Callers that answer a client turn it into their validation error (422 with these details)."""

    def __init__(self, problems: list[dict[str, str]]):
        self.problems = sorted(problems, key=lambda p: (p["path"], p["message"]))
        summary = (
            self.problems[0]["message"] if len(self.problems) == 1
            else f"{len(self.problems)} problems in the policy"
        )
        super().__init__(summary)


@dataclass(frozen=True)
class WriteRequest:
    """The write being judged. Unknown facts stay ``None`` and fail the conditions that need them."""

    operation: Operation
    agent_id: str
    type: str | None = None
    source: str | None = None
    tags: Sequence[str] = ()
    content: str | None = None
    confidence: float | None = None
    hard_delete: bool = False
    rows_affected: int | None = None
    path: str | None = None
    approval_required: bool = False
    risk_flags: Sequence[str] = ()
    """Names of the screening flags the write raised (``app.core.screening``)."""
    risk_level: str = "none"
    """Highest severity among those flags: none / low / medium / high."""

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise ValueError(f"unknown operation {self.operation!r}")
        if self.risk_level not in LEVELS:
            raise ValueError(f"unknown risk level {self.risk_level!r}")
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "risk_flags", tuple(self.risk_flags))


@dataclass(frozen=True)
class Decision:
    """Outcome of evaluating a write; ``approvals_required`` is 0 unless review is needed."""

    action: Action
    approvals_required: int
    rule_id: str | None
    reason: str
    learned: bool = False
    """The deciding rule is a learned one (journaled as ``learned_rule`` when it allows a write)."""


@dataclass(frozen=True)
class Match:
    """Conditions of one rule, all ANDed; a field left ``None`` is no condition."""

    operations: tuple[str, ...] | None = None
    types: tuple[str, ...] | None = None
    agents: tuple[str, ...] | None = None
    sources: tuple[str, ...] | None = None
    has_source: bool | None = None
    """Matches when the write names a source (true) or names none (false)."""
    tags_any: tuple[str, ...] | None = None
    tags_within: tuple[str, ...] | None = None
    """Matches when every tag the write carries is one of these (``()``: only a write with no tags)."""
    content_pattern: str | None = None
    confidence_below: float | None = None
    hard_delete: bool | None = None
    rows_affected_above: int | None = None
    paths: tuple[str, ...] | None = None
    risk_flags: tuple[str, ...] | None = None
    """Matches when the write raised at least one of these screening flags."""
    risk_at_least: str | None = None
    """Matches when the write's screening risk is this level or higher (low / medium / high)."""
    risk_at_most: str | None = None
    """Matches when the write's screening risk is this level or lower (none / low / medium / high)."""
    _compiled: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Compile once so evaluation is a few set look-ups and precompiled matches.
        compiled = self._compiled
        compiled["operations"] = _frozen(self.operations)
        compiled["types"] = _frozen(self.types)
        compiled["tags_any"] = _frozen(self.tags_any)
        compiled["tags_within"] = _frozen(self.tags_within)
        compiled["risk_flags"] = _frozen(self.risk_flags)
        compiled["risk_rank"] = None if self.risk_at_least is None else level_rank(self.risk_at_least)
        compiled["risk_max"] = None if self.risk_at_most is None else level_rank(self.risk_at_most)
        for key in ("agents", "sources", "paths"):
            globs = getattr(self, key)
            compiled[key] = None if globs is None else _compile_globs(globs)
        compiled["content_pattern"] = (
            None if self.content_pattern is None else re.compile(self.content_pattern)
        )

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Match:
        """Build from the schema-valid ``match`` object of a rule."""
        def tup(key: str) -> tuple[str, ...] | None:
            return None if key not in doc else tuple(doc[key])

        return cls(
            operations=tup("operations"), types=tup("types"), agents=tup("agents"),
            sources=tup("sources"), has_source=doc.get("has_source"), tags_any=tup("tags_any"),
            tags_within=tup("tags_within"),
            content_pattern=doc.get("content_pattern"),
            confidence_below=doc.get("confidence_below"), hard_delete=doc.get("hard_delete"),
            rows_affected_above=doc.get("rows_affected_above"), paths=tup("paths"),
            risk_flags=tup("risk_flags"), risk_at_least=doc.get("risk_at_least"),
            risk_at_most=doc.get("risk_at_most"),
        )

    def to_doc(self) -> dict[str, Any]:
        """The ``match`` object, listing only the conditions that are set."""
        doc: dict[str, Any] = {}
        for key in _MATCH_KEYS:
            value = getattr(self, key)
            if value is not None:
                doc[key] = list(value) if isinstance(value, tuple) else value
        return doc

    def matches(self, req: WriteRequest) -> bool:
        """Whether every condition holds for ``req`` (cheap checks first, the regex last)."""
        c = self._compiled
        if c["operations"] is not None and req.operation not in c["operations"]:
            return False
        if self.hard_delete is not None and req.hard_delete != self.hard_delete:
            return False
        if self.rows_affected_above is not None and (
            req.rows_affected is None or req.rows_affected <= self.rows_affected_above
        ):
            return False
        if self.confidence_below is not None and (
            req.confidence is None or req.confidence >= self.confidence_below
        ):
            return False
        if c["types"] is not None and req.type not in c["types"]:
            return False
        if c["tags_any"] is not None and c["tags_any"].isdisjoint(req.tags):
            return False
        if c["tags_within"] is not None and not c["tags_within"].issuperset(req.tags):
            return False
        if self.has_source is not None and (req.source is not None) != self.has_source:
            return False
        if c["risk_flags"] is not None and c["risk_flags"].isdisjoint(req.risk_flags):
            return False
        if c["risk_rank"] is not None and level_rank(req.risk_level) < c["risk_rank"]:
            return False
        if c["risk_max"] is not None and level_rank(req.risk_level) > c["risk_max"]:
            return False
        for key, value in (("agents", req.agent_id), ("sources", req.source), ("paths", req.path)):
            globs = c[key]
            if globs is not None and (value is None or not any(g.match(value) for g in globs)):
                return False
        pattern = c["content_pattern"]
        if pattern is not None and (
            req.content is None or pattern.search(req.content, 0, CONTENT_SCAN_LIMIT) is None
        ):
            return False
        return True


@dataclass(frozen=True)
class Rule:
    """One ordered policy rule."""

    id: str
    match: Match
    action: Action
    enabled: bool = True
    description: str | None = None
    approvals_required: int = 1
    provenance: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    """Where a learned rule came from (suggestion id, who accepted it, when, the evidence); ``None``
    for a rule a person wrote."""

    @property
    def learned(self) -> bool:
        """Accepted from a suggestion rather than written by hand."""
        return self.provenance is not None

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Rule:
        """Build from a schema-valid rule object."""
        return cls(
            id=doc["id"], match=Match.from_doc(doc["match"]), action=doc["action"],
            enabled=doc.get("enabled", True), description=doc.get("description"),
            approvals_required=doc.get("approvals_required", 1),
            provenance=copy.deepcopy(doc["provenance"]) if "provenance" in doc else None,
        )

    def to_doc(self) -> dict[str, Any]:
        """The canonical rule object (``approvals_required`` only with ``require_approval``)."""
        doc: dict[str, Any] = {"id": self.id}
        if self.description is not None:
            doc["description"] = self.description
        doc["enabled"] = self.enabled
        doc["match"] = self.match.to_doc()
        doc["action"] = self.action
        if self.action == "require_approval":
            doc["approvals_required"] = self.approvals_required
        if self.provenance is not None:
            doc["provenance"] = copy.deepcopy(dict(self.provenance))
        return doc

    def decision(self) -> Decision:
        """What this rule decides when it matches."""
        kind = "learned rule" if self.learned else "rule"
        reason = f"{kind} {self.id!r}" + (f": {self.description}" if self.description else " matched")
        approvals = self.approvals_required if self.action == "require_approval" else 0
        return Decision(self.action, approvals, self.id, reason, learned=self.learned)


CATEGORY_ACTIONS = ("allow", "stage", "deny")
"""A tenant's actions for a category, least to most strict."""
DEFAULT_CATEGORY_ACTIONS = {"trusted": "allow", "untrusted": "stage"}
_CATEGORY_RULE_ACTION: dict[str, Action] = {"stage": "require_approval", "deny": "deny"}

_ALLOW = Decision("allow", 0, None, "no rule matched")
_AGENT_REVIEW = Decision("require_approval", 1, None, "agent requested approval")


@dataclass(frozen=True)
class Policy:
    """An ordered, validated set of rules."""

    rules: tuple[Rule, ...] = ()
    categories: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    """The category baseline's tuning: per category, sorted ``(class or origin, action)`` pairs."""

    @classmethod
    def parse(cls, doc: Any) -> Policy:
        """Validate a policy document and build it; raises ``PolicyError`` listing every problem."""
        problems = schema_problems(doc)
        problems += semantic_problems(doc)
        if problems:
            raise PolicyError(problems)
        categories = tuple(sorted((name, tuple(sorted(actions.items())))
                                  for name, actions in doc.get("categories", {}).items() if actions))
        return cls(tuple(Rule.from_doc(rule) for rule in doc["rules"]), categories)

    def to_doc(self) -> dict[str, Any]:
        """The canonical document; ``Policy.parse(p.to_doc()) == p``."""
        doc: dict[str, Any] = {"rules": [rule.to_doc() for rule in self.rules]}
        if self.categories:
            doc["categories"] = {name: dict(actions) for name, actions in self.categories}
        return doc

    def category_action(self, category: str, source: str | None) -> str:
        """The action (``CATEGORY_ACTIONS``) for ``category`` raised by a write from ``source``."""
        tuned = dict(dict(self.categories).get(category, ()))
        klass = "trusted" if provenance.trusted(source) else "untrusted"
        return tuned.get(provenance.origin(source)) or tuned.get(klass) or DEFAULT_CATEGORY_ACTIONS[klass]

    def category_rule(self, req: WriteRequest) -> Rule | None:
        """The category baseline for ``req``: a rule matching it that stages or denies it for the
        categories it raised (the strictest of their actions), or None when they are all allowed."""
        if req.operation != "remember":
            return None
        actions: dict[str, list[str]] = {}
        for name in sorted(set(req.risk_flags) & set(CATEGORY_NAMES)):
            actions.setdefault(self.category_action(name, req.source), []).append(name)
        strictest = max(actions, key=CATEGORY_ACTIONS.index, default="allow")
        if strictest == "allow":
            return None
        names = actions[strictest]
        origin = provenance.origin(req.source)
        return Rule(id=CATEGORY_BASELINE_ID, match=Match(operations=("remember",), risk_flags=tuple(names)),
                    action=_CATEGORY_RULE_ACTION[strictest],
                    description=f"{', '.join(names)} from a write of origin {origin!r}: "
                                f"{'denied' if strictest == 'deny' else 'a reviewer decides'}.")

    def evaluate(self, req: WriteRequest) -> Decision:
        """Decide ``req``: first matching enabled rule, then the screening baseline, else allow.

        The agent's request for review is honoured whenever the outcome would be allow. A learned
        rule never waives the screening baseline nor a later deny rule (see the module docstring).
        """
        return self.explain(req)[0]

    def explain(self, req: WriteRequest) -> tuple[Decision, list[dict[str, Any]]]:
        """``evaluate`` plus the trace behind it: each matching rule tried, in order, as
        ``{"rule", "action", "learned", "outcome"}`` (``decided`` or why it was passed over)."""
        decision, trace = _ALLOW, []
        category = self.category_rule(req)
        if category is None:
            builtins: tuple[Rule, ...] = (SCREENING_BASELINE,)
        elif category.action == "deny":  # the tenant's deny outranks the baseline's review
            builtins = (category, SCREENING_BASELINE)
        else:
            builtins = (SCREENING_BASELINE, category)
        rules = (*self.rules, *builtins)
        for index, rule in enumerate(rules):
            if not (rule.enabled and rule.match.matches(req)):
                continue
            step = {"rule": rule.id, "action": rule.action, "learned": rule.learned, "outcome": "decided"}
            trace.append(step)
            if rule.learned and rule.action != "deny":
                overruling = _learned_overruled_by(rules[index + 1:], req, category)
                if overruling is not None:
                    step["outcome"] = f"passed over: a learned rule cannot waive {overruling.id!r}"
                    decision = overruling.decision()
                    trace.append({"rule": overruling.id, "action": overruling.action,
                                  "learned": overruling.learned, "outcome": "decided"})
                    break
                if not _names_its_agents(rule.match):
                    # A learned rule stored before rules named their agents, or widened by hand to a
                    # glob: what it was learned from says nothing about other agents.
                    step["outcome"] = "passed over: a learned rule applies only to the agents it names exactly"
                    continue
                found = high_impact.features(req.content) if rule.action == "allow" else ()
                if found:
                    # Not a decision: the rules after it decide, as they would have without it.
                    step["outcome"] = (f"passed over: the write carries {high_impact.describe(found)}, "
                                       "which a learned rule never approves")
                    continue
            decision = rule.decision()
            break
        if req.approval_required and decision.action == "allow":
            trace.append({"rule": None, "action": "require_approval", "learned": False,
                          "outcome": "decided: the agent asked for approval"})
            return _AGENT_REVIEW, trace
        return decision, trace


def _learned_overruled_by(later: Sequence[Rule], req: WriteRequest, category: Rule | None = None) -> Rule | None:
    """The rule a matching learned rule must give way to: the category baseline when it denies
    ``req``, the screening baseline when it matches (high-risk writes are always staged), the category
    baseline when it stages (a category from an untrusted origin), else the first later enabled
    hand-written rule that matches and either denies the write or asks for two or more approvals (a
    learned rule relaxes one-person review; it never grants what a person forbade nor waives a
    two-person rule)."""
    if category is not None and category.action == "deny":
        return category
    if SCREENING_BASELINE.match.matches(req):
        return SCREENING_BASELINE
    if category is not None:
        return category
    for rule in later:
        if rule.enabled and not rule.learned and _binding(rule) and rule.match.matches(req):
            return rule
    return None


_LITERAL_GLOB = re.compile(r"(?:[^*?\[]|\[[*?\[]\])+")
"""An fnmatch pattern that matches one string only (``app.core.policy_learning.literal_glob``)."""


def _names_its_agents(match: Match) -> bool:
    """Whether a match lists its agents one by one (no wildcard): what a learned rule must do."""
    agents = match.agents or ()
    return bool(agents) and all(_LITERAL_GLOB.fullmatch(g) for g in agents)


def _binding(rule: Rule) -> bool:
    """Whether a hand-written rule binds learned rules listed before it: a deny, or a two-person rule."""
    return rule.action == "deny" or (rule.action == "require_approval" and rule.approvals_required >= 2)


DEFAULT_POLICY: dict[str, Any] = {
    "rules": [
        {
            "id": "hard-delete-review",
            "description": "Hard deletes erase history and need a reviewer.",
            "enabled": True,
            "match": {"hard_delete": True},
            "action": "require_approval",
            "approvals_required": 1,
        },
        {
            "id": "bulk-forget-review",
            "description": "Forgets and expiries affecting more than 10 memories need a reviewer.",
            "enabled": True,
            "match": {"operations": ["forget", "expire"], "rows_affected_above": 10},
            "action": "require_approval",
            "approvals_required": 1,
        },
    ]
}


def default_policy() -> Policy:
    """The policy a tenant gets until it sets its own (built from a copy of ``DEFAULT_POLICY``)."""
    return Policy.parse(copy.deepcopy(DEFAULT_POLICY))


@cache
def _validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return Draft202012Validator(schema)


def schema_problems(doc: Any) -> list[dict[str, str]]:
    """Every way ``doc`` breaks ``schemas/policy.json``, as ``{"path", "message"}``."""
    found = []
    for err in _validator().iter_errors(doc):
        message = err.message if len(err.message) <= 300 else err.message[:297] + "..."
        found.append({"path": _pointer(err.absolute_path), "message": message})
    return found


def semantic_problems(doc: Any) -> list[dict[str, str]]:
    """Checks the schema cannot express; tolerant of malformed input (the schema reports that)."""
    rules = doc.get("rules") if isinstance(doc, dict) else None
    if not isinstance(rules, list):
        return []
    found: list[dict[str, str]] = []
    first_index: dict[str, int] = {}
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            continue
        base = f"/rules/{i}"
        rule_id = rule.get("id")
        if isinstance(rule_id, str):
            if rule_id in first_index:
                found.append({"path": f"{base}/id", "message":
                              f"duplicate rule id {rule_id!r} (first used by /rules/{first_index[rule_id]})"})
            else:
                first_index[rule_id] = i
        if "approvals_required" in rule and rule.get("action") != "require_approval":
            found.append({"path": f"{base}/approvals_required",
                          "message": "approvals_required is only allowed with action require_approval"})
        match = rule.get("match")
        if "provenance" in rule and (not isinstance(match, dict) or match.get("operations") != ["remember"]):
            # Learned rules are mined from, and journaled on, remembers only (app.core.policy_learning).
            found.append({"path": f"{base}/match/operations",
                          "message": 'a learned rule (with provenance) must match operations ["remember"] only'})
        pattern = match.get("content_pattern") if isinstance(match, dict) else None
        if isinstance(pattern, str):
            problem = regex_problem(pattern)
            if problem:
                found.append({"path": f"{base}/match/content_pattern", "message": problem})
    return found


def regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` is unusable as a ``content_pattern``, or ``None`` when it is fine.

    Beyond compiling, a pattern is refused when an unbounded quantifier sits inside
    another unbounded (or > 10) repetition, e.g. ``(a+)+`` or ``(\\w+\\s?)*``: the shape
    behind most catastrophic backtracking. Possessive quantifiers and atomic groups
    are exempt. This does not catch every slow pattern (e.g. overlapping alternations
    like ``(a|a)*``); the 64 KiB scan limit bounds the rest.
    """
    if len(pattern) > MAX_PATTERN_LENGTH:
        return f"content_pattern is longer than {MAX_PATTERN_LENGTH} characters"
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        return f"invalid regular expression: {exc}"
    if _re_parser is not None and _nested_unbounded(_re_parser.parse(pattern), inside=False):
        return ("content_pattern nests unbounded quantifiers (catastrophic backtracking risk); "
                "use a possessive quantifier or an atomic group")
    return None


def _nested_unbounded(node: Any, inside: bool) -> bool:
    repeats = (_re_parser.MAX_REPEAT, _re_parser.MIN_REPEAT)
    safe = tuple(getattr(_re_parser, name) for name in ("POSSESSIVE_REPEAT", "ATOMIC_GROUP")
                 if hasattr(_re_parser, name))
    for op, av in node:
        if op in safe:
            continue
        if op in repeats:
            _low, high, sub = av
            unbounded = high == _re_parser.MAXREPEAT
            if unbounded and inside:
                return True
            if _nested_unbounded(sub, inside or unbounded or high > _LARGE_REPEAT):
                return True
            continue
        for child in _subpatterns(av):
            if _nested_unbounded(child, inside):
                return True
    return False


def _subpatterns(av: Any) -> list[Any]:
    if isinstance(av, _re_parser.SubPattern):
        return [av]
    if isinstance(av, (list, tuple)):
        return [sub for item in av for sub in _subpatterns(item)]
    return []


def _pointer(path: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path) or "/"


def _frozen(values: tuple[str, ...] | None) -> frozenset[str] | None:
    return None if values is None else frozenset(values)


def _compile_globs(globs: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    # fnmatch.translate + match == fnmatch.fnmatchcase: case-sensitive on every OS.
    return tuple(re.compile(fnmatch.translate(g)) for g in globs)


SCREENING_BASELINE = Rule(
    id="screening-high-risk", match=Match(risk_at_least="high"), action="require_approval",
    description="Writes whose screening raised a high-severity risk flag need a reviewer.",
)
"""Tried after every tenant rule (and the defaults): not part of any editable policy document."""

CATEGORY_BASELINE_ID = "screening-categories"
"""The id of the category baseline (``Policy.category_rule``), built per write from the tenant's
``categories``; like ``SCREENING_BASELINE`` it is in no editable policy document."""
