"""Every route the app serves either accounts for the memory content it answers, or never answers any.

The routes are walked from the app itself (Starlette's route table, the MCP server's tools and
resource templates), not from a list kept here: a route added later without a probe fails
`test_every_route_has_a_probe`. A route that declares it reads memory (`ApiRoute(reads_memory=True)`,
`app.web.reads.ReadingRoute`, an MCP tool mirroring such a route) is driven twice: with room in
the budget it must answer seeded content and record the read for the caller; with the key's budget
spent it must answer 429 `read_budget_exceeded` and none of it. Every other route is driven over
seeded memories whose content carries `MARKER`, and must never answer it."""

from __future__ import annotations

import json

from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
from sqlalchemy import text
from starlette.routing import Mount, Route

from app.api.routes import ApiRoute
from app.main import api_routes, create_app
from app.mcp.tools import TOOLS
from app.services.tenancy.tenant_config import set_read_budget
from app.services.tenancy.users import create_user
from tests.harness import bearer, csrf_token_in, web_sign_in
from tests.schema_check import assert_error

ACTOR = {"kind": "test", "id": "pytest"}
AGENT = "route-a"
SPEND_AGENT = "route-spend"
MARKER = "qx7-lantern-ledger"
ALL_SCOPES = "memory:read,memory:write,review:decide,audit:read,workspace:read,workspace:write,events:read,admin"
PASSWORD = "correct horse battery"
FILE = "notes/route.md"
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@dataclass
class Env:
    client: Any
    ctx: Any
    tenant: Any
    make_key: Callable[..., str]
    writer: dict[str, str]
    ids: list[str] = field(default_factory=list)
    spent_id: str = ""
    pending: str = ""
    decided: str = ""
    ref: str = ""

    def remember(self, content: str, agent_id: str = AGENT) -> str:
        response = self.client.post("/v1/memories/remember", headers=self.writer, json={
            "agent_id": agent_id, "type": "semantic", "content": content})
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def marked(self, n: int = 1) -> list[str]:
        """Fresh memories whose content carries the marker (for probes that end what they touch)."""
        return [self.remember(f"The {MARKER} says berth {i} of the east quay is leased.") for i in range(n)]

    def stage_forget(self, ids: list[str], headers: dict[str, str] | None = None) -> str:
        response = self.client.post("/v1/memories/forget", headers=headers or self.writer, json={
            "agent_id": AGENT, "ids": ids, "approval_required": True})
        assert response.status_code == 202, response.text
        return response.json()["change_id"]


def _seed(client, ctx, tenant, make_key) -> Env:
    env = Env(client, ctx, tenant, make_key, bearer(make_key(scopes=ALL_SCOPES)))
    env.ids = [env.remember(f"The {MARKER} entry {i}: the harbour master keeps ledger {i} in the tower.")
               for i in range(4)]
    env.spent_id = env.remember("A memory read only to spend a budget.", agent_id=SPEND_AGENT)
    put = client.put(f"/v1/host/workspace/files/{FILE}", headers=env.writer,
                     json={"content": f"# Notes\nThe {MARKER} file.\n"})
    assert put.status_code in (200, 201), put.text
    env.pending = env.stage_forget(env.ids[:2])
    env.decided = env.stage_forget(env.ids[2:3])
    rejected = client.post(f"/v1/changes/{env.decided}/reject", headers=bearer(make_key(scopes="review:decide")),
                           json={"reason": "keep it"})
    assert rejected.status_code == 200, rejected.text
    env.ref = client.get("/v1/refs", params={"agent_id": AGENT}, headers=env.writer).json()["memoryRef"]
    return env


def _records(ctx, tenant_id: str, *, key_id: str | None = None, actor: str | None = None) -> list[tuple]:
    with ctx.db.sessions() as session:
        return session.execute(text(
            "SELECT operation, memory_ids FROM read_records WHERE tenant_id = :t "
            "AND (CAST(:k AS text) IS NULL OR key_id = :k) AND (CAST(:a AS text) IS NULL OR actor = :a)"),
            {"t": tenant_id, "k": key_id, "a": actor}).all()


def _key_id(token: str) -> str:
    return "_".join(token.split("_")[1:3])


def _query_of(env: Env) -> str:
    """A recall that finds the seeded memories (and passes the answerability gate)."""
    return f"Which ledger does the harbour master keep in the tower? {MARKER}"


