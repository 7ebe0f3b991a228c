"""The two-person rule counts people, not credentials: an API key can belong to a person,
and its approvals are recorded as that person's, so one person holding a `review:decide` key and a
sign-in (or two keys) cannot give both approvals. A key of no one still approves (as before), and
says so wherever approvals are shown; a tenant may refuse it on two-person changes."""

import pytest
from sqlalchemy import text

from app.core.access import parse_token
from app.services.tenancy.apikeys import create_key
from app.services.tenancy.tenant_config import set_policy, set_two_person_owned_keys
from app.services.tenancy.users import create_user
from tests.harness import bearer, csrf_token_in, web_sign_in
from tests.schema_check import assert_error

ACTOR = {"kind": "test", "id": "t"}
PASSWORD = "correct horse battery"


@pytest.fixture
def two_person(ctx, tenant):
    set_policy(ctx, tenant_id=tenant.id, actor=ACTOR, doc={"rules": [
        {"id": "pairs", "match": {"agents": ["pair-*"]}, "action": "require_approval", "approvals_required": 2}]})


@pytest.fixture
def person(ctx, tenant):
    """Make a reviewer of the test tenant; returns the User."""
    def make(name: str):
        return create_user(ctx, username=f"{name}-{tenant.name}", password=PASSWORD, tenant_id=tenant.id,
                           role="reviewer", actor=ACTOR)
    return make


def _key(ctx, tenant, owner=None) -> dict[str, str]:
    return bearer(create_key(ctx, tenant_id=tenant.id, scopes="review:decide,memory:read", actor=ACTOR,
                             owner=owner).token)


def _stage(client, agent, content: str) -> str:
    response = client.post("/v1/memories/remember", headers=agent, json={
        "agent_id": "pair-bot", "type": "semantic", "content": content})
    assert response.json()["status"] == "pending"
    return response.json()["change_id"]


def _ui_approve(client, username: str, change_id: str):
    web_sign_in(client, username, PASSWORD)
    token = csrf_token_in(client.get(f"/review/{change_id}").text)
    response = client.post(f"/review/{change_id}/approve", data={"csrf_token": token}, headers={"HX-Request": "true"})
    client.cookies.clear()
    return response


def test_one_person_with_an_owned_key_and_a_sign_in_is_one_approver(client, ctx, tenant, agent, two_person, person):
    alice = person("alice")
    key = _key(ctx, tenant, owner=alice.username)
    first = _stage(client, agent, "Vault code rotates on Fridays.")
    one = client.post(f"/v1/changes/{first}/approve", json={}, headers=key).json()
    assert one["status"] == "pending"
    assert one["approvals"][0]["by"] == f"user:{alice.id}" and one["approvals"][0]["name"] == alice.username
    assert one["approvals"][0]["via_key"].startswith("key_") and one["approvals"][0]["owner"] == alice.id
    refused = _ui_approve(client, alice.username, first)
    assert refused.status_code == 409 and "same reviewer" in refused.text
    change = client.get(f"/v1/changes/{first}", headers=agent).json()
    assert change["status"] == "pending" and len(change["approvals"]) == 1

    # The other way round: signed in first, then with the key; and a second key of hers.
    second = _stage(client, agent, "Vault code is kept by two people.")
    assert _ui_approve(client, alice.username, second).status_code == 200
    for headers in (key, _key(ctx, tenant, owner=alice.id)):
        error = assert_error(client.post(f"/v1/changes/{second}/approve", json={}, headers=headers), 409, "conflict")
        assert error["details"]["reason"] == "same_reviewer"
    change = client.get(f"/v1/changes/{second}", headers=agent).json()
    assert change["status"] == "pending" and [a["by"] for a in change["approvals"]] == [f"user:{alice.id}"]


