"""Smoke: a real Chromium opens the home page, the CSP header is strict and htmx loaded."""

import re

import pytest
from playwright.sync_api import expect

from app.middleware import CSP

pytestmark = pytest.mark.e2e


def test_home_page_loads_htmx_under_a_strict_csp(page, base_url, artifacts_dir):
    violations: list[str] = []
    page.on("console", lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None)
    response = page.goto(base_url + "/")
    assert response is not None and response.status == 200
    assert response.headers["content-security-policy"] == CSP
    expect(page.get_by_test_id("htmx-status")).to_have_attribute("data-htmx-version", re.compile(r"^2\.0\."))
    assert page.evaluate("() => typeof window.htmx") == "object"
    assert violations == []
    page.screenshot(path=str(artifacts_dir / "home.png"))