# --- probes: one request per route, reading what the seeded tenant holds --------------------------

Probe = Callable[[Env, dict[str, str]], Any]


@dataclass(frozen=True)
class Reading:
    """How to drive a route that declares it reads memory; `quotes`: its answer carries content
    (a history is budgeted and recorded, yet answers digests only)."""

    probe: Probe
    quotes: bool = True


def _stale(kind: str) -> Probe:
    def probe(env: Env, headers):
        change = env.stage_forget(env.marked(2))
        body = {"seen_state": "not-the-fingerprint", **({"reason": "no"} if kind == "reject" else {})}
        return env.client.post(f"/v1/changes/{change}/{kind}", headers=headers, json=body)
    return probe


def _merge(env: Env, headers):
    canonical, duplicate = env.marked(2)
    return env.client.post("/v1/memories/merge", headers=headers, json={
        "agent_id": AGENT, "canonical": canonical, "duplicates": [duplicate], "strategy": "merge_content"})


READING_API: dict[tuple[str, str], Reading] = {
    ("POST", "/v1/memories/recall"): Reading(lambda env, h: env.client.post(
        "/v1/memories/recall", headers=h, json={"agent_id": AGENT, "query": _query_of(env), "k": 3})),
    ("POST", "/v1/memories/merge"): Reading(_merge),
    ("GET", "/v1/memories"): Reading(lambda env, h: env.client.get(
        "/v1/memories", params={"agent_id": AGENT}, headers=h)),
    ("GET", "/v1/memories/{memory_id}"): Reading(
        lambda env, h: env.client.get(f"/v1/memories/{env.ids[0]}", headers=h)),
    ("GET", "/v1/memories/{memory_id}/history"): Reading(
        lambda env, h: env.client.get(f"/v1/memories/{env.ids[0]}/history", headers=h), quotes=False),
    ("GET", "/v1/changes/{change_id}"): Reading(lambda env, h: env.client.get(f"/v1/changes/{env.decided}", headers=h)),
    ("GET", "/v1/changes/{change_id}/diff"): Reading(
        lambda env, h: env.client.get(f"/v1/changes/{env.pending}/diff", headers=h)),
    ("POST", "/v1/changes/{change_id}/approve"): Reading(_stale("approve")),
    ("POST", "/v1/changes/{change_id}/reject"): Reading(_stale("reject")),
    ("GET", "/v1/refs/{memory_ref}/entries"): Reading(lambda env, h: env.client.get(
        f"/v1/refs/{env.ref}/entries", headers=h)),
    ("GET", "/v1/refs/{memory_ref}/entries/{memory_id}"): Reading(lambda env, h: env.client.get(
        f"/v1/refs/{env.ref}/entries/{env.ids[0]}", headers=h)),
    ("GET", "/v1/host/workspace/files/{path:path}"): Reading(lambda env, h: env.client.get(
        f"/v1/host/workspace/files/{FILE}", headers=h)),
    ("POST", "/memorywire/v0/recall"): Reading(lambda env, h: env.client.post(
        "/memorywire/v0/recall", headers=h, json={"agent_id": AGENT, "query": _query_of(env), "k": 3})),
}


def _get(path: str, **params) -> Probe:
    return lambda env, h: env.client.get(path.format(env=env), params=params or None, headers=h)


def _post(path: str, body: Callable[[Env], dict]) -> Probe:
    return lambda env, h: env.client.post(path.format(env=env), json=body(env), headers=h)


def _delete(path: str) -> Probe:
    return lambda env, h: env.client.delete(path.format(env=env), headers=h)


def _withdraw(env: Env, headers):
    return env.client.post(f"/v1/changes/{env.stage_forget(env.marked(1), headers)}/withdraw", headers=headers)


def _recover_report(env: Env, headers):
    done = env.client.post("/v1/recover", headers=headers, json={"agent": SPEND_AGENT, "since": "2000-01-01T00:00:00Z"})
    assert done.status_code == 200, done.text
    return env.client.get(f"/v1/recover/{done.json()['recover_id']}/report", headers=headers)


def _webhook_then(action: str) -> Probe:
    def probe(env: Env, headers):
        hook = env.client.post("/v1/webhooks", headers=headers, json={"url": "http://127.0.0.1:9/h",
                                                                       "events": ["memory.written"]}).json()["id"]
        if action == "delete":
            return env.client.delete(f"/v1/webhooks/{hook}", headers=headers)
        return env.client.get(f"/v1/webhooks/{hook}/deliveries", headers=headers)
    return probe