def test_two_owners_approve_and_audit_names_the_key(client, ctx, tenant, agent, two_person, person, make_key):
    alice, bob = person("alice"), person("bob")
    change_id = _stage(client, agent, "Payroll moves to the 25th.")
    alices_key = _key(ctx, tenant, owner=alice.username)
    client.post(f"/v1/changes/{change_id}/approve", json={}, headers=alices_key)
    done = client.post(f"/v1/changes/{change_id}/approve", json={}, headers=_key(ctx, tenant, owner=bob.id)).json()
    assert done["status"] == "approved"
    assert [(a["by"], a["name"]) for a in done["approvals"]] == [(f"user:{alice.id}", alice.username),
                                                                  (f"user:{bob.id}", bob.username)]
    assert done["decided_by"] == f"user:{bob.id}" and done["decided_by_name"] == bob.username
    with ctx.db.sessions() as session:
        rows = session.execute(text(
            "SELECT event_type, actor, convert_from(entry, 'UTF8') FROM audit_entries WHERE tenant_id = :t "
            "AND subject_id = :c ORDER BY seq"), {"t": tenant.id, "c": change_id}).all()
    recorded, approved = [r for r in rows if r[0] in ("change.approval_recorded", "change.approved")]
    assert recorded[1].startswith("api_key:") and approved[1].startswith("api_key:")  # the key acted
    assert f"user:{alice.id}" in recorded[2] and f"user:{bob.id}" in approved[2]  # for these people
    auditor = bearer(make_key(scopes="audit:read"))
    for reviewer in (f"user:{alice.id}", f"api_key:{done['approvals'][0]['via_key']}", done["approvals"][1]["via_key"]):
        found = client.get("/v1/audit/decisions", params={"reviewer": reviewer}, headers=auditor).json()["items"]
        assert [d["change_id"] for d in found] == [change_id], reviewer  # the person, or the key they used
    other_key = f"api_key:{parse_token(make_key(scopes='review:decide'))}"
    assert client.get("/v1/audit/decisions", params={"reviewer": other_key}, headers=auditor).json()["items"] == []


def test_an_unowned_key_still_approves_and_is_labelled(client, ctx, tenant, agent, reviewer, two_person, person,
                                                       make_key):
    change_id = _stage(client, agent, "Lobby opens at 8.")
    one = client.post(f"/v1/changes/{change_id}/approve", json={}, headers=reviewer).json()
    approval = one["approvals"][0]
    assert approval["by"].startswith("api_key:key_") and approval["owner"] is None
    assert approval["name"] is None and approval["by"] == f"api_key:{approval['via_key']}"  # no person's name
    done = client.post(f"/v1/changes/{change_id}/approve", json={},
                       headers=_key(ctx, tenant, owner=person("carol").id)).json()
    assert done["status"] == "approved"
    shown = client.get(f"/v1/changes/{change_id}", headers=agent).json()["approvals"]
    assert [a["owner"] for a in shown] == [None, done["approvals"][1]["owner"]]
    auditor = bearer(make_key(scopes="audit:read"))
    [logged] = [d for d in client.get("/v1/audit/decisions", headers=auditor).json()["items"]
                if d["change_id"] == change_id]
    assert logged["approved_by"] == [a["by"] for a in shown]
    assert logged["approved_via"] == [a["via_key"] for a in shown]
    admin = create_user(ctx, username=f"adm-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="admin",
                        actor=ACTOR)
    web_sign_in(client, admin.username, PASSWORD)
    page = client.get(f"/review/{change_id}").text
    assert f"key {approval['via_key']} (no owner)" in page and f"(with key {shown[1]['via_key']})" in page
    log_page = client.get("/audit/decisions").text
    assert 'data-testid="decision-unowned-key"' in log_page and 'data-testid="decision-via-key"' in log_page


def test_the_tenant_can_refuse_unowned_keys_on_two_person_changes(client, ctx, tenant, agent, reviewer, two_person):
    set_two_person_owned_keys(ctx, tenant_id=tenant.id, on=True, actor=ACTOR)
    change_id = _stage(client, agent, "Door code is 4412.")
    error = assert_error(client.post(f"/v1/changes/{change_id}/approve", json={"confirm_risk": True},
                                     headers=reviewer), 403, "forbidden")
    assert "belongs to no one" in error["message"]
    assert client.get(f"/v1/changes/{change_id}", headers=agent).json()["approvals"] == []
    plain = client.post("/v1/memories/remember", headers=agent, json={
        "agent_id": "helper", "type": "semantic", "content": "Desk 4 is free.", "approval_required": True}).json()
    assert client.post(f"/v1/changes/{plain['change_id']}/approve", json={}, headers=reviewer).json()["status"] \
        == "approved"  # one approval needed: any key with review:decide, as before


def test_an_unknown_owner_is_refused(ctx, tenant, make_tenant):
    from app.errors import ValidationFailed

    with pytest.raises(ValidationFailed) as refused:
        create_key(ctx, tenant_id=tenant.id, scopes="review:decide", actor=ACTOR, owner="nobody-here")
    assert "no user 'nobody-here'" in refused.value.details[0]["message"]
    other = make_tenant()
    stranger = create_user(ctx, username=f"dan-{other.name}", password=PASSWORD, tenant_id=other.id,
                           role="reviewer", actor=ACTOR)
    with pytest.raises(ValidationFailed):  # a user of another tenant is not this tenant's
        create_key(ctx, tenant_id=tenant.id, scopes="review:decide", actor=ACTOR, owner=stranger.id)


