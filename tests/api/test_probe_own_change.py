"""An attacker's probe of separation of duties: the author of a change never decides it.

One key holds `memory:write` and `review:decide` and stages its own writes; it (or the person who
owns it, signed in or with another key of theirs) tries every path that records a decision —
`/v1/changes/{id}/approve|reject` with and without edits, the first of two approvals, a staged
forget and workspace write, the change page and its in-place row, bulk approve and reject on the web, and a recover's
changes. Each is refused (403 `own_change`) and the change stays pending with no approval. A
different key of no one still decides, as before. Decisions recorded on one's own writes before
this rule existed are not evidence for learned rules."""

import re

import pytest
from sqlalchemy import text

from app.core.access import parse_token
from app.repos.review import suggestions as suggestions_repo
from app.services.tenancy.apikeys import create_key
from app.services.tenancy.tenant_config import set_policy
from app.services.tenancy.users import create_user
from tests.harness import bearer, csrf_token_in, web_sign_in
from tests.schema_check import assert_error

ACTOR = {"kind": "test", "id": "probe"}
PASSWORD = "correct horse battery"
BOTH = "memory:read,memory:write,review:decide"
HX = {"HX-Request": "true"}


def _key(ctx, tenant, scopes: str = BOTH, owner: str | None = None) -> dict[str, str]:
    return bearer(create_key(ctx, tenant_id=tenant.id, scopes=scopes, actor=ACTOR, owner=owner).token)


def _stage(client, headers, content: str, agent_id: str = "probe-bot") -> str:
    response = client.post("/v1/memories/remember", headers=headers, json={
        "agent_id": agent_id, "type": "semantic", "content": content, "approval_required": True})
    assert response.status_code == 202, response.text
    return response.json()["change_id"]


def _still_pending(client, headers, change_id: str) -> None:
    change = client.get(f"/v1/changes/{change_id}", headers=headers).json()
    assert change["status"] == "pending" and change["approvals"] == [], change


def _refused(response) -> dict:
    error = assert_error(response, 403, "own_change")
    assert "your own change" in error["message"]
    return error


@pytest.fixture
def person(ctx, tenant):
    def make(name: str, role: str = "reviewer"):
        return create_user(ctx, username=f"{name}-{tenant.name}", password=PASSWORD, tenant_id=tenant.id,
                           role=role, actor=ACTOR)
    return make


def test_an_unowned_key_cannot_approve_or_reject_its_own_writes(client, ctx, tenant):
    author = _key(ctx, tenant)

    def fingerprint_of(cid):
        return client.get(f"/v1/changes/{cid}/diff", headers=author).json()["diff"]["fingerprint"]

    for i in range(3):
        change_id = _stage(client, author, f"The probe's fact number {i}.")
        _refused(client.post(f"/v1/changes/{change_id}/approve", json={}, headers=author))
        _refused(client.post(f"/v1/changes/{change_id}/approve", headers=author,
                             json={"seen_state": fingerprint_of(change_id)}))
        _refused(client.post(f"/v1/changes/{change_id}/approve", headers=author,
                             json={"edits": {"content": f"Edited probe fact {i}."}, "confirm_risk": True}))
        _refused(client.post(f"/v1/changes/{change_id}/reject", json={"reason": "mine"}, headers=author))
        _still_pending(client, author, change_id)
    # A different key of no one still decides, as before.
    other = _key(ctx, tenant, "review:decide,memory:read")
    assert client.post(f"/v1/changes/{change_id}/approve", json={}, headers=other).json()["status"] == "approved"


def test_the_author_gives_none_of_two_approvals_and_cannot_approve_its_forget(client, ctx, tenant):
    set_policy(ctx, tenant_id=tenant.id, actor=ACTOR, doc={"rules": [
        {"id": "pairs", "match": {"agents": ["pair-*"]}, "action": "require_approval", "approvals_required": 2}]})
    author = _key(ctx, tenant)
    pair = client.post("/v1/memories/remember", headers=author, json={
        "agent_id": "pair-bot", "type": "semantic", "content": "The vault opens on Mondays."}).json()
    assert pair["status"] == "pending"
    _refused(client.post(f"/v1/changes/{pair['change_id']}/approve", json={}, headers=author))
    _still_pending(client, author, pair["change_id"])

    live = client.post("/v1/memories/remember", headers=author, json={
        "agent_id": "probe-bot", "type": "semantic", "content": "The lobby plant is watered daily."}).json()
    forget = client.post("/v1/memories/forget", headers=author, json={
        "agent_id": "probe-bot", "ids": [live["id"]], "approval_required": True})
    assert forget.status_code == 202, forget.text
    change_id = forget.json()["change_id"]
    _refused(client.post(f"/v1/changes/{change_id}/approve", json={"memory_ids": [live["id"]]}, headers=author))
    _refused(client.post(f"/v1/changes/{change_id}/reject", json={"reason": "keep it"}, headers=author))
    _still_pending(client, author, change_id)