QUIET_API: dict[tuple[str, str], Probe] = {
    ("GET", "/v1/whoami"): _get("/v1/whoami"),
    ("GET", "/v1/capabilities"): _get("/v1/capabilities"),
    ("POST", "/v1/memories/remember"): _post("/v1/memories/remember", lambda env: {
        "agent_id": AGENT, "type": "semantic", "content": "A fresh write of the probing key."}),
    ("POST", "/v1/memories/forget"): _post("/v1/memories/forget", lambda env: {
        "agent_id": AGENT, "ids": env.marked(2)}),
    ("POST", "/v1/memories/expire"): _post("/v1/memories/expire", lambda env: {
        "agent_id": AGENT, "policy": {"older_than_days": 0.00001}, "approval_required": True}),
    ("DELETE", "/v1/memories/{memory_id}"): lambda env, h: env.client.delete(
        f"/v1/memories/{env.marked(1)[0]}", headers=h),
    ("GET", "/v1/memories/{memory_id}/deliveries"): _get("/v1/memories/{env.ids[0]}/deliveries"),
    ("GET", "/v1/memories/{memory_id}/readers"): _get("/v1/memories/{env.ids[0]}/readers"),
    ("GET", "/v1/memories/{memory_id}/erasure-receipts"): _get("/v1/memories/{env.ids[0]}/erasure-receipts"),
    ("GET", "/v1/changes"): _get("/v1/changes", status="pending"),
    ("POST", "/v1/changes/{change_id}/withdraw"): _withdraw,
    ("GET", "/v1/audit/export"): _get("/v1/audit/export"),
    ("GET", "/v1/audit/checkpoints"): _get("/v1/audit/checkpoints"),
    ("GET", "/v1/audit/decisions"): _get("/v1/audit/decisions"),
    ("GET", "/v1/audit/access"): _get("/v1/audit/access"),
    ("GET", "/v1/audit/state-check"): _get("/v1/audit/state-check"),
    ("GET", "/v1/audit/public-key"): _get("/v1/audit/public-key"),
    ("GET", "/v1/refs"): _get("/v1/refs", agent_id=AGENT),
    ("POST", "/v1/refs/{memory_ref}/entries"): _post("/v1/refs/{env.ref}/entries", lambda env: {
        "type": "semantic", "content": "A fresh entry of the probing key."}),
    ("DELETE", "/v1/refs/{memory_ref}/entries/{memory_id}"): lambda env, h: env.client.delete(
        f"/v1/refs/{env.ref}/entries/{env.marked(1)[0]}", headers=h),
    ("POST", "/v1/runs"): _post("/v1/runs", lambda env: {"agent_id": AGENT}),
    ("GET", "/v1/events"): _get("/v1/events", once="1", after="0"),
    ("POST", "/v1/webhooks"): _post("/v1/webhooks", lambda env: {"url": "http://127.0.0.1:9/hook",
                                                                 "events": ["memory.written"]}),
    ("GET", "/v1/webhooks"): _get("/v1/webhooks"),
    ("DELETE", "/v1/webhooks/{webhook_id}"): _webhook_then("delete"),
    ("GET", "/v1/webhooks/{webhook_id}/deliveries"): _webhook_then("deliveries"),
    ("GET", "/v1/host/workspace/files"): _get("/v1/host/workspace/files"),
    ("PUT", "/v1/host/workspace/files/{path:path}"): lambda env, h: env.client.put(
        "/v1/host/workspace/files/notes/other.md", headers=h, json={"content": "Another file."}),
    ("DELETE", "/v1/host/workspace/files/{path:path}"): _delete(f"/v1/host/workspace/files/{FILE}"),
    ("POST", "/v1/recover"): _post("/v1/recover", lambda env: {
        "agent": AGENT, "since": "2000-01-01T00:00:00Z", "dry_run": True}),
    ("GET", "/v1/recover/report"): _get("/v1/recover/report", agent=AGENT, since="2000-01-01T00:00:00Z"),
    ("GET", "/v1/recover/{recover_id}/report"): _recover_report,
    ("GET", "/v1/policy"): _get("/v1/policy"),
    ("PUT", "/v1/policy"): lambda env, h: env.client.put("/v1/policy", headers=h, json={"policy": {"rules": [
        {"id": "review-all", "match": {"operations": ["remember"]}, "action": "require_approval"}]}}),
    ("POST", "/v1/policy/backtest"): _post("/v1/policy/backtest", lambda env: {"policy": {"rules": [
        {"id": "trust-all", "match": {"agents": [AGENT]}, "action": "allow"}]}}),
    ("POST", "/v1/consolidate"): _post("/v1/consolidate", lambda env: {"agent_id": AGENT, "dry_run": True}),
    ("GET", "/v1/policy/suggestions"): _get("/v1/policy/suggestions"),
    ("GET", "/v1/policy/canaries"): _get("/v1/policy/canaries"),
    ("PUT", "/v1/policy/canaries"): lambda env, h: env.client.put("/v1/policy/canaries", headers=h, json={
        "enabled": False, "one_in": 5}),
    ("POST", "/v1/policy/suggestions/{suggestion_id}/accept"): _post(
        "/v1/policy/suggestions/sug_00000000000000000000000000/accept", lambda env: {}),
    ("POST", "/v1/policy/suggestions/{suggestion_id}/dismiss"): _post(
        "/v1/policy/suggestions/sug_00000000000000000000000000/dismiss", lambda env: {}),
    ("POST", "/memorywire/v0/remember"): _post("/memorywire/v0/remember", lambda env: {
        "agent_id": AGENT, "type": "semantic", "content": "A fresh memorywire write."}),
    ("POST", "/memorywire/v0/forget"): _post("/memorywire/v0/forget", lambda env: {
        "agent_id": AGENT, "ids": env.marked(2)}),
    ("POST", "/memorywire/v0/merge"): lambda env, h: env.client.post("/memorywire/v0/merge", headers=h, json={
        "agent_id": AGENT, **dict(zip(("canonical", "duplicates"), (lambda ids: (ids[0], ids[1:]))(env.marked(2)))),
        "strategy": "merge_content"}),
    ("POST", "/memorywire/v0/expire"): _post("/memorywire/v0/expire", lambda env: {
        "agent_id": AGENT, "policy": {"older_than_days": 0.00001}, "approval_required": True}),
}


