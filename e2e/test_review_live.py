"""Live review pages (server-sent events): what another reviewer does shows up without a reload."""

import re

import pytest
from playwright.sync_api import expect

from app.services import review
from e2e.helpers import ACTOR, open_change, sign_in

pytestmark = pytest.mark.e2e


def _marked(page) -> float:
    """A value only this document holds: still there later means the page was not reloaded."""
    return page.evaluate("() => (window.__marker = Math.random())")


def test_change_page_shows_another_reviewers_rejection_live(browser, world, artifacts_dir):
    staged = world.remember("Dana's locker code is 4411.", staged=True)
    alice, bob = world.reviewer(), world.reviewer()
    bob_context, alice_context = browser.new_context(), browser.new_context()
    try:
        bob_page = bob_context.new_page()
        sign_in(bob_page, world.base_url, bob)
        open_change(bob_page, world.base_url, staged["change_id"])
        expect(bob_page.locator('#review-live[data-live="open"]')).to_have_count(1, timeout=10_000)
        marker = _marked(bob_page)

        alice_page = alice_context.new_page()
        sign_in(alice_page, world.base_url, alice)
        open_change(alice_page, world.base_url, staged["change_id"])
        alice_page.locator('textarea[name="reason"]').fill("not ours to keep")
        alice_page.get_by_test_id("reject").click()
        expect(alice_page.get_by_test_id("decided")).to_have_attribute("data-status", "rejected")

        banner = bob_page.get_by_test_id("live-decided")
        expect(banner).to_be_visible(timeout=5_000)
        expect(banner).to_contain_text(f"Rejected by {alice}")
        expect(banner).to_contain_text(re.compile(r"\d+ s ago"))
        expect(bob_page.get_by_test_id("approve")).to_be_disabled()
        expect(bob_page.get_by_test_id("reject")).to_be_disabled()
        assert bob_page.evaluate("() => window.__marker") == marker  # no reload
        bob_page.screenshot(path=str(artifacts_dir / "review-live-banner.png"), full_page=True)
    finally:
        bob_context.close()
        alice_context.close()


def test_oldest_first_queue_shows_a_new_change_through_the_stream(page, world):
    first = world.remember("Evan parks in bay 12.", staged=True)
    sign_in(page, world.base_url, world.reviewer())
    page.goto(f"{world.base_url}/review?tenant={world.tenant.name}&sort=oldest")
    expect(page.locator('[data-testid="change-row"]')).to_have_count(1)
    # Once the stream is open the 2 s poller is gone: what follows can only come from the stream.
    expect(page.locator('#queue-live[data-live="open"]')).to_have_count(1, timeout=10_000)
    expect(page.locator("#queue-poller")).to_have_count(0)
    marker = _marked(page)
    page.keyboard.press("j")  # keyboard review is on the first row
    expect(page.locator('[data-testid="change-row"].selected')).to_have_count(1)
    staged = world.remember("Evan now parks in bay 14.", staged=True)
    rows = page.locator('[data-testid="change-row"]')
    expect(rows).to_have_count(2, timeout=5_000)
    # The re-read view keeps the row keyboard review was on, focused.
    expect(rows.nth(0).locator("a.preview")).to_be_focused()
    expect(rows.nth(1).get_by_test_id("new-badge")).to_be_visible()
    expect(rows.nth(0)).to_have_attribute("data-change-id", first["change_id"])
    expect(rows.nth(1)).to_have_attribute("data-change-id", staged["change_id"])
    expect(page.get_by_test_id("queue-total")).to_contain_text("2 pending")
    assert page.evaluate("() => window.__marker") == marker


def test_without_eventsource_the_queue_falls_back_to_polling(page, world):
    page.add_init_script("delete window.EventSource")
    sign_in(page, world.base_url, world.reviewer())
    expect(page.get_by_test_id("queue-empty")).to_be_visible()
    page.wait_for_timeout(1500)
    expect(page.locator("#queue-poller")).to_have_count(1)  # no stream opened: the poller stays
    assert page.locator('[data-live="open"]').count() == 0
    staged = world.remember("Fay's badge number changed.", staged=True)
    expect(page.locator(f'[data-testid="change-row"][data-change-id="{staged["change_id"]}"]')).to_be_visible(
        timeout=10_000)


def test_without_eventsource_the_change_page_polls_for_the_banner(page, world):
    page.add_init_script("delete window.EventSource")
    staged = world.remember("Gil's parking pass expires in May.", staged=True)
    sign_in(page, world.base_url, world.reviewer())
    open_change(page, world.base_url, staged["change_id"])
    marker = _marked(page)
    review.decide(world.ctx, tenant_id=world.tenant.id, change_id=staged["change_id"], actor=ACTOR,
                  may_see=lambda agent: True, request=review.DecisionRequest(decision="reject", reason="elsewhere"))
    banner = page.get_by_test_id("live-decided")
    expect(banner).to_contain_text("Rejected by", timeout=10_000)
    expect(page.get_by_test_id("approve")).to_be_disabled()
    assert page.evaluate("() => window.__marker") == marker
