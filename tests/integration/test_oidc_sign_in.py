"""Sign-in through OpenID Connect against a real provider: the `oidc-provider` package from npm,
run by Node (tests/oidc/provider.mjs), and a real `memwarden serve` with local passwords off.
A browser-shaped httpx client walks the whole flow: authorization code with PKCE, the provider's
login form, the callback, provisioning with a role from the `groups` claim, refusal, losing the
role, sign-out (and RP-initiated logout at the provider). Nothing in the flow is mocked."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest

from app.local_server import free_port
from tests.harness import csrf_token_in, start_server, stop_server, unique
from tests.upstream import npm_package

PACKAGE = "oidc-provider@9.13.3"
SCRIPT = Path(__file__).resolve().parents[1] / "oidc" / "provider.mjs"
ACTOR = {"kind": "test", "id": "pytest"}
RUN = unique("o")  # group names and emails of this run, so no other tenant's rule matches them


@pytest.fixture(scope="module")
def provider_script() -> Path:
    """provider.mjs beside an npm-installed oidc-provider (ES modules resolve from the script's folder)."""
    target = npm_package(PACKAGE, "node_modules/oidc-provider/package.json") / "provider.mjs"
    shutil.copyfile(SCRIPT, target)
    return target


@pytest.fixture(scope="module")
def stack(provider_script, settings, tmp_path_factory):
    """(memwarden base URL, provider config path, config dict) with both processes running."""
    folder = tmp_path_factory.mktemp("oidc")
    mw_port, op_port = free_port(), free_port()
    base = f"http://127.0.0.1:{mw_port}"
    config = {"port": op_port, "client_id": "memwarden", "client_secret": "s3cret-" + RUN,
              "redirect_uri": f"{base}/login/oidc/callback", "post_logout_redirect_uri": f"{base}/login",
              "accounts": {
                  "rita": {"email": f"rita.{RUN}@example.com", "email_verified": True,
                           "groups": [f"staff-{RUN}", f"reviewers-{RUN}"]},
                  "ada": {"email": f"ada.{RUN}@example.com", "email_verified": True, "groups": f"admins-{RUN}"},
                  "mallory": {"email": f"mallory.{RUN}@elsewhere.test", "email_verified": True,
                              "groups": [f"contractors-{RUN}"]},
              }}
    config_path = folder / "provider.json"
    config_path.write_text(json.dumps(config))
    secret_file = folder / "client_secret"
    secret_file.write_text(config["client_secret"] + "\n")
    provider = subprocess.Popen(["node", str(provider_script), str(config_path)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    line = provider.stdout.readline()
    if not line.startswith("ready"):
        provider.kill()
        pytest.fail(f"the OpenID provider did not start: {line}{provider.stderr.read()[-2000:]}")
    server, _ = start_server(settings, port=mw_port, MEMWARDEN_OIDC_ISSUER=f"http://127.0.0.1:{op_port}",
                             MEMWARDEN_OIDC_CLIENT_ID="memwarden", MEMWARDEN_OIDC_CLIENT_SECRET_FILE=str(secret_file),
                             MEMWARDEN_OIDC_SCOPES="openid email profile groups", MEMWARDEN_OIDC_PROVIDER_NAME="Example SSO",
                             MEMWARDEN_PUBLIC_URL=base, MEMWARDEN_PASSWORD_SIGN_IN="0")
    yield base, config_path, config
    stop_server(server)
    provider.terminate()
    provider.wait(10)


@pytest.fixture(scope="module")
def sso_tenant(committed_ctx, settings):
    """A tenant admitting the provider's people of example.com (admins-RUN → admin, reviewers-RUN →
    reviewer), set up as an operator would: `memwarden tenant set`."""
    from app.cli import build_parser
    from app.services.tenancy.tenants import create_tenant

    tenant = create_tenant(committed_ctx, name=unique("sso"), actor=ACTOR)
    args = build_parser().parse_args(["tenant", "set", "--tenant", tenant.name, "--oidc-role-claim", "groups",
                                      "--oidc-role-map", f"admins-{RUN}=admin,reviewers-{RUN}=reviewer",
                                      "--oidc-email-domains", "example.com"])
    assert args.func(args, settings) == 0
    return tenant


def sign_in_at_provider(http: httpx.Client, base: str, login: str) -> httpx.Response:
    """Start at Memwarden's sign-in, type `login` into the provider's form, follow every redirect back."""
    form_page = http.get(f"{base}/login/oidc", params={"next": "/review"}, follow_redirects=True)
    assert form_page.status_code == 200 and 'name="login"' in form_page.text, form_page.text[:500]
    authorize = parse_qs(urlsplit(form_page.history[0].headers["location"]).query)  # Memwarden's request
    assert authorize["code_challenge_method"] == ["S256"] and len(authorize["code_challenge"][0]) == 43
    assert authorize["response_type"] == ["code"] and authorize["nonce"] and authorize["state"]
    action = re.search(r'<form[^>]*action="([^"]+)"', form_page.text).group(1)
    return http.post(urljoin(str(form_page.url), action), data={"prompt": "login", "login": login, "password": "any"},
                     follow_redirects=True)


def _role_of(ctx, email: str, tenant_id: str):
    """(the account named `email`, its role in the tenant) — (None, None) without an account."""
    from app.services.tenancy.users import find_user, list_users

    user = find_user(ctx, email)
    if user is None:
        return None, None
    return user, {u.id: r.role for u, r in list_users(ctx, tenant_id)}.get(user.id)


def _auth_events(ctx, tenant_id: str) -> list[tuple[str, str]]:
    """(event type, entry JSON) of the tenant chain's sign-in records and role changes, in order."""
    from sqlalchemy import text

    with ctx.db.sessions() as session:
        return [tuple(r) for r in session.execute(text(
            "SELECT event_type, convert_from(entry, 'UTF8') FROM audit_entries WHERE tenant_id = :t"
            " AND (event_type LIKE 'auth.%' OR event_type LIKE 'user.%') ORDER BY seq"), {"t": tenant_id})]


def test_first_sign_in_provisions_the_account_with_the_role_from_its_groups(stack, sso_tenant, committed_ctx):
    base, _, config = stack
    with httpx.Client() as http:
        landed = sign_in_at_provider(http, base, "rita")
        assert landed.status_code == 200 and urlsplit(str(landed.url)).path == "/review"
        callback = next(r for r in landed.history if r.url.path == "/login/oidc/callback")
        assert callback.status_code == 303 and callback.headers["location"] == "/review"
        assert f"rita.{RUN}@example.com" in landed.text  # the header names who is signed in
    user, role = _role_of(committed_ctx, f"rita.{RUN}@example.com", sso_tenant.id)
    assert user is not None and user.oidc_subject == "rita" and role == "reviewer"

    with httpx.Client() as http:  # a second sign-in finds the same account, provisions no other
        assert sign_in_at_provider(http, base, "rita").status_code == 200
    again, _ = _role_of(committed_ctx, f"rita.{RUN}@example.com", sso_tenant.id)
    assert again.id == user.id
    mine = [(event, entry) for event, entry in _auth_events(committed_ctx, sso_tenant.id) if user.id in entry]
    assert [event for event, _ in mine] == ["user.created", "auth.signed_in", "auth.signed_in"]
    assert '"oidc"' in mine[1][1] and '"reviewer"' in mine[0][1]


def test_a_person_no_rule_admits_is_refused_and_gets_no_account(stack, sso_tenant, committed_ctx):
    base, _, _ = stack
    with httpx.Client() as http:
        refused = sign_in_at_provider(http, base, "mallory")
        assert refused.status_code == 403
        assert 'data-testid="oidc-refused"' in refused.text and "no tenant here gives you a role" in refused.text
        assert "mw_session" not in http.cookies
        assert urlsplit(str(http.get(f"{base}/review", follow_redirects=True).url)).path == "/login"
    user, _ = _role_of(committed_ctx, f"mallory.{RUN}@elsewhere.test", sso_tenant.id)
    assert user is None


def test_leaving_the_group_removes_the_role_and_ends_open_sessions(stack, sso_tenant, committed_ctx):
    base, config_path, config = stack
    with httpx.Client() as old_browser:
        assert sign_in_at_provider(old_browser, base, "ada").status_code == 200
        _, role = _role_of(committed_ctx, f"ada.{RUN}@example.com", sso_tenant.id)
        assert role == "admin"

        config["accounts"]["ada"]["groups"] = [f"alumni-{RUN}"]  # ada leaves at the provider
        config_path.write_text(json.dumps(config))
        with httpx.Client() as http:
            refused = sign_in_at_provider(http, base, "ada")
            assert refused.status_code == 403 and "no longer have a role" in refused.text
        user, role = _role_of(committed_ctx, f"ada.{RUN}@example.com", sso_tenant.id)
        assert role is None
        events = [event for event, entry in _auth_events(committed_ctx, sso_tenant.id) if user.id in entry]
        assert events == ["user.created", "auth.signed_in", "user.role_changed"]  # the refusal: system chain
        # The session ada opened before leaving is over too.
        assert urlsplit(str(old_browser.get(f"{base}/review", follow_redirects=True).url)).path == "/login"


def test_password_sign_in_is_off_and_the_page_offers_only_the_provider(stack, committed_ctx, sso_tenant):
    from app.services.tenancy.users import create_user

    base, _, _ = stack
    name = unique("pw")
    create_user(committed_ctx, username=name, password="correct horse battery", tenant_id=sso_tenant.id,
                role="admin", actor=ACTOR)
    with httpx.Client() as http:
        page = http.get(f"{base}/login")
        assert 'data-testid="oidc-sign-in"' in page.text and "Sign in with Example SSO" in page.text
        assert 'name="password"' not in page.text
        token = html.unescape(re.search(r'hx-headers=\'([^\']+)\'', page.text).group(1))  # no form: the page's token
        refused = http.post(f"{base}/login", data={"username": name, "password": "correct horse battery",
                                                   "csrf_token": json.loads(token)["X-CSRF-Token"], "next": "/review"})
        assert refused.status_code == 403 and "password sign-in is turned off" in refused.text
        assert "mw_session" not in http.cookies


def test_sign_out_ends_the_session_and_offers_the_providers_logout(stack, sso_tenant):
    base, _, _ = stack
    with httpx.Client() as http:
        landed = sign_in_at_provider(http, base, "rita")
        assert landed.status_code == 200
        signed_out = http.post(f"{base}/logout", data={"csrf_token": csrf_token_in(landed.text)},
                               follow_redirects=True)
        assert urlsplit(str(signed_out.url)).path == "/login"
        assert urlsplit(str(http.get(f"{base}/review", follow_redirects=True).url)).path == "/login"
        link = re.search(r'href="([^"]+)" data-testid="provider-sign-out"', signed_out.text).group(1)
        confirm = http.get(link.replace("&amp;", "&"))
        assert confirm.status_code == 200 and "sign-out" in confirm.text
        form = re.search(r'<form[^>]*action="([^"]+)"[^>]*>(.*?)</form>', confirm.text, re.S)
        fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form.group(2)))
        back = http.post(urljoin(str(confirm.url), form.group(1)), data={**fields, "logout": "yes"},
                         follow_redirects=True)
        # The provider ended its session and sent the browser back to Memwarden's sign-in page.
        assert str(back.url).startswith(f"{base}/login") and back.status_code == 200
        again = http.get(f"{base}/login/oidc", params={"next": "/review"}, follow_redirects=True)
        assert 'name="login"' in again.text  # the provider asks who you are again


def test_a_provider_answer_meant_for_another_browser_is_refused(stack, sso_tenant):
    """Login CSRF: an attacker's own code and state, fed to a victim's browser, must not sign the
    victim in (as the attacker): the state is checked against the browser's own signed cookie."""
    base, _, _ = stack
    with httpx.Client() as attacker, httpx.Client() as victim:
        form_page = attacker.get(f"{base}/login/oidc", params={"next": "/review"}, follow_redirects=True)
        action = re.search(r'<form[^>]*action="([^"]+)"', form_page.text).group(1)
        step = attacker.post(urljoin(str(form_page.url), action), data={"prompt": "login", "login": "rita",
                                                                         "password": "any"})
        while not step.headers["location"].startswith(f"{base}/login/oidc/callback"):
            step = attacker.get(urljoin(str(step.url), step.headers["location"]))
        callback = step.headers["location"]

        victim.get(f"{base}/login/oidc", params={"next": "/review"})  # the victim's own pending sign-in
        refused = victim.get(callback)
        assert refused.status_code == 403 and "did not start here" in refused.text
        assert "mw_session" not in victim.cookies
        assert attacker.get(callback, follow_redirects=False).status_code == 303  # the rightful browser gets in