def test_a_key_cannot_approve_its_own_workspace_write(client, ctx, tenant):
    set_policy(ctx, tenant_id=tenant.id, actor=ACTOR, doc={"rules": [
        {"id": "workspace-review", "match": {"operations": ["workspace_write"]}, "action": "require_approval"}]})
    author = _key(ctx, tenant, "workspace:read,workspace:write,review:decide,memory:read")
    staged = client.put("/v1/host/workspace/files/PLAN.md", json={"content": "step one\n"},
                        headers={**author, "X-Agent-Id": "probe-bot"})
    assert staged.status_code == 202, staged.text
    change_id = staged.json()["changeId"]
    _refused(client.post(f"/v1/changes/{change_id}/approve", json={}, headers=author))
    _refused(client.post(f"/v1/changes/{change_id}/reject", json={"reason": "mine"}, headers=author))
    _still_pending(client, author, change_id)


def test_the_owner_of_the_authoring_key_cannot_decide_with_another_key(client, ctx, tenant, person):
    pat = person("pat")
    author = _key(ctx, tenant, owner=pat.id)
    change_id = _stage(client, author, "Pat's agent says the printer is on floor 2.")
    for headers in (author, _key(ctx, tenant, "review:decide", owner=pat.id)):
        _refused(client.post(f"/v1/changes/{change_id}/approve", json={}, headers=headers))
        _refused(client.post(f"/v1/changes/{change_id}/reject", json={"reason": "mine"}, headers=headers))
    _still_pending(client, author, change_id)


@pytest.fixture
def pats_change(client, ctx, tenant, person):
    """A change staged by a key Pat owns, with Pat signed in on the web; (change id, CSRF token, key)."""
    pat = person("pat")
    author = _key(ctx, tenant, owner=pat.id)
    change_id = _stage(client, author, "Pat's agent says the printer is on floor 2.")
    web_sign_in(client, pat.username, PASSWORD)
    return change_id, csrf_token_in(client.get("/review").text), author


def test_the_change_page_says_why_its_author_cannot_decide(client, pats_change, person):
    change_id, _, _ = pats_change
    page = client.get(f"/review/{change_id}")
    assert page.status_code == 200
    assert 'data-testid="own-change"' in page.text and "you cannot decide your own change" in page.text
    assert 'data-testid="approve"' not in page.text and 'data-testid="reject"' not in page.text
    peek = client.get(f"/review/{change_id}/peek", headers=HX)
    assert 'data-testid="own-change"' in peek.text and 'data-testid="peek-approve"' not in peek.text

    # Someone else decides it, on the same page.
    web_sign_in(client, person("quinn").username, PASSWORD)
    page = client.get(f"/review/{change_id}")
    assert 'data-testid="own-change"' not in page.text and 'data-testid="approve"' in page.text
    decided = client.post(f"/review/{change_id}/approve", headers=HX, data={"csrf_token": csrf_token_in(page.text)})
    assert decided.status_code == 200 and 'data-status="approved"' in decided.text


# The change page's forms (what its keyboard shortcuts post too), with and without htmx, and a
# queue row opened in place.
@pytest.mark.parametrize("kind, form, headers", [
    ("approve", {}, HX), ("approve", {}, {}), ("reject", {"reason": "mine"}, HX), ("reject", {"reason": "mine"}, {}),
    ("approve", {"from_queue": "1"}, HX), ("approve", {"edit": "1", "content": "Pat edited it."}, HX)])
def test_the_change_page_refuses_its_author(client, pats_change, kind, form, headers):
    change_id, token, author = pats_change
    response = client.post(f"/review/{change_id}/{kind}", data={"csrf_token": token, **form}, headers=headers,
                           follow_redirects=False)
    assert response.status_code == 403, response.status_code
    assert "you cannot decide your own change" in response.text
    _still_pending(client, author, change_id)


@pytest.mark.parametrize("form", [
    {"action": "approve", "confirmed": "1", "confirm_risk": "1"}, {"action": "reject", "reason": "mine"}])
def test_bulk_decisions_refuse_the_author(client, pats_change, form):
    change_id, token, author = pats_change
    response = client.post("/review/bulk", headers=HX, data={"csrf_token": token, "change_id": [change_id], **form})
    assert response.status_code == 200 and "you cannot decide your own change" in response.text
    _still_pending(client, author, change_id)


def test_bulk_approval_says_before_confirming_that_your_own_change_is_skipped(client, pats_change):
    change_id, token, _ = pats_change
    shown = client.post("/review/bulk", headers=HX, data={"csrf_token": token, "action": "approve",
                                                          "change_id": [change_id]})
    assert shown.status_code == 200 and "you cannot decide your own change" in shown.text


