"""The web shell: security headers, CSP, CSRF, the single error path."""

import pytest
from sqlalchemy import text
from starlette.testclient import TestClient

from app.middleware import CSP
from app.services.tenancy.users import create_user
from tests.harness import csrf_token_in, web_sign_in

PASSWORD = "correct horse battery"


def test_home_page_has_strict_csp_and_security_headers(client):
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-security-policy"] == CSP
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert "HX-Request" in response.headers["vary"]
    assert '<script src="/static/vendor/htmx-2.0.11.min.js"' in response.text
    assert "<script>" not in response.text  # no inline script anywhere


def test_csrf_cookie_is_httponly_strict_and_token_is_in_hx_headers(client):
    response = client.get("/login")
    cookie = response.headers["set-cookie"]
    assert cookie.startswith("mw_csrf=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "X-CSRF-Token" in response.text


def test_state_changing_request_without_csrf_token_is_refused(client):
    client.get("/login")  # obtain the cookie
    response = client.post("/login", data={"username": "a", "password": "b"})
    assert response.status_code == 403
    assert 'data-error-code="forbidden"' in response.text


def test_forged_csrf_token_is_refused(client):
    client.get("/login")
    response = client.post("/login", data={"username": "a", "password": "b"},
                           headers={"X-CSRF-Token": "forged.token"})
    assert response.status_code == 403


@pytest.fixture
def person(ctx, tenant):
    return create_user(ctx, username=f"rev-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="reviewer",
                       actor={"kind": "test", "id": "t"})


def _logout(client, token):
    return client.post("/logout", data={"csrf_token": token}, follow_redirects=False)


def _plant(client, value):
    """Replace the browser's `mw_csrf` cookie, as a sibling subdomain can (Domain=.parent)."""
    client.cookies.delete("mw_csrf")
    client.cookies.set("mw_csrf", value)


def test_planted_csrf_cookie_with_its_matching_token_does_not_work_for_a_signed_in_user(client, ctx, person):
    attacker = TestClient(client.app, base_url="http://testserver")
    page = attacker.get("/login")
    planted_cookie, planted_token = page.cookies["mw_csrf"], csrf_token_in(page.text)  # a valid pair, the attacker's
    assert web_sign_in(attacker, person.username, PASSWORD).status_code == 303
    attackers_session_token = csrf_token_in(attacker.get("/review").text)

    assert web_sign_in(client, person.username, PASSWORD).status_code == 303
    _plant(client, planted_cookie)
    assert _logout(client, planted_token).status_code == 403
    assert _logout(client, attackers_session_token).status_code == 403  # same user, other session
    assert client.get("/review").status_code == 200  # still signed in
    assert _logout(client, csrf_token_in(client.get("/review").text)).status_code == 303

    # Control: signed out, the planted pair is what the pre-session binding accepts (the planted
    # cookie really is sent); against the login form that case is stopped by Fetch Metadata.
    _plant(client, planted_cookie)
    form = {"username": person.username, "password": "not the password", "csrf_token": planted_token}
    assert client.post("/login", data=form).status_code == 422
    assert client.post("/login", data=form, headers={"Sec-Fetch-Site": "same-site"}).status_code == 403


def test_token_from_before_sign_in_is_dead_after_it_and_sign_out_rotates_again(client, person):
    before = client.get("/login")
    pre_token, pre_cookie = csrf_token_in(before.text), before.cookies["mw_csrf"]
    signed = client.post("/login", data={"username": person.username, "password": PASSWORD,
                                         "csrf_token": pre_token}, follow_redirects=False)
    assert signed.status_code == 303
    assert signed.cookies["mw_csrf"] != pre_cookie  # the pre-session cookie is replaced at sign-in
    session_token = csrf_token_in(client.get("/review").text)
    assert session_token != pre_token
    assert _logout(client, pre_token).status_code == 403
    _plant(client, pre_cookie)
    assert _logout(client, pre_token).status_code == 403  # even with the old cookie back
    client.cookies.delete("mw_csrf")

    out = _logout(client, session_token)
    assert out.status_code == 303 and out.cookies["mw_csrf"] not in (pre_cookie, signed.cookies["mw_csrf"])
    login_again = client.get("/login")
    assert csrf_token_in(login_again.text) not in (pre_token, session_token)
    assert client.post("/login", data={"username": person.username, "password": PASSWORD,
                                       "csrf_token": session_token}).status_code == 403


def test_cross_site_and_sibling_subdomain_posts_are_refused_even_with_a_valid_token(client, person):
    token = csrf_token_in(client.get("/login").text)
    form = {"username": person.username, "password": PASSWORD, "csrf_token": token}
    for site in ("cross-site", "same-site"):
        assert client.post("/login", data=form, headers={"Sec-Fetch-Site": site}).status_code == 403
    assert client.post("/login", data=form, headers={"Sec-Fetch-Site": "same-origin"},
                       follow_redirects=False).status_code == 303


def test_unknown_page_renders_html_404_and_unknown_api_path_json_404(client):
    page = client.get("/no-such-page")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    api = client.get("/v1/no-such-thing", headers={"Authorization": "Bearer x"})
    assert api.status_code == 401  # authentication comes first under /v1
    assert client.get("/openapi.json").status_code == 200


def test_htmx_error_is_a_fragment_retargeted_to_the_flash_area(client):
    response = client.get("/no-such-page", headers={"HX-Request": "true"})
    assert response.status_code == 404
    assert response.headers["hx-retarget"] == "#flash"
    assert "<html" not in response.text and 'data-testid="error"' in response.text


def test_static_assets_are_served_with_security_headers(client):
    response = client.get("/static/vendor/htmx-2.0.11.min.js")
    assert response.status_code == 200 and "htmx" in response.text[:2000]
    assert response.headers["x-content-type-options"] == "nosniff"


def test_session_lapses_after_twelve_idle_hours_and_when_the_user_is_disabled(client, ctx, person):
    def expect_signed_out():
        response = client.get("/review", follow_redirects=False)
        assert response.status_code == 303 and response.headers["location"].startswith("/login")

    for lapse in ("UPDATE web_sessions SET last_seen_at = now() - interval '12 hours 1 minute' WHERE user_id = :u",
                  "UPDATE users SET disabled_at = now() WHERE id = :u"):
        assert web_sign_in(client, person.username, PASSWORD).status_code == 303
        assert client.get("/review").status_code == 200
        with ctx.db.sessions.begin() as session:
            session.execute(text(lapse), {"u": person.id})
        expect_signed_out()
