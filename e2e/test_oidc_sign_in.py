"""A real Chromium signs in through a real OpenID provider (oidc-provider, run by Node) and out again:
the redirects, the short-lived sign-in cookie and the session cookie under the real CSP, with local
passwords turned off. (The same stack as tests/integration/test_oidc_sign_in.py.)"""

import pytest
from playwright.sync_api import expect

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
