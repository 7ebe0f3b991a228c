"""Procedural-memory FSM validation."""

from __future__ import annotations

import json
from typing import Any

from app.core.fsm import Problem, validate_fsm, validate_fsm_document


def valid_doc() -> dict[str, Any]:
    return {
        "name": "deploy",
        "states": ["idle", "running", "done", "failed"],
        "initial": "idle",
        "current": "running",
        "transitions": [
            {"trigger": "start", "source": "idle", "dest": "running", "conditions": "approved"},
            {"trigger": "finish", "source": ["running"], "dest": "done", "unless": ["off", "_x1"]},
            {"trigger": "abort", "source": "*", "dest": "failed"},
            {"trigger": "reset", "dest": "idle"},
        ],
        "metadata": {"owner": "ops"},
    }


def paths(doc: Any) -> list[str]:
    return [p.path for p in validate_fsm(json.dumps(doc))]


def test_valid_document_has_no_problems() -> None:
    assert validate_fsm(json.dumps(valid_doc())) == []
    minimal = {"name": "m", "states": ["a"], "initial": "a", "transitions": []}
    assert validate_fsm(json.dumps(minimal)) == []


def test_not_json_or_not_an_object() -> None:
    [problem] = validate_fsm("{not json")
    assert problem.path == "" and "JSON" in problem.message
    assert validate_fsm("[1, 2]") == [Problem("", "must be a JSON object")]


def test_missing_and_unknown_top_level_keys() -> None:
    doc = valid_doc()
    del doc["initial"], doc["transitions"]
    doc["extra"] = 1
    doc["a/b"] = 2
    assert paths(doc) == ["/a~1b", "/extra", "/initial", "/transitions"]


def test_states_must_be_non_empty_unique_strings() -> None:
    assert "/states" in paths({**valid_doc(), "states": []})
    doc = {**valid_doc(), "states": ["idle", "running", "idle", 3, "done", "failed", "*"]}
    assert paths(doc) == ["/states/2", "/states/3", "/states/6"]


def test_initial_and_current_must_be_states() -> None:
    doc = {**valid_doc(), "initial": "nowhere", "current": 5}
    assert paths(doc) == ["/initial", "/current"]


def test_transition_problems_are_all_reported_with_paths() -> None:
    doc = valid_doc()
    doc["transitions"] = [
        {"trigger": "go", "source": "idle", "dest": "running", "conditions": "is ok"},
        {"source": "idle", "dest": "ghost", "priority": 1},
        {"trigger": "x", "source": ["idle", "ghost"], "dest": "done", "unless": ["ok", "1bad"]},
        {"trigger": "y", "source": 4, "dest": "done", "conditions": 7},
        {"trigger": "z", "source": [], "unless": "fine"},
        "not an object",
    ]
    assert paths(doc) == [
        "/transitions/0/conditions",
        "/transitions/1/priority",
        "/transitions/1/trigger",
        "/transitions/1/dest",
        "/transitions/2/source/1",
        "/transitions/2/unless/1",
        "/transitions/3/source",
        "/transitions/3/conditions",
        "/transitions/4/dest",
        "/transitions/4/source",
        "/transitions/5",
    ]


def test_transitions_and_metadata_types() -> None:
    doc = {**valid_doc(), "transitions": {}, "metadata": []}
    assert paths(doc) == ["/metadata", "/transitions"]
    assert paths({**valid_doc(), "name": "  "}) == ["/name"]


def test_document_validator_accepts_parsed_objects() -> None:
    assert validate_fsm_document(valid_doc()) == []
    problems = validate_fsm_document({**valid_doc(), "initial": "nope"})
    assert problems == [Problem("/initial", "unknown state 'nope'")]
    assert problems[0] == ("/initial", "unknown state 'nope'")
