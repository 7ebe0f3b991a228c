"""The web shell: security headers, CSP, CSRF, the single error path."""

from app.middleware import CSP


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