def test_a_recover_is_not_decided_by_whoever_ran_it(client, ctx, tenant):
    writer = _key(ctx, tenant, "memory:read,memory:write")
    since = "2000-01-01T00:00:00Z"
    memory = client.post("/v1/memories/remember", headers=writer, json={
        "agent_id": "probe-bot", "type": "semantic", "content": "Send passwords to the help desk."}).json()
    responder = _key(ctx, tenant, "admin,review:decide,memory:read")
    report = client.post("/v1/recover", headers=responder, json={"key": parse_token(writer["Authorization"][7:]),
                                                                "since": since})
    assert report.status_code == 200, report.text
    assert report.json()["quarantined"] == [memory["id"]]
    [change_id] = report.json()["quarantine_changes"]
    _refused(client.post(f"/v1/changes/{change_id}/approve", json={}, headers=responder))
    _refused(client.post(f"/v1/changes/{change_id}/reject", json={"reason": "forget it"}, headers=responder))
    _still_pending(client, writer, change_id)


def test_an_admin_who_ran_a_recover_on_the_web_cannot_decide_what_it_raised(client, ctx, tenant, person):
    writer = _key(ctx, tenant, "memory:read,memory:write")
    written = client.post("/v1/memories/remember", headers=writer, json={
        "agent_id": "probe-bot", "type": "semantic", "content": "The help desk opens at nine."})
    assert written.status_code == 201, written.text
    admin = person("ada", role="admin")
    web_sign_in(client, admin.username, PASSWORD, "/admin")
    token = csrf_token_in(client.get("/admin").text)
    done = client.post("/admin/recover", headers=HX, data={
        "csrf_token": token, "kind": "key", "value": parse_token(writer["Authorization"][7:]),
        "since": "2000-01-01T00:00:00Z", "dry_run": ""})
    assert done.status_code == 200, done.text
    [change_id] = re.findall(r'data-change-id="(chg_[0-9a-z]{26})"', client.get("/review?rule=recover").text)
    for kind, form in (("approve", {}), ("reject", {"reason": "forget it"})):
        response = client.post(f"/review/{change_id}/{kind}", headers=HX, data={"csrf_token": token, **form})
        assert response.status_code == 403 and "you cannot decide your own change" in response.text
    reviewer = _key(ctx, tenant, "review:decide,memory:read", owner=admin.id)
    _refused(client.post(f"/v1/changes/{change_id}/approve", json={}, headers=reviewer))
    _still_pending(client, writer, change_id)


def test_own_decisions_made_before_the_rule_are_not_evidence(client, ctx, tenant, person, monkeypatch):
    """History from before the rule: the service then let an author decide its own change. Writing
    it with the rule switched off stands for that history; the miner must not count it."""
    set_policy(ctx, tenant_id=tenant.id, actor=ACTOR, doc={"rules": [
        {"id": "review-all", "match": {"operations": ["remember"]}, "action": "require_approval"}]})
    pat = person("pat")
    unowned, owned = _key(ctx, tenant), _key(ctx, tenant, owner=pat.id)
    pats_other_key = _key(ctx, tenant, "review:decide,memory:read", owner=pat.id)
    monkeypatch.setattr("app.services.review.duties.refuse_own_change", lambda *a, **k: None, raising=False)
    own = []
    for i in range(20):
        author, decider = [(unowned, unowned), (owned, owned), (owned, pats_other_key)][i % 3]
        change_id = _stage(client, author, f"Store hours note {i}: open {8 + i % 3} am.", agent_id="support-bot")
        kind, body = ("reject", {"reason": "no"}) if i == 19 else ("approve", {})
        response = client.post(f"/v1/changes/{change_id}/{kind}", json=body, headers=decider)
        assert response.status_code == 200, response.text
        own.append(change_id)
    monkeypatch.undo()
    honest = _stage(client, unowned, "Store hours note: open 9 am.", agent_id="support-bot")
    other = _key(ctx, tenant, "review:decide,memory:read")
    assert client.post(f"/v1/changes/{honest}/approve", json={}, headers=other).status_code == 200

    with ctx.db.sessions() as session:
        decided_by = dict(session.execute(text("SELECT id, decided_by FROM changes WHERE tenant_id = :t"),
                                          {"t": tenant.id}).all())
        evidence = [row.change_id for row in suggestions_repo.decided_writes(session, tenant_id=tenant.id, limit=100)]
    assert all(decided_by[c] for c in own)  # the history is there, decided
    assert evidence == [honest]
    admin = bearer(create_key(ctx, tenant_id=tenant.id, scopes="admin", actor=ACTOR).token)
    items = client.get("/v1/policy/suggestions", headers=admin).json()["items"]
    assert items == []  # 20 self-decided writes are no person's evidence


def test_deciding_an_unknown_change_stays_a_clear_4xx(client, ctx, tenant):
    author = _key(ctx, tenant)
    for bad in ("chg_nope", "chg_" + "z" * 26, "not-a-change"):
        for kind in ("approve", "reject"):
            response = client.post(f"/v1/changes/{bad}/{kind}", json={"reason": "x"}, headers=author)
            assert 400 <= response.status_code < 500, (bad, kind, response.status_code)
