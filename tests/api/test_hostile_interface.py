"""Hostile inputs and interface faults found under attack: each answered
with a 4xx in the envelope, never a 500, and changing nothing."""

from __future__ import annotations

import json
import uuid

import pytest

from app.services.tenancy import users
from tests.harness import csrf_token_in, web_sign_in
from tests.schema_check import assert_error

DEEP = 5_000


def _deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("path", ["/v1/memories/remember", "/v1/memories/recall", "/v1/memories/forget"])
def test_deeply_nested_json_with_an_idempotency_key_is_malformed_not_a_500(client, agent, path):
    for body in (_deep_json(DEEP), json.dumps({"agent_id": "a", "metadata": json.loads(_deep_json(900))})):
        response = client.post(path, content=body, headers={**agent, "Content-Type": "application/json",
                                                             "Idempotency-Key": uuid.uuid4().hex})
        assert response.status_code in (400, 422), response.text
        assert response.json()["error"]["code"] in ("bad_request", "validation_error")


def test_sign_in_with_a_huge_password_is_a_plain_refusal(client, ctx, tenant):
    users.create_user(ctx, username=f"huge-{tenant.name}", password="correct horse battery", tenant_id=tenant.id,
                      role="reviewer", actor={"kind": "test", "id": "pytest"})
    for password in ("x" * 5_000, "é" * 3_000):  # over passlib's 4,096-byte limit
        for name in (f"huge-{tenant.name}", "nobody-at-all"):
            response = web_sign_in(client, name, password)
            assert response.status_code == 422, response.text
            assert "wrong username or password" in response.text


def test_a_password_over_the_limit_is_refused_not_cut_short(client, ctx, tenant):
    actor = {"kind": "test", "id": "pytest"}
    with pytest.raises(Exception) as refused:
        users.create_user(ctx, username=f"long-{tenant.name}", password="p" * (users.MAX_PASSWORD + 1),
                          tenant_id=tenant.id, role="viewer", actor=actor)
    assert "at most" in str(refused.value.message)
    assert users.find_user(ctx, f"long-{tenant.name}") is None


def test_admin_form_refuses_an_over_long_password_instead_of_truncating(client, ctx, tenant):
    admin_name = f"adm-{tenant.name}"
    users.create_user(ctx, username=admin_name, password="admin password 123", tenant_id=tenant.id, role="admin",
                      actor={"kind": "test", "id": "pytest"})
    assert web_sign_in(client, admin_name, "admin password 123", "/admin").status_code == 303
    csrf = csrf_token_in(client.get("/admin").text)
    for length in (2_000, users.MAX_PASSWORD + 1):
        response = client.post("/admin/users", data={"csrf_token": csrf, "username": f"t{length}-{tenant.name}",
                                                     "password": "q" * length, "role": "viewer"},
                               headers={"HX-Request": "true"})
        assert response.status_code == 422 and "/password" in response.text
        assert users.find_user(ctx, f"t{length}-{tenant.name}") is None
    # at the limit it is accepted, whole: the full password signs in, its first half does not
    exact = "z" * users.MAX_PASSWORD
    assert client.post("/admin/users", data={"csrf_token": csrf, "username": f"exact-{tenant.name}", "password": exact,
                                             "role": "viewer"}, headers={"HX-Request": "true"}).status_code == 200
    assert web_sign_in(client, f"{tenant.name}/exact-{tenant.name}", exact[:500]).status_code == 422
    assert web_sign_in(client, f"{tenant.name}/exact-{tenant.name}", exact).status_code == 303


def test_options_and_wrong_methods_on_the_recall_path_name_only_post(client, agent):
    response = client.options("/v1/memories/recall", headers=agent)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    for method in ("GET", "DELETE"):
        response = client.request(method, "/v1/memories/recall", headers=agent)
        assert response.status_code == 405 and response.headers["allow"] == "POST"
        assert_error(response, 405, "method_not_allowed")
    # a real memory path still offers its own methods
    assert client.options("/v1/memories/mem_" + "0" * 26, headers=agent).headers["allow"] == "DELETE, GET, HEAD"


@pytest.mark.parametrize("value", ["", "   ", "abc", "12a", "-1", "1e3"])
def test_last_event_id_must_be_an_event_id(client, make_key, value):
    headers = {"Authorization": f"Bearer {make_key(scopes='events:read')}", "Last-Event-ID": value}
    response = client.get("/v1/events", headers=headers)
    assert_error(response, 422, "validation_error")
    assert response.json()["error"]["details"][0]["path"] == "/Last-Event-ID"


def _mcp_initialize(client, headers):
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "origin-test", "version": "1"}}}
    return client.post("/mcp", json=body, headers={**headers, "Accept": "application/json, text/event-stream"})


