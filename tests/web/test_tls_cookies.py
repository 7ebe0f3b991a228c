"""`Secure` cookies behind TLS: direct https, and X-Forwarded-Proto/-For honoured only from trusted
proxies (`serve --proxy-headers` / MEMWARDEN_TRUSTED_PROXIES, uvicorn's proxy-header middleware)."""

import subprocess
import sys

import httpx
from sqlalchemy import text
from starlette.testclient import TestClient
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app.main import create_app
from app.services.tenancy.users import create_user
from tests.harness import PROJECT_ROOT, csrf_token_in, server_env, start_server, stop_server

PASSWORD = "correct horse battery"


def cookies_of(response) -> dict[str, str]:
    """Set-Cookie headers by cookie name."""
    return {header.split("=", 1)[0]: header for header in response.headers.get_list("set-cookie")}


def behind_proxy(ctx, trusted: str, peer: str) -> TestClient:
    """The app as `serve` runs it with MEMWARDEN_TRUSTED_PROXIES=trusted, reached from `peer`."""
    options = ctx.settings.with_changes(trusted_proxies=trusted).proxy_header_options()
    assert options["proxy_headers"] is True
    app = ProxyHeadersMiddleware(create_app(ctx.settings, ctx=ctx), trusted_hosts=options["forwarded_allow_ips"])
    return TestClient(app, base_url="http://testserver", client=(peer, 41000))


def test_direct_https_gives_secure_session_and_csrf_cookies(ctx, tenant):
    user = create_user(ctx, username=f"tls-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="viewer",
                       actor={"kind": "test", "id": "t"})
    browser = TestClient(create_app(ctx.settings, ctx=ctx), base_url="https://testserver")
    page = browser.get("/login")
    csrf = cookies_of(page)["mw_csrf"]
    assert "; Secure" in csrf and "HttpOnly" in csrf and "SameSite=Strict" in csrf
    signed = browser.post("/login", data={"username": user.username, "password": PASSWORD,
                                          "csrf_token": csrf_token_in(page.text)}, follow_redirects=False)
    assert signed.status_code == 303
    session, rotated = cookies_of(signed)["mw_session"], cookies_of(signed)["mw_csrf"]
    assert "Secure" in session and "HttpOnly" in session and "samesite=lax" in session.lower()
    assert "Secure" in rotated and "HttpOnly" in rotated


def test_forwarded_proto_and_for_count_only_from_trusted_proxies(ctx):
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.44"}
    proxied = behind_proxy(ctx, "10.0.0.0/8, 127.0.0.1", peer="10.1.2.3")
    page = proxied.get("/login", headers=forwarded)
    assert "; Secure" in cookies_of(page)["mw_csrf"]
    assert "Secure" not in cookies_of(proxied.get("/login"))["mw_csrf"]  # plain http through the proxy

    direct = behind_proxy(ctx, "10.0.0.0/8", peer="203.0.113.5")  # not a trusted proxy: headers ignored
    spoofed = direct.get("/login", headers=forwarded)
    assert "Secure" not in cookies_of(spoofed)["mw_csrf"]

    # The forwarded client address (trusted proxy only) is what sign-in throttling counts.
    for browser, response in ((proxied, page), (direct, spoofed)):
        cookie = response.cookies["mw_csrf"]
        refused = browser.post("/login", data={"username": "nobody-tls", "password": "wrong-password-1",
                                               "csrf_token": csrf_token_in(response.text)},
                               headers={**forwarded, "Cookie": f"mw_csrf={cookie}"})
        assert refused.status_code == 422
    with ctx.db.sessions() as session:
        clients = set(session.scalars(text("SELECT client FROM login_throttle WHERE username = 'nobody-tls'")))
    assert clients == {"198.51.100.44", "203.0.113.5", "*"}


def test_serve_with_trusted_proxies_marks_cookies_secure_for_forwarded_https(settings):
    proc, base_url = start_server(settings, MEMWARDEN_TRUSTED_PROXIES="127.0.0.1")
    try:
        over_tls = httpx.get(f"{base_url}/login", headers={"X-Forwarded-Proto": "https"})
        plain = httpx.get(f"{base_url}/login")
    finally:
        stop_server(proc)
    assert "; Secure" in cookies_of(over_tls)["mw_csrf"]
    assert "Secure" not in cookies_of(plain)["mw_csrf"]


def test_serve_refuses_a_malformed_trusted_proxy_list(settings):
    result = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--port", "1"], cwd=PROJECT_ROOT,
                            env=server_env(settings, MEMWARDEN_TRUSTED_PROXIES="10.0.0.0/8, proxy.example"),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "'proxy.example' is not an IP address or CIDR" in result.stderr


def test_probes_and_machine_documents_get_no_cookie_while_pages_do(ctx):
    """Load balancers and scrapers hit the probes every few seconds: a cookie per hit is noise in
    their logs and a session-shaped value handed to a program that never sends it back."""
    client = TestClient(create_app(ctx.settings, ctx=ctx), base_url="http://testserver")
    for path in ("/healthz", "/readyz", "/metrics", "/openapi.json", "/.well-known/openwop"):
        response = client.get(path)
        assert response.status_code < 500, (path, response.status_code)
        assert response.headers.get_list("set-cookie") == [], path
    assert "mw_csrf" in cookies_of(client.get("/login"))