def test_cli_owner_and_warning(ctx, tenant, person, monkeypatch, capsys):
    import app.cli
    import app.cli.common

    monkeypatch.setattr(app.cli.common, "open_context", lambda settings: ctx)
    base = ["apikey", "create", "--tenant", tenant.name, "--scopes", "review:decide,memory:read"]
    assert app.cli.main([*base, "--owner", "nobody-here"]) == 2
    err = capsys.readouterr().err
    assert "error: no user 'nobody-here' holds a role in this tenant" in err
    erin = person("erin")
    assert app.cli.main([*base, "--owner", erin.username]) == 0
    out, err = capsys.readouterr()
    assert f"owner={erin.id}" in out and "warning" not in err
    assert app.cli.main(base) == 0
    assert "warning: this key has review:decide and no owner" in capsys.readouterr().err
    assert app.cli.main(["apikey", "create", "--tenant", tenant.name, "--scopes", "memory:read"]) == 0
    assert "warning" not in capsys.readouterr().err  # no review:decide, nothing to warn about
    assert app.cli.main(["apikey", "list", "--tenant", tenant.name]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.rsplit("\t", 1)[1] for line in listed] == [f"owner={erin.id}", "no-owner", "no-owner"]
    assert app.cli.main(["tenant", "set", "--tenant", tenant.name, "--two-person-owned-keys", "on"]) == 0
    assert "people only" in capsys.readouterr().out


def test_a_key_whose_owner_left_the_tenant_decides_nothing(client, ctx, tenant, agent, two_person, person):
    from app.services.tenancy.users import set_role

    frank = person("frank")
    key = _key(ctx, tenant, owner=frank.id)
    change_id = _stage(client, agent, "Badge readers reset nightly.")
    set_role(ctx, user_id=frank.id, tenant_id=tenant.id, role=None, actor=ACTOR)
    error = assert_error(client.post(f"/v1/changes/{change_id}/approve", json={}, headers=key), 403, "forbidden")
    assert "owner no longer holds" in error["message"]
    assert_error(client.post(f"/v1/changes/{change_id}/reject", json={"reason": "no"}, headers=key), 403, "forbidden")
    assert client.get(f"/v1/changes/{change_id}", headers=agent).json()["approvals"] == []


def test_a_key_decides_no_more_than_its_owner_could(client, ctx, tenant, agent, two_person, person):
    """A `review:decide` key owned by a viewer (or an auditor) cannot approve or reject: least privilege
    holds across credentials, not only within one."""
    from app.services.tenancy.users import set_role

    vera = person("vera")
    key = _key(ctx, tenant, owner=vera.id)
    change_id = _stage(client, agent, "Loading dock opens at six.")
    for role in ("viewer", "auditor"):
        set_role(ctx, user_id=vera.id, tenant_id=tenant.id, role=role, actor=ACTOR)
        error = assert_error(client.post(f"/v1/changes/{change_id}/approve", json={}, headers=key), 403, "forbidden")
        assert f"'{role}'" in error["message"]
        assert_error(client.post(f"/v1/changes/{change_id}/reject", json={"reason": "no"}, headers=key), 403, "forbidden")
    set_role(ctx, user_id=vera.id, tenant_id=tenant.id, role="reviewer", actor=ACTOR)
    assert client.post(f"/v1/changes/{change_id}/approve", json={}, headers=key).json()["approvals"][0]["name"] == vera.username


def test_migrations_have_one_head_and_the_test_database_is_at_it(ctx):
    """Migration 0035 (the key owner) follows 0034 on one line of history, and the harness's fresh
    database was migrated to it: a second head, or a skipped migration, fails here."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from app.db.database import MIGRATIONS_DIR

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    script = ScriptDirectory.from_config(cfg)
    assert script.get_revision("0035").down_revision == "0034"
    assert len(script.get_heads()) == 1
    with ctx.db.sessions() as session:
        assert session.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == script.get_heads()
        column = session.execute(text(
            "SELECT is_nullable, column_default FROM information_schema.columns "
            "WHERE table_name = 'api_keys' AND column_name = 'owner_user_id'")).one()
    assert tuple(column) == ("YES", None)  # nullable, no default: adding it rewrote nothing


def test_cli_warns_of_a_key_that_both_writes_and_decides(ctx, tenant, monkeypatch, capsys):
    import app.cli
    import app.cli.common

    monkeypatch.setattr(app.cli.common, "open_context", lambda settings: ctx)
    assert app.cli.main(["apikey", "create", "--tenant", tenant.name, "--scopes", "memory:write,review:decide"]) == 0
    assert "can never approve or reject its own writes" in capsys.readouterr().err
    assert app.cli.main(["apikey", "create", "--tenant", tenant.name, "--scopes", "memory:write"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert app.cli.main(["apikey", "list", "--tenant", tenant.name]) == 0
    out, err = capsys.readouterr()
    both = out.splitlines()[0].split("\t")[0]
    assert err.count("can never approve or reject its own writes") == 1 and f"warning: {both}:" in err
