"""Accounts of people who sign in through the OpenID provider, at the service level: the tenant's
rule as set and cleared, provisioning beside local accounts, roles kept or changed. (The flow
itself, against a real provider, is tests/integration/test_oidc_sign_in.py.)"""

import re

import pytest

from app.errors import ValidationFailed
from app.services.tenancy import users
from app.services.tenancy.oidc import UNUSABLE_PASSWORD, SignInRefused, set_oidc_rule, sign_in_with_claims
from app.services.tenancy.users import create_user, find_user, list_users, set_role
from tests.harness import unique

ACTOR = {"kind": "test", "id": "pytest"}
ISSUER = "https://idp.example.test"
PASSWORD = "correct horse battery"


def claims(sub, email, groups):
    return {"sub": sub, "email": email, "email_verified": True, "groups": groups}


def role_in(ctx, tenant_id, user_id):
    return {u.id: r.role for u, r in list_users(ctx, tenant_id)}.get(user_id)


@pytest.fixture
def group():
    return unique("grp")


@pytest.fixture
def ruled(ctx, tenant, group):
    set_oidc_rule(ctx, tenant_id=tenant.id, role_claim="groups", role_map=f"{group}-admins=admin,{group}=reviewer",
                  email_domains=None, actor=ACTOR)
    return tenant


@pytest.mark.parametrize("role_map", ["reviewers", "reviewers=owner", "=viewer"])
def test_a_bad_role_map_is_refused_and_nothing_stored(ctx, tenant, role_map):
    with pytest.raises(ValidationFailed) as refused:
        set_oidc_rule(ctx, tenant_id=tenant.id, role_claim=None, role_map=role_map, email_domains=None, actor=ACTOR)
    assert refused.value.details[0]["path"] == "/oidc"
    assert "oidc" not in (ctx.db.sessions().get(type(tenant), tenant.id).settings or {})


def test_an_empty_role_map_turns_provider_sign_in_off_for_the_tenant(ctx, ruled, group):
    sign_in_with_claims(ctx, issuer=ISSUER, claims=claims(unique("s"), f"{group}@example.com", [group]), client="10.0.0.1")
    assert set_oidc_rule(ctx, tenant_id=ruled.id, role_claim=None, role_map="", email_domains=None, actor=ACTOR) is None
    with pytest.raises(SignInRefused):
        sign_in_with_claims(ctx, issuer=ISSUER, claims=claims(unique("s"), f"new-{group}@example.com", [group]),
                            client="10.0.0.1")


def test_a_provisioned_account_never_takes_over_a_local_one_and_has_no_password(ctx, ruled, group):
    email = f"{group}@example.com"
    local = create_user(ctx, username=email, password=PASSWORD, tenant_id=ruled.id, role="viewer", actor=ACTOR)
    sign_in_with_claims(ctx, issuer=ISSUER, claims=claims("sub-1", email, [group]), client="10.0.0.1")
    assert role_in(ctx, ruled.id, local.id) == "viewer"  # the local account is untouched
    provisioned = next(u for u, _ in list_users(ctx, ruled.id) if u.oidc_subject == "sub-1")
    assert provisioned.username.startswith(email + "-") and role_in(ctx, ruled.id, provisioned.id) == "reviewer"
    with pytest.raises(ValidationFailed):  # no password opens an account tied to the provider
        users.sign_in(ctx, provisioned.username, UNUSABLE_PASSWORD, client="10.0.0.2")
    assert users.sign_in(ctx, email, PASSWORD, client="10.0.0.2")  # the local one still signs in


def test_usernames_keep_to_the_characters_a_username_may_hold(ctx, ruled, group):
    sign_in_with_claims(ctx, issuer=ISSUER, client=None,
                        claims={"sub": "s/3", "preferred_username": f" Rita Smith/{group}", "groups": [group]})
    assert find_user(ctx, f"Rita-Smith-{group}").oidc_subject == "s/3"


def test_roles_follow_the_claims_but_hand_granted_roles_elsewhere_stay(ctx, ruled, group, make_tenant):
    elsewhere = make_tenant()
    sign_in_with_claims(ctx, issuer=ISSUER, claims=claims("sub-2", f"b-{group}@example.com", [group]), client=None)
    user = find_user(ctx, f"b-{group}@example.com")
    set_role(ctx, user_id=user.id, tenant_id=elsewhere.id, role="auditor", actor=ACTOR)

    sign_in_with_claims(ctx, issuer=ISSUER, claims=claims("sub-2", f"b-{group}@example.com", [f"{group}-admins"]),
                        client=None)
    assert role_in(ctx, ruled.id, user.id) == "admin"
    # Out of both groups: no role in the ruled tenant, but the operator's grant keeps them in.
    assert sign_in_with_claims(ctx, issuer=ISSUER, claims=claims("sub-2", "x", []), client=None)
    assert role_in(ctx, ruled.id, user.id) is None and role_in(ctx, elsewhere.id, user.id) == "auditor"