# --- web pages (a signed-in admin: every power) ----------------------------------------------------

WebProbe = Callable[[Env], Callable[[], Any]]
"""Prepares what the page needs (a change, a CSRF token), then returns the one request to drive."""


def _page(path: str, **params) -> WebProbe:
    return lambda env: lambda: env.client.get(path.format(env=env), params=params or None)


def _web_decide(env: Env):
    change = env.stage_forget(env.marked(2))
    token = csrf_token_in(env.client.get(f"/review/{change}").text)
    return lambda: env.client.post(f"/review/{change}/approve", data={"csrf_token": token, "seen_state": "stale"},
                                   headers={"HX-Request": "true"})


def _web_bulk(env: Env):
    change = env.stage_forget(env.marked(2))
    token = csrf_token_in(env.client.get(f"/review/{change}").text)
    return lambda: env.client.post("/review/bulk", data={"csrf_token": token, "action": "approve",
                                                         "change_id": change})


READING_WEB: dict[tuple[str, str], WebProbe] = {
    ("GET", "/memories"): _page("/memories"),
    ("GET", "/memories/{memory_id}"): _page("/memories/{env.ids[0]}"),
    ("GET", "/review"): _page("/review"),
    ("GET", "/review/rows"): _page("/review/rows", since=""),
    ("GET", "/review/{change_id}"): _page("/review/{env.pending}"),
    ("GET", "/review/{change_id}/peek"): _page("/review/{env.pending}/peek"),
    ("POST", "/review/{change_id}/{kind:str}"): _web_decide,
    ("POST", "/review/bulk"): _web_bulk,
    ("GET", "/audit/incident"): _page("/audit/incident", kind="agent", value=AGENT, since="2000-01-01T00:00:00Z"),
}

UNPROBED_WEB = {
    ("GET", "/review/stream"): "an endless event stream (app.web.review_stream): ids, statuses and names only",
}


def _web_post(path: str) -> WebProbe:
    def probe(env: Env):
        token = csrf_token_in(env.client.get("/admin").text)
        return lambda: env.client.post(path, data={"csrf_token": token})
    return probe


