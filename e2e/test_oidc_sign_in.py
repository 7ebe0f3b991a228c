"""A real Chromium signs in through a real OpenID provider (oidc-provider, run by Node) and out again:
the redirects, the short-lived sign-in cookie and the session cookie under the real CSP, with local
passwords turned off. (The same stack as tests/integration/test_oidc_sign_in.py.)"""

import pytest
from playwright.sync_api import expect

from e2e.test_accessibility import AXE_PATH, VIEWPORTS, describe_violations, axe_source, check_current  # noqa: F401 (a fixture)
from tests.integration.test_oidc_sign_in import RUN, provider_script, sso_tenant, stack  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e


def test_sign_in_through_the_provider_and_out_again(page, stack, sso_tenant):  # noqa: F811
    base, _, _ = stack
    violations: list[str] = []
    page.on("console", lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.goto(base + "/review")  # signed out: sent to the sign-in page, which offers only the provider
    expect(page.locator("input[name=password]")).to_have_count(0)
    page.get_by_test_id("oidc-sign-in").click()

    page.locator("input[name=login]").fill("rita")  # the provider's own login form
    page.locator("input[name=password]").fill("anything")
    page.locator("button[type=submit]").click()
    page.wait_for_url(base + "/review")
    expect(page.locator(".who")).to_contain_text(f"rita.{RUN}@example.com")

    page.get_by_test_id("sign-out").click()
    page.wait_for_url(base + "/login?signed_out=1")
    page.get_by_test_id("provider-sign-out").click()
    page.get_by_role("button", name="Yes, sign me out").click()  # the provider's end-session confirmation
    page.wait_for_url(base + "/login")
    page.goto(base + "/review")
    expect(page).to_have_url(base + "/login?next=/review")
    page.get_by_test_id("oidc-sign-in").click()
    expect(page.locator("input[name=login]")).to_be_visible()  # signed out at the provider too
    assert violations == []


def test_the_sign_in_pages_of_a_provider_have_no_blocking_axe_violation(page, stack, sso_tenant, axe_source):  # noqa: F811
    """axe-core (as in e2e/test_accessibility.py) on what only OpenID sign-in shows: the sign-in page
    offering the provider alone, the signed-out page offering the provider's sign-out, and the page
    of a refused sign-in, at both viewports."""
    base, _, _ = stack
    page.route(base + AXE_PATH, lambda route: route.fulfill(status=200, content_type="text/javascript", body=axe_source))
    found: dict[str, list[dict]] = {}
    for viewport in VIEWPORTS:
        page.set_viewport_size(viewport)
        page.goto(base + "/login")
        expect(page.get_by_test_id("oidc-sign-in")).to_be_visible()
        check_current(page, base, f"/login @ {viewport['width']}px", found)
        page.goto(base + "/login?signed_out=1")
        expect(page.get_by_test_id("provider-sign-out")).to_be_visible()
        check_current(page, base, f"/login?signed_out=1 @ {viewport['width']}px", found)
        page.goto(base + "/login/oidc/callback?code=x&state=y")  # no sign-in started here: refused
        expect(page.get_by_test_id("oidc-refused")).to_be_visible()
        check_current(page, base, f"refused sign-in @ {viewport['width']}px", found)
    assert found == {}, describe_violations(found)