@pytest.fixture
def unreachable_idp_app(ctx):
    """The app configured for a provider nobody answers at (a port just closed)."""
    from starlette.testclient import TestClient

    from app.local_server import free_port
    from app.main import create_app

    settings = ctx.settings.with_changes(oidc_issuer=f"http://127.0.0.1:{free_port()}", oidc_client_id="memwarden",
                                         public_url="http://testserver", password_sign_in=False)
    with TestClient(create_app(settings, ctx=ctx), base_url="http://testserver") as client:
        yield client


def test_an_unreachable_provider_gets_a_page_saying_so_not_a_500(unreachable_idp_app):
    started = unreachable_idp_app.get("/login/oidc", follow_redirects=False)
    assert started.status_code == 503 and "cannot be reached" in started.text
    assert "mw_oidc" not in started.cookies


@pytest.mark.parametrize("query", ["?code=abc&state=xyz", "?error=access_denied&error_description=<b>no</b>", ""])
def test_a_callback_this_browser_did_not_start_is_refused(unreachable_idp_app, query):
    refused = unreachable_idp_app.get("/login/oidc/callback" + query, follow_redirects=False)
    assert refused.status_code == 403 and 'data-testid="oidc-refused"' in refused.text
    assert "<b>" not in refused.text and "mw_session" not in refused.cookies


def test_provider_settings_without_a_client_id_or_public_url_stop_startup(ctx):
    from app.main import create_app
    from app.services.tenancy.oidc_client import OidcMisconfigured

    for missing in ({"oidc_client_id": None, "public_url": "https://mw.example"},
                    {"oidc_client_id": "memwarden", "public_url": None}):
        with pytest.raises(OidcMisconfigured):
            create_app(ctx.settings.with_changes(oidc_issuer="https://idp.example", **missing), ctx=ctx)


def test_a_disabled_account_is_refused_whatever_the_provider_says(ctx, ruled, group):
    from sqlalchemy import text

    person = claims("sub-d", f"d-{group}@example.com", [f"{group}-admins"])
    sign_in_with_claims(ctx, issuer=ISSUER, claims=person, client=None)
    user = find_user(ctx, f"d-{group}@example.com")
    with ctx.db.sessions.begin() as session:
        session.execute(text("UPDATE users SET disabled_at = now() WHERE id = :u"), {"u": user.id})
    with pytest.raises(SignInRefused) as refused:
        sign_in_with_claims(ctx, issuer=ISSUER, claims=person, client=None)
    assert "disabled" in refused.value.message and role_in(ctx, ruled.id, user.id) == "admin"


def test_an_unreadable_client_secret_file_stops_startup(ctx, tmp_path):
    from app.main import create_app
    from app.services.tenancy.oidc_client import OidcMisconfigured

    with pytest.raises(OidcMisconfigured, match="CLIENT_SECRET_FILE"):
        create_app(ctx.settings.with_changes(oidc_issuer="https://idp.example", oidc_client_id="memwarden",
                                             public_url="https://mw.example",
                                             oidc_client_secret_file=tmp_path / "missing"), ctx=ctx)


def test_the_admin_page_marks_accounts_that_sign_in_through_the_provider(client, ctx, ruled, group):
    from tests.harness import web_sign_in

    admin = create_user(ctx, username=f"adm-{group}", password=PASSWORD, tenant_id=ruled.id, role="admin", actor=ACTOR)
    sign_in_with_claims(ctx, issuer=ISSUER, claims=claims("sub-a", f"p-{group}@example.com", [group]), client=None)
    assert web_sign_in(client, admin.username, PASSWORD, "/admin").status_code == 303
    page = client.get("/admin").text
    rows = {m.group(1): m.group(0) for m in re.finditer(r'data-username="([^"]+)".*?</tr>', page, re.S)}
    assert 'data-testid="via-provider"' in rows[f"p-{group}@example.com"]
    assert 'data-testid="via-provider"' not in rows[admin.username]