QUIET_WEB: dict[tuple[str, str], WebProbe] = {
    ("GET", "/"): _page("/"),
    ("GET", "/favicon.ico"): _page("/favicon.ico"),
    ("GET", "/login"): _page("/login"),
    ("GET", "/login/oidc"): _page("/login/oidc"),
    ("GET", "/login/oidc/callback"): _page("/login/oidc/callback", code="x", state="y"),
    ("GET", "/review/{change_id}/live"): _page("/review/{env.decided}/live"),
    ("GET", "/audit"): _page("/audit"),
    ("GET", "/audit/export"): _page("/audit/export"),
    ("GET", "/audit/receipts.jsonl"): _page("/audit/receipts.jsonl"),
    ("GET", "/audit/decisions"): _page("/audit/decisions"),
    ("GET", "/audit/decisions.csv"): _page("/audit/decisions.csv"),
    ("GET", "/audit/decisions.json"): _page("/audit/decisions.json"),
    ("GET", "/audit/incident.json"): _page("/audit/incident.json", kind="agent", value=AGENT,
                                           since="2000-01-01T00:00:00Z"),
    ("GET", "/admin"): _page("/admin"),
    ("GET", "/admin/suggestions"): _page("/admin/suggestions"),
}
"""GET pages; every POST page not reading memory is posted an empty form (`_web_post`)."""

STATIC = {"/healthz", "/readyz", "/metrics", "/openapi.json"}

SNAPSHOT_EXPORTS = {("GET", "/v1/audit/export"), ("GET", "/audit/export"), ("POST", "/audit/verify")}
"""These read the chain in a snapshot transaction of their own, which the tests' rolled-back outer
transaction cannot start (a 500 here only): what they would answer, the chain, is scanned directly
(`_assert_chain_holds_no_content`)."""


def _assert_chain_holds_no_content(env: Env) -> None:
    with env.ctx.db.sessions() as session:
        found = session.execute(text("SELECT count(*) FROM audit_entries WHERE convert_from(entry, 'UTF8') LIKE :m"),
                                {"m": f"%{MARKER}%"}).scalar()
    assert found == 0, "memory content reached the audit chain"


def _web_routes(app) -> dict[tuple[str, str], Route]:
    """Every page route (not the bearer APIs, MCP, probes or static files), by (method, path)."""
    api = {id(r) for r in app.routes if isinstance(r, ApiRoute)}
    found = {}
    for route in app.routes:
        if isinstance(route, Mount) or id(route) in api or not isinstance(route, Route) or route.name == "mcp":
            continue
        if route.path in STATIC or route.path.startswith("/.well-known/"):
            continue
        for method in sorted((route.methods or set()) - {"HEAD"}):
            found[(method, route.path)] = route
    return found


def _api_routes() -> dict[tuple[str, str], ApiRoute]:
    return {(r.operation.method, r.operation.path): r for r in api_routes()}


# --- MCP -------------------------------------------------------------------------------------------

TOOL_ARGS: dict[str, Callable[[Env], dict[str, Any]]] = {
    "remember": lambda env: {"agent_id": AGENT, "type": "semantic", "content": "A fresh MCP write."},
    "recall": lambda env: {"agent_id": AGENT, "query": _query_of(env), "k": 3},
    "forget": lambda env: {"agent_id": AGENT, "ids": env.marked(2)},
    "merge": lambda env: (lambda ids: {"agent_id": AGENT, "canonical": ids[0], "duplicates": ids[1:],
                                       "strategy": "merge_content"})(env.marked(2)),
    "expire": lambda env: {"agent_id": AGENT, "policy": {"older_than_days": 0.00001}, "approval_required": True},
    "get": lambda env: {"id": env.ids[0]},
    "list": lambda env: {"agent_id": AGENT},
    "history": lambda env: {"id": env.ids[0]},
    "change_status": lambda env: {"id": env.decided},
}


