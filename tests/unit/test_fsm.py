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


# --- transition tables for reviewers ------------------------------------------------------------

from app.core.fsm import transition_table_diff  # noqa: E402

REFUND = {"name": "refund", "initial": "asked", "states": ["asked", "ok", "paid"],
          "transitions": [{"trigger": "approve", "source": "asked", "dest": "ok", "conditions": "manager"},
                          {"trigger": "pay", "source": "ok", "dest": "paid"}]}


def _with(transitions, states=None) -> str:
    return json.dumps({**REFUND, "transitions": transitions, "states": states or REFUND["states"]})


def test_an_identical_procedure_changes_nothing():
    table = transition_table_diff(json.dumps(REFUND), json.dumps(REFUND))
    assert table == {"added": [], "removed": [], "changed": [], "states_added": [], "states_removed": [],
                     "widens": False}


def test_a_wildcard_source_or_a_dropped_guard_widens():
    wider = _with([{"trigger": "approve", "source": "*", "dest": "ok", "conditions": "manager"},
                   REFUND["transitions"][1]])
    assert transition_table_diff(json.dumps(REFUND), wider)["changed"][0]["widens"] is True
    unguarded = _with([{"trigger": "approve", "source": "asked", "dest": "ok"}, REFUND["transitions"][1]])
    change = transition_table_diff(json.dumps(REFUND), unguarded)["changed"][0]
    assert change["before"]["guards"] == ["if manager"] and change["after"]["guards"] == [] and change["widens"]


def test_a_narrower_procedure_does_not_widen_and_removals_are_listed():
    narrower = _with([{"trigger": "approve", "source": "asked", "dest": "ok", "conditions": "manager",
                       "unless": "frozen"}])
    table = transition_table_diff(json.dumps(REFUND), narrower)
    assert table["removed"] == [{"trigger": "pay", "source": ["ok"], "dest": "paid", "guards": []}]
    assert table["changed"][0]["widens"] is False and table["widens"] is False


def test_added_transitions_and_states_widen_and_a_new_procedure_is_all_added():
    more = _with([*REFUND["transitions"], {"trigger": "skip", "source": ["asked"], "dest": "done"}],
                 states=[*REFUND["states"], "done"])
    table = transition_table_diff(json.dumps(REFUND), more)
    assert [r["trigger"] for r in table["added"]] == ["skip"] and table["states_added"] == ["done"]
    assert table["widens"] is True
    fresh = transition_table_diff(None, json.dumps(REFUND))
    assert len(fresh["added"]) == 2 and fresh["removed"] == []


def test_content_that_is_not_an_fsm_object_gives_no_table():
    assert transition_table_diff(json.dumps(REFUND), "not json") is None
    assert transition_table_diff("[1, 2]", json.dumps(REFUND)) is None
