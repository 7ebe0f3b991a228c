"""The admin page's memory backends: an admin adds another Memwarden (its URL obeys the outbound
rule, its API key is sealed and never shown), sees each backend's backlog, pauses, resumes and
removes it; mem0 and memorywire stores, which run code in the server, are the operator's (CLI)."""

from dataclasses import replace

from app.services.tenancy.users import create_user
from tests.harness import bearer, csrf_token_in, web_sign_in

PASSWORD = "correct horse battery"
HX = {"HX-Request": "true"}
API_KEY = "mw_key_0123456789abcdefghijklmnop_thisIsTheOtherServersKeyNeverShown0000"


def test_an_admin_adds_pauses_resumes_and_removes_another_memwarden(client, ctx, tenant, make_key):
    agent = make_key()
    for text in ("Ada cycles to work.", "Ada is vegetarian."):
        assert client.post("/v1/memories/remember", json={"agent_id": "bot-1", "type": "semantic", "content": text},
                           headers=bearer(agent)).status_code == 201
    admin = create_user(ctx, username=f"adm-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="admin",
                        actor={"kind": "test", "id": "t"})
    assert web_sign_in(client, admin.username, PASSWORD, "/admin").status_code == 303
    page = client.get("/admin")
    assert 'data-testid="backend-list-empty"' in page.text
    form = {"name": "eu", "url": "https://memwarden.example", "api_key": API_KEY, "agents": "bot-*"}
    assert client.post("/admin/backends", data=form, headers=HX).status_code == 403  # no CSRF token
    form["csrf_token"] = csrf_token_in(page.text)

    added = client.post("/admin/backends", data=form, headers=HX)
    assert added.status_code == 200 and 'data-backend="eu"' in added.text
    assert API_KEY not in added.text and API_KEY not in client.get("/admin").text
    row = added.text.split('data-backend="eu"')[1].split("</tr>")[0]
    assert "<td>2</td>" in row  # both live memories of bot-* are owed to it at once

    memory_id = client.get("/v1/memories", params={"agent_id": "bot-1"}, headers=bearer(agent)).json()["items"][0]["id"]
    memory_page = client.get(f"/memories/{memory_id}")
    assert 'data-testid="delivery" data-backend="eu" data-status="pending"' in memory_page.text

    again = client.post("/admin/backends", data=form, headers=HX)
    assert again.status_code == 409

    paused = client.post("/admin/backends/eu", data={"csrf_token": form["csrf_token"], "action": "disable"},
                         headers=HX)
    assert paused.status_code == 200 and "<strong>paused</strong>" in paused.text
    resumed = client.post("/admin/backends/eu", data={"csrf_token": form["csrf_token"], "action": "enable"},
                          headers=HX)
    assert resumed.status_code == 200 and "paused" not in resumed.text.split('data-backend="eu"')[1].split("</tr>")[0]
    removed = client.post("/admin/backends/eu", data={"csrf_token": form["csrf_token"], "action": "remove"},
                          headers=HX)
    assert removed.status_code == 200 and 'data-testid="backend-list-empty"' in removed.text


def test_the_page_refuses_private_urls_and_code_running_stores(client, ctx, tenant):
    ctx.settings = replace(ctx.settings, backend_allow_private=False)
    admin = create_user(ctx, username=f"adm2-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="admin",
                        actor={"kind": "test", "id": "t"})
    assert web_sign_in(client, admin.username, PASSWORD, "/admin").status_code == 303
    token = csrf_token_in(client.get("/admin").text)
    for url in ("http://127.0.0.1:8080", "http://localhost", "ftp://memwarden.example", "not a url"):
        refused = client.post("/admin/backends", data={"csrf_token": token, "name": "x", "url": url,
                                                       "api_key": API_KEY}, headers=HX)
        assert refused.status_code == 422, url
        assert 'data-testid="backend-list-empty"' in refused.text
    unknown = client.post("/admin/backends/nope", data={"csrf_token": token, "action": "retry"}, headers=HX)
    assert unknown.status_code == 404
    bad_action = client.post("/admin/backends/nope", data={"csrf_token": token, "action": "explode"}, headers=HX)
    assert bad_action.status_code == 422
