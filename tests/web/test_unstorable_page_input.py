"""Pages refuse NUL in the URL or a form with a 422 page before any handler runs (these were 500s:
PostgreSQL cannot store or compare NUL), and a non-ASCII digit is not a number."""

from app.services.tenancy.users import create_user
from tests.harness import csrf_token_in, web_sign_in

PASSWORD = "correct horse battery"
NUL_URLS = ["/review?agent=a%00b", "/review?rule=a%00", "/review/rows?after=a%00", "/memories?q=a%00b",
            "/memories?agent=a%00", "/memories?tag=a%00", "/memories?user=%00", "/review/chg_%00",
            "/memories/mem_%00", "/admin?tenant=%00", "/a%00b"]
NUL_FORMS = [("/admin/keys", {"name": "a\x00", "scopes": "memory:read", "agents": "*"}),
             ("/admin/users", {"username": "a\x00b", "password": PASSWORD, "role": "viewer"}),
             ("/admin/recover", {"kind": "source", "value": "a\x00", "since": "2026-01-01T00:00:00Z"})]


def test_nul_in_page_urls_and_forms_is_422_and_changes_nothing(client, ctx, tenant):
    create_user(ctx, username=f"adm-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="admin",
                actor={"kind": "test", "id": "t"})
    web_sign_in(client, f"adm-{tenant.name}", PASSWORD, "/")
    for url in NUL_URLS:
        response = client.get(url, follow_redirects=False)
        assert response.status_code == 422, (url, response.status_code)
        assert "content-security-policy" in response.headers
    assert client.get("/review?age=%C2%B2").status_code == 200  # "²" is a digit to str.isdigit, not to int()
    token = csrf_token_in(client.get("/admin/users").text)
    keys_before = client.get("/admin/keys").text.count("<tr")
    for url, form in NUL_FORMS:
        response = client.post(url, data={**form, "csrf_token": token}, follow_redirects=False)
        assert response.status_code == 422, (url, response.status_code, response.text[:300])
    assert client.get("/admin/keys").text.count("<tr") == keys_before
    ok = client.get("/review?agent=a1", follow_redirects=False)  # the guard passes ordinary requests
    assert ok.status_code == 200