def _rpc(client, headers, method: str, params: dict[str, Any]):
    response = client.post("/mcp", headers={**headers, **MCP_HEADERS},
                           json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert response.status_code == 200, response.text
    return response


def _mcp_json(response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return response.json()


def _tools_listed(env: Env) -> dict[str, Any]:
    listed = _mcp_json(_rpc(env.client, env.writer, "tools/list", {}))["result"]["tools"]
    mirrored = {tool.name: tool for tool in TOOLS}
    missing = sorted(t["name"] for t in listed if t["name"] not in mirrored)
    assert not missing, f"MCP tools mirroring no /v1 route: {missing}"
    return {t["name"]: mirrored[t["name"]] for t in listed}


def _tool_reads(tool) -> bool:
    route = _api_routes().get(tool.route)
    assert route is not None, f"MCP tool {tool.name} mirrors {tool.route}, which no route serves"
    return route.operation.reads_memory


# --- drivers ---------------------------------------------------------------------------------------

def _budget(env: Env, per_key: int) -> None:
    set_read_budget(env.ctx, tenant_id=env.tenant.id, actor=ACTOR, per_key=per_key, per_agent=0)


def _spent_key(env: Env) -> tuple[dict[str, str], str]:
    """A fresh key whose budget of one is spent on a memory no probe answers."""
    token = env.make_key(scopes=ALL_SCOPES)
    headers = bearer(token)
    assert env.client.get(f"/v1/memories/{env.spent_id}", headers=headers).status_code == 200
    assert_error(env.client.get(f"/v1/memories/{env.ids[0]}", headers=headers), 429, "read_budget_exceeded")
    return headers, _key_id(token)


def _fresh_key(env: Env) -> tuple[dict[str, str], str]:
    token = env.make_key(scopes=ALL_SCOPES)
    return bearer(token), _key_id(token)


@pytest.fixture
def env(client, ctx, tenant, make_key) -> Env:
    return _seed(client, ctx, tenant, make_key)


def test_every_route_has_a_probe(client):
    """A route nobody drives is a route nobody checked: each one the app serves is probed here."""
    api = _api_routes()
    unprobed = sorted(set(api) - set(READING_API) - set(QUIET_API))
    assert not unprobed, f"routes with no probe (declare reads_memory and add one): {unprobed}"
    stale = sorted((set(READING_API) | set(QUIET_API)) - set(api))
    assert not stale, f"probes of routes that no longer exist: {stale}"
    declared = {key for key, route in api.items() if route.operation.reads_memory}
    assert declared == set(READING_API), (
        f"declared reads_memory but probed as quiet: {sorted(declared - set(READING_API))}; "
        f"probed as reading but not declared: {sorted(set(READING_API) - declared)}")
    web = _web_routes(client.app)
    posts = {key for key in web if key[0] == "POST"}
    unprobed = sorted(set(web) - set(READING_WEB) - set(QUIET_WEB) - set(UNPROBED_WEB) - posts)
    assert not unprobed, f"pages with no probe: {unprobed}"
    reading = {key for key, route in web.items() if getattr(route, "reads_memory", False)}
    assert reading == set(READING_WEB), (
        f"ReadingRoute without a reading probe: {sorted(reading - set(READING_WEB))}; "
        f"reading probes of routes not declared: {sorted(set(READING_WEB) - reading)}")


def _route_id(key: tuple[str, str]) -> str:
    return f"{key[0]} {key[1]}"


@pytest.mark.parametrize("key", sorted(READING_API), ids=_route_id)
def test_a_declared_route_records_its_reads_and_stops_at_the_budget(env, key):
    reading = READING_API[key]
    _budget(env, 10_000)
    headers, key_id = _fresh_key(env)
    answered = reading.probe(env, headers)
    assert answered.status_code < 500, answered.text
    if reading.quotes:
        assert MARKER in answered.text, f"{key}: the probe reached no content ({answered.status_code})"
    assert _records(env.ctx, env.tenant.id, key_id=key_id), f"{key}: answered memory and recorded no read"

    _budget(env, 1)
    headers, key_id = _spent_key(env)
    before = _records(env.ctx, env.tenant.id, key_id=key_id)
    refused = reading.probe(env, headers)
    assert_error(refused, 429, "read_budget_exceeded")
    assert MARKER not in refused.text
    assert _records(env.ctx, env.tenant.id, key_id=key_id) == before, f"{key}: a refused read was recorded"


def test_no_undeclared_route_answers_memory_content(env):
    _budget(env, 10_000)
    leaks, errors = [], []
    for key, probe in sorted(QUIET_API.items()):
        headers, _ = _fresh_key(env)
        response = probe(env, headers)
        if response.status_code >= 500 and key not in SNAPSHOT_EXPORTS:
            errors.append((key, response.status_code))
        if MARKER in response.text:
            leaks.append(key)
    assert not errors, f"routes answering a server error: {errors}"
    assert not leaks, f"routes answering memory content without accounting for it: {leaks}"
    _assert_chain_holds_no_content(env)


def _sign_in_admin(env: Env):
    user = create_user(env.ctx, username=f"adm-{env.tenant.name}", password=PASSWORD, tenant_id=env.tenant.id,
                       role="admin", actor=ACTOR)
    assert web_sign_in(env.client, user.username, PASSWORD).status_code == 303
    return f"user:{user.id}"


@pytest.mark.parametrize("key", sorted(READING_WEB), ids=_route_id)
def test_a_page_that_shows_memory_records_it(env, key):
    actor = _sign_in_admin(env)
    drive = READING_WEB[key](env)
    before = len(_records(env.ctx, env.tenant.id, actor=actor))
    response = drive()
    assert response.status_code < 500, response.text
    assert MARKER in response.text, f"{key}: the probe reached no content ({response.status_code})"
    assert len(_records(env.ctx, env.tenant.id, actor=actor)) > before, f"{key}: a page showed memory, no read"


def test_no_undeclared_page_shows_memory_content(env):
    _sign_in_admin(env)
    web = _web_routes(env.client.app)
    leaks, errors = [], []
    for key in sorted(web):
        if key in READING_WEB or key in UNPROBED_WEB:
            continue
        probe = QUIET_WEB.get(key) or _web_post(_filled(key[1], env))
        response = probe(env)()
        if response.status_code >= 500 and key not in SNAPSHOT_EXPORTS:
            errors.append((key, response.status_code))
        if MARKER in response.text:
            leaks.append(key)
    assert not errors, f"pages answering a server error: {errors}"
    assert not leaks, f"pages showing memory content without recording it: {leaks}"
    _assert_chain_holds_no_content(env)


def _filled(path: str, env: Env) -> str:
    """A POST page's path with its parameters filled: ids of this tenant where there are some."""
    import re

    return re.sub(r"\{([a-z_]+)(:[a-z]+)?\}", lambda m: {"change_id": env.pending}.get(m.group(1), "x1"), path)


def _tool_call(env: Env, headers, name: str) -> dict[str, Any]:
    return _mcp_json(_rpc(env.client, headers, "tools/call", {"name": name, "arguments": TOOL_ARGS[name](env)}))


def test_mcp_tools_and_resources_account_for_what_they_answer(env):
    tools = _tools_listed(env)
    assert not sorted(set(tools) - set(TOOL_ARGS)), "MCP tools with no probe arguments"
    for name, tool in sorted(tools.items()):
        _budget(env, 10_000)
        headers, key_id = _fresh_key(env)
        answered = _tool_call(env, headers, name)
        text_of = str(answered)
        assert not answered["result"].get("isError"), (name, text_of)
        if not _tool_reads(tool):
            assert MARKER not in text_of, f"MCP tool {name} answers memory content without accounting for it"
            continue
        if name != "history":
            assert MARKER in text_of, f"MCP tool {name}: the probe reached no content"
        assert _records(env.ctx, env.tenant.id, key_id=key_id), f"MCP tool {name} recorded no read"
        _budget(env, 1)
        headers, _ = _spent_key(env)
        refused = _tool_call(env, headers, name)
        assert refused["result"].get("isError"), (name, refused)
        assert json.loads(refused["result"]["content"][0]["text"])["error"]["code"] == "read_budget_exceeded"
        assert MARKER not in str(refused)

    templates = _mcp_json(_rpc(env.client, env.writer, "resources/templates/list", {}))["result"]["resourceTemplates"]
    assert [t["name"] for t in templates] == ["recall"], "a resource template with no probe"
    uri = f"memwarden://recall?agent_id={AGENT}&query={_query_of(env).replace(' ', '+')}&k=3"
    _budget(env, 10_000)
    headers, key_id = _fresh_key(env)
    read = _mcp_json(_rpc(env.client, headers, "resources/read", {"uri": uri}))
    assert MARKER in str(read["result"]) and _records(env.ctx, env.tenant.id, key_id=key_id)
    _budget(env, 1)
    headers, _ = _spent_key(env)
    refused = _mcp_json(_rpc(env.client, headers, "resources/read", {"uri": uri}))
    assert refused["error"]["data"]["error"]["code"] == "read_budget_exceeded" and MARKER not in str(refused)


def test_the_app_serves_no_route_this_test_cannot_see(ctx):
    """The walk above starts from `api_routes()` and the app's table: both must name the same API."""
    app = create_app(ctx.settings, ctx=ctx)
    served = {(m, r.path) for r in app.routes if isinstance(r, ApiRoute) for m in r.methods - {"HEAD"}}
    assert served == set(_api_routes())
