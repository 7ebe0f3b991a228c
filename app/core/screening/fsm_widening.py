"""``fsm_widening``: a procedural memory (FSM) edit that lets the procedure do more than before.

A procedural memory is a workflow the agent follows; poisoning one ("MemoryGraft") adds a step
or loosens a guard rather than saying anything suspicious. Compared with the live FSM of the same
``name`` (the service passes the newest live one), these count as widening:

* ``wildcard_source`` (high): a transition whose source becomes ``"*"`` (any state), or a new
  transition from ``"*"``;
* ``guard_removed`` (high): a transition with the trigger and destination of an existing one
  but without all of its ``conditions``/``unless`` names (for every existing version of it);
* ``guard_bypass`` (high): a state that existed before and could only be reached through a guarded
  transition (``conditions``/``unless``) becomes reachable from ``initial`` without passing any
  guard (a new shortcut around an approval step);
* ``source_widened`` (medium): a transition reachable from more states than before;
* ``transition_added`` (medium): a (trigger, source, dest) that did not exist;
* ``state_added`` (low): a new state.

With no live FSM of that name, a new procedure whose transitions start from ``"*"`` is flagged
low. Evidence spans point at the transition's ``"trigger"`` value in the new content (the whole
content when it cannot be located).
"""

from __future__ import annotations

import json
import re
from typing import Any

from app.core import jsontext
from app.core.fsm import ANY_STATE
from app.core.screening.flags import RiskFlag, Span, combine, severity_for

NAME = "fsm_widening"
WEIGHTS = {"wildcard_source": 0.8, "guard_removed": 0.8, "guard_bypass": 0.8, "source_widened": 0.55, "transition_added": 0.5,
           "state_added": 0.2, "new_wildcard": 0.3}
MEDIUM, HIGH = 0.4, 0.7


def _document(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        doc = jsontext.loads(text)
    except (TypeError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("transitions", []), list) else None


def _sources(transition: dict[str, Any]) -> frozenset[str]:
    source = transition.get("source", ANY_STATE)
    if isinstance(source, list):
        return frozenset(s for s in source if isinstance(s, str))
    return frozenset([source]) if isinstance(source, str) else frozenset()


def _names(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset([value])
    return frozenset(v for v in value if isinstance(v, str)) if isinstance(value, list) else frozenset()


def _guards(transition: dict[str, Any]) -> frozenset[tuple[str, str]]:
    return frozenset({("if", n) for n in _names(transition.get("conditions"))}
                     | {("unless", n) for n in _names(transition.get("unless"))})


def _transitions(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in doc.get("transitions", []) if isinstance(t, dict)]


def _unguarded_reach(doc: dict[str, Any]) -> set[str]:
    """States reachable from ``initial`` through transitions that have no guard."""
    initial = doc.get("initial")
    reach: set[str] = {initial} if isinstance(initial, str) else set()
    changed = True
    while changed:
        changed = False
        for transition in _transitions(doc):
            dest = transition.get("dest")
            if _guards(transition) or not isinstance(dest, str) or dest in reach:
                continue
            sources = _sources(transition)
            if ANY_STATE in sources or sources & reach:
                reach.add(dest)
                changed = True
    return reach


def _locate(content: str, trigger: Any, nth: int) -> tuple[int, int]:
    """Span of the ``nth`` occurrence of this trigger's JSON string in the content, else everything."""
    if isinstance(trigger, str):
        needle = re.compile(r'"trigger"\s*:\s*' + re.escape(json.dumps(trigger)))
        for i, m in enumerate(needle.finditer(content)):
            if i == nth:
                return m.span()
    return 0, len(content)


def detect(content: str, live_content: str | None) -> RiskFlag | None:
    """The ``fsm_widening`` flag for new procedural ``content`` against the live FSM, or None."""
    new = _document(content)
    if new is None:
        return None
    old = _document(live_content)
    if old is not None and old.get("name") != new.get("name"):
        old = None
    found: dict[str, float] = {}
    spans: list[Span] = []
    seen_triggers: dict[Any, int] = {}

    def hit(kind: str, transition: dict[str, Any] | None = None, nth: int = 0) -> None:
        found[kind] = max(found.get(kind, 0.0), WEIGHTS[kind])
        start, end = _locate(content, transition.get("trigger"), nth) if transition else (0, len(content))
        spans.append(Span("content", start, end))

    old_transitions = _transitions(old) if old is not None else []
    for transition in _transitions(new):
        trigger = transition.get("trigger")
        key = json.dumps(trigger)
        nth = seen_triggers.get(key, 0)
        seen_triggers[key] = nth + 1
        sources, dest = _sources(transition), transition.get("dest")
        if old is None:
            if ANY_STATE in sources:
                hit("new_wildcard", transition, nth)
            continue
        same = [t for t in old_transitions if t.get("trigger") == trigger and t.get("dest") == dest]
        if not same:
            hit("wildcard_source" if ANY_STATE in sources else "transition_added", transition, nth)
            continue
        before = frozenset().union(*(_sources(t) for t in same))
        if ANY_STATE in sources and ANY_STATE not in before:
            hit("wildcard_source", transition, nth)
        elif ANY_STATE not in before and not sources <= before:
            hit("source_widened", transition, nth)
        # Guards dropped: no existing version of this step had a subset of the guards it has now.
        if not any(_guards(t) <= _guards(transition) for t in same):
            hit("guard_removed", transition, nth)
    if old is not None:
        old_states = set(_names(old.get("states")))
        if set(_names(new.get("states"))) - old_states:
            hit("state_added")
        opened = (_unguarded_reach(new) - _unguarded_reach(old)) & old_states
        nth_of: dict[Any, int] = {}
        for transition in _transitions(new):
            key = json.dumps(transition.get("trigger"))
            nth = nth_of.get(key, 0)
            nth_of[key] = nth + 1
            if transition.get("dest") in opened and not _guards(transition):
                hit("guard_bypass", transition, nth)
    if not found:
        return None
    score = combine(found.values())
    return RiskFlag(NAME, severity_for(score, medium=MEDIUM, high=HIGH), score, tuple(spans))
