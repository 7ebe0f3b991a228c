"""Validation of procedural memories: finite-state machines stored as JSON.

The content of a procedural memory is a JSON object::

    {
      "name": "deploy",                       # non-empty string
      "states": ["idle", "running", "done"],  # non-empty list of unique strings
      "initial": "idle",                      # one of states
      "current": "running",                   # optional; one of states
      "transitions": [                        # list (may be empty)
        {"trigger": "start", "source": "idle", "dest": "running",
         "conditions": "approved", "unless": ["frozen"]}
      ],
      "metadata": {}                          # optional object
    }

Transition keys are limited to trigger, source, dest, conditions, unless.
``trigger`` is a non-empty string; ``dest`` a state; ``source`` a state,
``"*"`` (any state) or a non-empty list of states, and ``"*"`` when omitted;
``conditions``/``unless`` a name or list of names, each a bare identifier.

Validators return every problem found as ``Problem(path, message)`` with a
JSON-Pointer path (``""`` is the document, ``/transitions/0/conditions``), so
a caller can report all of them at once; an empty list means valid.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from app.core import jsontext

TOP_LEVEL_KEYS = frozenset({"name", "initial", "states", "transitions", "current", "metadata"})
REQUIRED_KEYS = ("name", "initial", "states", "transitions")
TRANSITION_KEYS = frozenset({"trigger", "source", "dest", "conditions", "unless"})
ANY_STATE = "*"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Problem(NamedTuple):
    """One validation problem: a JSON-Pointer ``path`` and a human ``message``."""

    path: str
    message: str


def validate_fsm(content: str) -> list[Problem]:
    """Validate procedural-memory ``content`` (a JSON string); [] when valid."""
    try:
        document = jsontext.loads(content)
    except (TypeError, ValueError) as exc:
        return [Problem("", f"content is not valid JSON: {exc}")]
    return validate_fsm_document(document)


def validate_fsm_document(document: Any) -> list[Problem]:
    """Validate an already-parsed FSM document; [] when valid."""
    if not isinstance(document, dict):
        return [Problem("", "must be a JSON object")]
    problems: list[Problem] = []
    for key in sorted(set(document) - TOP_LEVEL_KEYS):
        problems.append(Problem(f"/{_escape(key)}", "unknown key"))
    for key in REQUIRED_KEYS:
        if key not in document:
            problems.append(Problem(f"/{key}", "is required"))

    name = document.get("name")
    if "name" in document and (not isinstance(name, str) or not name.strip()):
        problems.append(Problem("/name", "must be a non-empty string"))
    if "metadata" in document and not isinstance(document["metadata"], dict):
        problems.append(Problem("/metadata", "must be an object"))

    states = _check_states(document, problems)
    for key in ("initial", "current"):
        if key in document:
            _check_state_ref(document[key], f"/{key}", states, problems)
    if "transitions" in document:
        _check_transitions(document["transitions"], states, problems)
    return problems


def _check_states(document: dict[str, Any], problems: list[Problem]) -> set[str]:
    """Report problems in ``states``; return the valid state names seen."""
    if "states" not in document:
        return set()
    states = document["states"]
    if not isinstance(states, list) or not states:
        problems.append(Problem("/states", "must be a non-empty list of strings"))
        return set()
    seen: set[str] = set()
    for i, state in enumerate(states):
        if not isinstance(state, str) or not state:
            problems.append(Problem(f"/states/{i}", "must be a non-empty string"))
        elif state == ANY_STATE:
            problems.append(Problem(f"/states/{i}", '"*" is reserved for "any state"'))
        elif state in seen:
            problems.append(Problem(f"/states/{i}", f"duplicate state {state!r}"))
        else:
            seen.add(state)
    return seen


def _check_state_ref(value: Any, path: str, states: set[str], problems: list[Problem]) -> None:
    if not isinstance(value, str):
        problems.append(Problem(path, "must be a string naming a state"))
    elif states and value not in states:
        problems.append(Problem(path, f"unknown state {value!r}"))


def _check_transitions(transitions: Any, states: set[str], problems: list[Problem]) -> None:
    if not isinstance(transitions, list):
        problems.append(Problem("/transitions", "must be a list"))
        return
    for i, transition in enumerate(transitions):
        base = f"/transitions/{i}"
        if not isinstance(transition, dict):
            problems.append(Problem(base, "must be an object"))
            continue
        for key in sorted(set(transition) - TRANSITION_KEYS):
            problems.append(Problem(f"{base}/{_escape(key)}", "unknown key"))
        trigger = transition.get("trigger")
        if not isinstance(trigger, str) or not trigger:
            problems.append(Problem(f"{base}/trigger", "must be a non-empty string"))
        if "dest" not in transition:
            problems.append(Problem(f"{base}/dest", "is required"))
        else:
            _check_state_ref(transition["dest"], f"{base}/dest", states, problems)
        if "source" in transition:
            _check_source(transition["source"], f"{base}/source", states, problems)
        for key in ("conditions", "unless"):
            if key in transition:
                _check_names(transition[key], f"{base}/{key}", problems)


def _check_source(source: Any, path: str, states: set[str], problems: list[Problem]) -> None:
    if source == ANY_STATE:
        return
    if isinstance(source, list):
        if not source:
            problems.append(Problem(path, "must not be an empty list"))
        for j, item in enumerate(source):
            _check_state_ref(item, f"{path}/{j}", states, problems)
        return
    if not isinstance(source, str):
        problems.append(Problem(path, 'must be a state, "*" or a list of states'))
        return
    _check_state_ref(source, path, states, problems)


def _check_names(value: Any, path: str, problems: list[Problem]) -> None:
    if isinstance(value, str):
        if not _IDENTIFIER.fullmatch(value):
            problems.append(Problem(path, f"{value!r} is not a bare identifier"))
        return
    if not isinstance(value, list):
        problems.append(Problem(path, "must be an identifier or a list of identifiers"))
        return
    for j, item in enumerate(value):
        if not isinstance(item, str) or not _IDENTIFIER.fullmatch(item):
            problems.append(Problem(f"{path}/{j}", "must be a bare identifier"))


def _escape(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


# --- transition tables, for reviewers ---------------------------------------------------------------

def transition_table_diff(old_content: str | None, new_content: str) -> dict[str, Any] | None:
    """How procedural ``new_content`` changes the FSM in ``old_content``, as a reviewer reads it:
    transitions (keyed by trigger and destination) ``added``, ``removed`` and ``changed`` (source
    states or guards differ; ``before``/``after`` rows), states added and removed, and whether the
    change ``widens`` what the procedure allows (a new transition or state, more source states, fewer
    guards). Each row is ``{trigger, source, dest, guards}`` with ``source`` a list of states or
    ``["*"]``. None when either side is not an FSM object (``old_content`` None: everything is added)."""
    new = _fsm_object(new_content)
    old = _fsm_object(old_content) if old_content is not None else {"states": [], "transitions": []}
    if new is None or old is None:
        return None
    before, after = _rows_by_key(old), _rows_by_key(new)
    changed = [{"before": before[k], "after": after[k], "widens": _wider(before[k], after[k])}
               for k in after if k in before and before[k] != after[k]]
    added = [after[k] for k in after if k not in before]
    old_states, new_states = _state_names(old), _state_names(new)
    states_added = [s for s in new_states if s not in old_states]
    return {
        "added": added, "removed": [before[k] for k in before if k not in after], "changed": changed,
        "states_added": states_added, "states_removed": [s for s in old_states if s not in new_states],
        "widens": bool(added or states_added or any(c["widens"] for c in changed)),
    }


def _fsm_object(content: str | None) -> dict[str, Any] | None:
    try:
        doc = jsontext.loads(content or "")
    except (TypeError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("transitions", []), list) else None


def _state_names(doc: dict[str, Any]) -> list[str]:
    states = doc.get("states")
    return [s for s in states if isinstance(s, str)] if isinstance(states, list) else []


def _as_names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return sorted(v for v in value if isinstance(v, str)) if isinstance(value, list) else []


def _rows_by_key(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """One row per (trigger, dest); a trigger repeated for one destination has its rows' sources
    and guards joined, as the procedure allows any of them."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for t in doc.get("transitions", []):
        if not isinstance(t, dict):
            continue
        key = (str(t.get("trigger")), str(t.get("dest")))
        source = t.get("source", ANY_STATE)
        sources = [ANY_STATE] if source == ANY_STATE else _as_names(source)
        guards = [f"if {n}" for n in _as_names(t.get("conditions"))] + \
                 [f"unless {n}" for n in _as_names(t.get("unless"))]
        row = rows.setdefault(key, {"trigger": key[0], "source": [], "dest": key[1], "guards": []})
        row["source"] = [ANY_STATE] if ANY_STATE in sources + row["source"] else sorted({*row["source"], *sources})
        row["guards"] = sorted({*row["guards"], *guards})
    return rows


def _wider(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """More source states (or any state) or fewer guards than before."""
    more_sources = ANY_STATE in after["source"] and ANY_STATE not in before["source"] or (
        ANY_STATE not in before["source"] and not set(after["source"]) <= set(before["source"]))
    return more_sources or not set(before["guards"]) <= set(after["guards"])