def test_mcp_refuses_a_foreign_origin_and_accepts_its_own_or_none(client, agent):
    foreign = _mcp_initialize(client, {**agent, "Origin": "https://evil.example"})
    assert_error(foreign, 403, "forbidden")
    assert _mcp_initialize(client, {**agent, "Origin": "null"}).status_code == 403
    # DNS rebinding: the page's Origin and the Host both name the attacker's site
    assert _mcp_initialize(client, {**agent, "Host": "evil.example:8000",
                                    "Origin": "http://evil.example:8000"}).status_code == 403
    assert _mcp_initialize(client, {**agent, "Host": "127.0.0.1:8000",
                                    "Origin": "http://127.0.0.1:9999"}).status_code == 403
    assert _mcp_initialize(client, agent).status_code == 200  # agents send no Origin
    assert _mcp_initialize(client, {**agent, "Host": "127.0.0.1:8000",
                                    "Origin": "http://127.0.0.1:8000"}).status_code == 200


def test_mcp_origins_an_operator_lists_are_allowed(ctx, agent):
    from starlette.testclient import TestClient

    from app.main import create_app

    settings = ctx.settings.with_changes(mcp_allowed_origins="https://Console.Example.com, https://b.example:8443/")
    with TestClient(create_app(settings, ctx=ctx), base_url="http://testserver") as listed:
        assert _mcp_initialize(listed, {**agent, "Origin": "https://console.example.com:443"}).status_code == 200
        assert _mcp_initialize(listed, {**agent, "Origin": "https://b.example:8443"}).status_code == 200
        assert _mcp_initialize(listed, {**agent, "Origin": "https://b.example"}).status_code == 403


def test_an_admin_learns_nothing_about_usernames_in_other_tenants(client, ctx, make_tenant):
    """Accounts an admin creates live in their tenant's namespace: the same name in another
    tenant, or an operator's account of that name, makes no difference to the answer."""
    actor = {"kind": "test", "id": "pytest"}
    home, elsewhere = make_tenant(), make_tenant()
    taken = f"taken-{elsewhere.name}"
    users.create_user(ctx, username=taken, password="elsewhere pass 1", tenant_id=elsewhere.id, role="viewer",
                      actor=actor, homed=True)
    users.create_user(ctx, username=f"op-{home.name}", password="operator pass 1", tenant_id=elsewhere.id,
                      role="viewer", actor=actor)  # an operator's account, in no tenant's namespace
    admin = f"admin-{home.name}"
    users.create_user(ctx, username=admin, password="admin password 123", tenant_id=home.id, role="admin",
                      actor=actor)
    assert web_sign_in(client, admin, "admin password 123", "/admin").status_code == 303
    csrf = csrf_token_in(client.get("/admin").text)

    def create(name: str):
        return client.post("/admin/users", data={"csrf_token": csrf, "username": name, "password": "fresh pass 123",
                                                 "role": "viewer"}, follow_redirects=False)

    assert create(taken).status_code == 303  # exists in another tenant: created here all the same
    assert create(f"op-{home.name}").status_code == 303  # an operator account of that name: likewise
    assert create(f"never-{home.name}").status_code == 303
    again = client.post("/admin/users", data={"csrf_token": csrf, "username": taken, "password": "fresh pass 123",
                                              "role": "viewer"}, headers={"HX-Request": "true"})
    assert again.status_code == 409  # only a name in one's own tenant is taken
    page = client.get("/admin").text
    assert f"{home.name}/{taken}" in page  # the sign-in name is shown

    # Each account signs in with its own name; the other tenant's is untouched.
    assert web_sign_in(client, f"{home.name}/{taken}", "fresh pass 123").status_code == 303
    assert web_sign_in(client, f"{elsewhere.name}/{taken}", "elsewhere pass 1").status_code == 303
    assert web_sign_in(client, f"{elsewhere.name}/{taken}", "fresh pass 123").status_code == 422
    assert web_sign_in(client, taken, "fresh pass 123").status_code == 422  # not an operator account
    assert web_sign_in(client, f"op-{home.name}", "operator pass 1").status_code == 303


def test_a_disabled_account_costs_the_same_password_check_as_any_other(client, ctx, tenant, monkeypatch):
    """Sign-in verifies one argon2 hash whatever the account's state, so timing reveals nothing."""
    from sqlalchemy import text

    users.create_user(ctx, username=f"off-{tenant.name}", password="disabled pass 1", tenant_id=tenant.id,
                      role="viewer", actor={"kind": "test", "id": "pytest"})
    with ctx.db.sessions.begin() as session:
        session.execute(text("UPDATE users SET disabled_at = now() WHERE username = :u"), {"u": f"off-{tenant.name}"})
    verified = []
    real_verify = users.argon2.verify
    monkeypatch.setattr(users.argon2, "verify", lambda pw, h: verified.append(h) or real_verify(pw, h))
    for name, password in ((f"off-{tenant.name}", "disabled pass 1"), ("nobody-here", "whatever pass 1"),
                           (f"off-{tenant.name}", "x" * 5_000)):
        assert web_sign_in(client, name, password).status_code == 422
    assert len(verified) == 3
