"""Tenant review policies: schema, semantic checks, evaluation and defaults."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from app.core.policy import (
    CONTENT_SCAN_LIMIT,
    DEFAULT_POLICY,
    SCHEMA_PATH,
    Decision,
    Policy,
    PolicyError,
    WriteRequest,
    default_policy,
    regex_problem,
)
from app.errors import ValidationFailed


def rule(rule_id: str = "r1", action: str = "require_approval", **match: Any) -> dict[str, Any]:
    return {"id": rule_id, "match": match, "action": action}


def problems_of(doc: Any) -> list[dict[str, str]]:
    with pytest.raises(PolicyError) as info:
        Policy.parse(doc)
    return info.value.problems


def paths_of(doc: Any) -> set[str]:
    return {p["path"] for p in problems_of(doc)}


def req(operation: str = "remember", agent_id: str = "agent-1", **kw: Any) -> WriteRequest:
    return WriteRequest(operation, agent_id, **kw)


def single(**match: Any) -> Policy:
    return Policy.parse({"rules": [rule("only", "deny", **match)]})


# --- schema ---------------------------------------------------------------

def test_schema_file_is_valid_2020_12_and_self_contained() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    assert schema["$id"] == "https://schemas.memwarden.dev/policy.json"
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    refs = SCHEMA_PATH.read_text(encoding="utf-8").split('"$ref"')[1:]
    assert refs and all(r.split('"')[1].startswith("#/") for r in refs)  # no external refs


def test_schema_rejects_unknown_fields_with_paths() -> None:
    doc = {"rules": [{**rule(), "priority": 1}], "version": 2}
    doc["rules"][0]["match"]["when"] = "always"
    found = problems_of(doc)
    assert {p["path"] for p in found} == {"/", "/rules/0", "/rules/0/match"}
    assert all("was unexpected" in p["message"] for p in found)


@pytest.mark.parametrize(("doc", "path"), [
    ({}, "/"),
    ([], "/"),
    ({"rules": {}}, "/rules"),
    ({"rules": [rule(rule_id="Bad Id")]}, "/rules/0/id"),
    ({"rules": [rule(rule_id="-leading")]}, "/rules/0/id"),
    ({"rules": [rule(rule_id="a" * 64)]}, "/rules/0/id"),
    ({"rules": [rule(action="maybe")]}, "/rules/0/action"),
    ({"rules": [{"id": "r", "action": "allow"}]}, "/rules/0"),
    ({"rules": [{**rule(), "enabled": "yes"}]}, "/rules/0/enabled"),
    ({"rules": [{**rule(), "description": "x" * 501}]}, "/rules/0/description"),
    ({"rules": [{**rule(), "approvals_required": 3}]}, "/rules/0/approvals_required"),
    ({"rules": [rule(operations=[])]}, "/rules/0/match/operations"),
    ({"rules": [rule(operations=["read"])]}, "/rules/0/match/operations/0"),
    ({"rules": [rule(types=["factual"])]}, "/rules/0/match/types/0"),
    ({"rules": [rule(agents="bot-*")]}, "/rules/0/match/agents"),
    ({"rules": [rule(tags_any=[1])]}, "/rules/0/match/tags_any/0"),
    ({"rules": [rule(content_pattern="x" * 501)]}, "/rules/0/match/content_pattern"),
    ({"rules": [rule(confidence_below=1.5)]}, "/rules/0/match/confidence_below"),
    ({"rules": [rule(hard_delete="true")]}, "/rules/0/match/hard_delete"),
    ({"rules": [rule(rows_affected_above=-1)]}, "/rules/0/match/rows_affected_above"),
    ({"rules": [rule(rows_affected_above=2.5)]}, "/rules/0/match/rows_affected_above"),
    ({"rules": [rule(paths=[""])]}, "/rules/0/match/paths/0"),
    ({"rules": [rule(rule_id=f"r{i}") for i in range(201)]}, "/rules"),
])
def test_schema_rejects_bad_documents(doc: Any, path: str) -> None:
    assert path in paths_of(doc)


def test_policy_error_is_a_plain_value_error_that_lists_its_problems() -> None:
    """The pure core raises no HTTP errors; `tenant_config.set_policy` answers 422 with these problems."""
    with pytest.raises(PolicyError) as info:
        Policy.parse({"rules": [rule(action="nope")]})
    assert isinstance(info.value, ValueError) and not isinstance(info.value, ValidationFailed)
    assert str(info.value) == info.value.problems[0]["message"]


def test_accepts_full_rule_and_max_rules() -> None:
    full = {
        "id": "all-conditions_1", "description": "every field", "enabled": False,
        "match": {"operations": ["remember"], "types": ["semantic"], "agents": ["a*"], "sources": ["s"],
                  "tags_any": ["t"], "content_pattern": "x", "confidence_below": 0.5,
                  "hard_delete": False, "rows_affected_above": 0, "paths": ["*.md"]},
        "action": "require_approval", "approvals_required": 2,
    }
    assert Policy.parse({"rules": [full]}).to_doc() == {"rules": [full]}
    assert len(Policy.parse({"rules": [rule(rule_id=f"r{i}") for i in range(200)]}).rules) == 200
    assert Policy.parse({"rules": []}).rules == ()


# --- semantic checks ------------------------------------------------------

def test_duplicate_ids_rejected() -> None:
    found = problems_of({"rules": [rule("a"), rule("b"), rule("a"), rule("a")]})
    assert [p["path"] for p in found] == ["/rules/2/id", "/rules/3/id"]
    assert "duplicate rule id 'a'" in found[0]["message"]


@pytest.mark.parametrize("pattern", ["(", "[a-", "a{2,1}", "(?P<x>a)(?P<x>b)", "\\"])
def test_bad_regex_rejected(pattern: str) -> None:
    found = problems_of({"rules": [rule(content_pattern=pattern)]})
    assert found[0]["path"] == "/rules/0/match/content_pattern"
    assert found[0]["message"].startswith("invalid regular expression")


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a*)*b", "(\\w+\\s?)*$", "(?:x|y+)*z", "(.*a){20}"])
def test_catastrophic_regex_rejected(pattern: str) -> None:
    assert "/rules/0/match/content_pattern" in paths_of({"rules": [rule(content_pattern=pattern)]})


@pytest.mark.parametrize("pattern", ["(?i)password", "\\b\\d{3}-\\d{2}-\\d{4}\\b", "a+b*c?", "(ab){2,5}",
                                     "(a++)+", "(?>a+)+", "(a{1,3}){2}", "^(secret|token)s?:"])
def test_reasonable_regex_accepted(pattern: str) -> None:
    assert regex_problem(pattern) is None


def test_approvals_required_only_with_require_approval() -> None:
    doc = {"rules": [{**rule("a", "allow"), "approvals_required": 1},
                     {**rule("d", "deny"), "approvals_required": 2},
                     {**rule("r", "require_approval"), "approvals_required": 2}]}
    assert paths_of(doc) == {"/rules/0/approvals_required", "/rules/1/approvals_required"}


def test_schema_and_semantic_problems_reported_together() -> None:
    doc = {"rules": [rule("a", "maybe"), rule("a", content_pattern="(")]}
    assert paths_of(doc) == {"/rules/0/action", "/rules/1/id", "/rules/1/match/content_pattern"}


# --- evaluation -----------------------------------------------------------

def test_no_rules_allows() -> None:
    decision = Policy().evaluate(req())
    assert decision == Decision("allow", 0, None, "no rule matched")


def test_first_matching_rule_wins() -> None:
    policy = Policy.parse({"rules": [
        rule("deny-bots", "deny", agents=["bot-*"]),
        rule("review-forget", "require_approval", operations=["forget"]),
        rule("allow-all", "allow"),
        rule("never-reached", "deny"),
    ]})
    assert policy.evaluate(req("forget", "bot-7")).rule_id == "deny-bots"
    assert policy.evaluate(req("forget", "bot-7")).action == "deny"
    assert policy.evaluate(req("forget", "human")).rule_id == "review-forget"
    assert policy.evaluate(req("remember", "human")) == Decision(
        "allow", 0, "allow-all", "rule 'allow-all' matched")


def test_disabled_rules_are_skipped() -> None:
    policy = Policy.parse({"rules": [{**rule("off", "deny"), "enabled": False}, rule("on", "allow")]})
    assert policy.evaluate(req()).rule_id == "on"


def test_decision_carries_approvals_and_description() -> None:
    policy = Policy.parse({"rules": [{**rule("two", "require_approval"), "approvals_required": 2,
                                      "description": "two people"}]})
    assert policy.evaluate(req()) == Decision("require_approval", 2, "two", "rule 'two': two people")
    assert Policy.parse({"rules": [rule("one")]}).evaluate(req()).approvals_required == 1


def test_empty_match_matches_everything() -> None:
    policy = single()
    for op in ("remember", "forget", "merge", "expire", "delete", "workspace_write", "workspace_delete"):
        assert policy.evaluate(req(op)).action == "deny"


@pytest.mark.parametrize(("match", "hit", "miss"), [
    ({"operations": ["forget", "merge"]}, req("merge"), req("remember")),
    ({"types": ["episodic"]}, req(type="episodic"), req(type="semantic")),
    ({"types": ["episodic"]}, req(type="episodic"), req("forget")),
    ({"agents": ["bot-*", "ops"]}, req(agent_id="bot-1"), req(agent_id="Bot-1")),
    ({"agents": ["ops"]}, req(agent_id="ops"), req(agent_id="ops2")),
    ({"sources": ["slack:*"]}, req(source="slack:#general"), req(source="email")),
    ({"sources": ["slack:*"]}, req(source="slack:x"), req()),
    ({"tags_any": ["pii", "finance"]}, req(tags=["x", "finance"]), req(tags=["x"])),
    ({"tags_any": ["pii"]}, req(tags=("pii",)), req()),
    ({"content_pattern": "(?i)pass(word)?"}, req(content="my PASSWORD is"), req(content="nothing")),
    ({"content_pattern": "x"}, req(content="x"), req()),
    ({"confidence_below": 0.5}, req(confidence=0.49), req(confidence=0.5)),
    ({"confidence_below": 0.5}, req(confidence=0.0), req()),
    ({"hard_delete": True}, req("forget", hard_delete=True), req("forget")),
    ({"hard_delete": False}, req("forget"), req("forget", hard_delete=True)),
    ({"rows_affected_above": 10}, req("forget", rows_affected=11), req("forget", rows_affected=10)),
    ({"rows_affected_above": 0}, req("expire", rows_affected=1), req("remember")),
    ({"paths": ["docs/*.md"]}, req("workspace_write", path="docs/a/b.md"), req("workspace_write", path="src/a.md")),
    ({"paths": ["*.md"]}, req("workspace_write", path="x.md"), req("workspace_write")),
])
def test_each_condition(match: dict[str, Any], hit: WriteRequest, miss: WriteRequest) -> None:
    policy = single(**match)
    assert policy.evaluate(hit).action == "deny"
    assert policy.evaluate(miss) == Decision("allow", 0, None, "no rule matched")


def test_conditions_are_anded() -> None:
    policy = single(operations=["remember"], agents=["bot-*"], tags_any=["pii"])
    assert policy.evaluate(req(agent_id="bot-1", tags=["pii"])).action == "deny"
    assert policy.evaluate(req(agent_id="human", tags=["pii"])).action == "allow"
    assert policy.evaluate(req(agent_id="bot-1", tags=[])).action == "allow"
    assert policy.evaluate(req("forget", agent_id="bot-1", tags=["pii"])).action == "allow"


def test_content_pattern_scans_only_first_64k() -> None:
    policy = single(content_pattern="needle")
    assert policy.evaluate(req(content="x" * (CONTENT_SCAN_LIMIT - 6) + "needle")).action == "deny"
    assert policy.evaluate(req(content="x" * CONTENT_SCAN_LIMIT + "needle")).action == "allow"


def test_agent_requested_approval_is_honoured() -> None:
    review = Decision("require_approval", 1, None, "agent requested approval")
    assert Policy().evaluate(req(approval_required=True)) == review
    assert single().evaluate(req(approval_required=True)).action == "deny"  # deny stays deny
    allow_rule = Policy.parse({"rules": [rule("ok", "allow")]})
    assert allow_rule.evaluate(req(approval_required=True)) == review
    two = Policy.parse({"rules": [{**rule("two"), "approvals_required": 2}]})
    assert two.evaluate(req(approval_required=True)).approvals_required == 2
    assert two.evaluate(req(approval_required=True)).rule_id == "two"


def test_write_request_rejects_unknown_operation() -> None:
    with pytest.raises(ValueError):
        WriteRequest("read", "a")


# --- defaults and round trip ----------------------------------------------

def test_default_policy() -> None:
    policy = default_policy()
    assert [r.id for r in policy.rules] == ["hard-delete-review", "bulk-forget-review"]
    hard = policy.evaluate(req("forget", hard_delete=True, rows_affected=1))
    assert (hard.action, hard.rule_id) == ("require_approval", "hard-delete-review")
    assert policy.evaluate(req("delete", hard_delete=True)).action == "require_approval"
    bulk = policy.evaluate(req("forget", rows_affected=11))
    assert (bulk.action, bulk.rule_id, bulk.approvals_required) == ("require_approval", "bulk-forget-review", 1)
    assert policy.evaluate(req("expire", rows_affected=11)).action == "require_approval"
    assert policy.evaluate(req("forget", rows_affected=3)).action == "allow"
    assert policy.evaluate(req("forget", rows_affected=10)).action == "allow"
    assert policy.evaluate(req("merge", rows_affected=50)).action == "allow"
    assert policy.evaluate(req("remember")).action == "allow"
    assert policy.evaluate(req("workspace_write", path="a.md")).action == "allow"


def test_default_policy_is_not_shared_state() -> None:
    before = copy.deepcopy(DEFAULT_POLICY)
    default_policy().to_doc()["rules"].clear()
    assert DEFAULT_POLICY == before
    assert default_policy() == default_policy()


def test_round_trip() -> None:
    assert default_policy().to_doc() == DEFAULT_POLICY
    doc = {"rules": [
        rule("a", "deny", agents=["x*"], content_pattern="secret"),
        {**rule("b", "require_approval", tags_any=["t"]), "approvals_required": 2, "description": "d"},
        {**rule("c", "allow"), "enabled": False},
    ]}
    policy = Policy.parse(doc)
    assert Policy.parse(policy.to_doc()) == policy
    assert Policy.parse(policy.to_doc()).to_doc() == policy.to_doc()
    # Defaults are spelt out in the canonical form.
    assert policy.to_doc()["rules"][0] == {"id": "a", "enabled": True, "match": {
        "agents": ["x*"], "content_pattern": "secret"}, "action": "deny"}
    assert policy.to_doc()["rules"][1]["approvals_required"] == 2
    json.dumps(policy.to_doc())


def test_evaluation_is_fast() -> None:
    policy = Policy.parse({"rules": [
        rule(f"r{i}", "deny", agents=[f"bot-{i}-*"], content_pattern=f"word{i}\\b") for i in range(200)
    ]})
    request = req(agent_id="human", content="lorem ipsum " * 200)
    started = time.perf_counter()
    for _ in range(200):
        assert policy.evaluate(request).action == "allow"
    per_rule = (time.perf_counter() - started) / (200 * 200)
    assert per_rule < 50e-6  # generous bound; typically ~1 µs
