"""Live review pages (server-sent events): what another reviewer does shows up without a reload."""

import re

import pytest
from playwright.sync_api import expect

from app.services.review import review
from app.services.tenancy.tenant_config import set_policy
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


def _queue_row(page, change_id: str):
    return page.locator(f'[data-testid="change-row"][data-change-id="{change_id}"]')


def test_a_withdrawn_change_leaves_other_reviewers_queue_and_page_live(browser, world):
    staged = world.remember("Hana's desk moved to floor 3.", staged=True)
    context = browser.new_context()
    try:
        queue, change = context.new_page(), context.new_page()
        sign_in(queue, world.base_url, world.reviewer())
        expect(_queue_row(queue, staged["change_id"])).to_have_count(1)
        open_change(change, world.base_url, staged["change_id"])
        expect(queue.locator('#queue-live[data-live="open"]')).to_have_count(1, timeout=10_000)
        expect(change.locator('#review-live[data-live="open"]')).to_have_count(1, timeout=10_000)
        markers = _marked(queue), _marked(change)

        withdrawn = world.http.post(f"/v1/changes/{staged['change_id']}/withdraw")
        assert withdrawn.status_code == 200, withdrawn.text

        banner = change.get_by_test_id("live-decided")
        expect(banner).to_contain_text("Withdrawn by the agent", timeout=5_000)
        expect(banner).to_contain_text(re.compile(r"\d+ s ago"))
        expect(banner).to_have_attribute("data-status", "withdrawn")
        expect(change.get_by_test_id("approve")).to_be_disabled()
        expect(_queue_row(queue, staged["change_id"])).to_have_count(0, timeout=5_000)
        expect(queue.get_by_test_id("queue-total")).to_have_text("0 pending")
        assert (queue.evaluate("() => window.__marker"), change.evaluate("() => window.__marker")) == markers
    finally:
        context.close()


def test_the_first_of_two_approvals_shows_live_and_the_second_reviewer_can_approve(browser, world):
    set_policy(world.ctx, tenant_id=world.tenant.id, actor=ACTOR, doc={"rules": [
        {"id": "pairs", "match": {"agents": ["pair-*"]}, "action": "require_approval", "approvals_required": 2}]})
    staged = world.remember("The vault door code rotates weekly.", agent="pair-bot", staged=True)
    alice, bob = world.reviewer(), world.reviewer()
    alice_context, bob_context = browser.new_context(), browser.new_context()
    try:
        bob_queue, bob_page = bob_context.new_page(), bob_context.new_page()
        sign_in(bob_queue, world.base_url, bob)
        expect(_queue_row(bob_queue, staged["change_id"]).locator('td[data-label="Approvals"]')).to_have_text("0/2")
        open_change(bob_page, world.base_url, staged["change_id"])
        expect(bob_page.get_by_test_id("approvals-needed")).to_contain_text("has 0")
        expect(bob_queue.locator('#queue-live[data-live="open"]')).to_have_count(1, timeout=10_000)
        expect(bob_page.locator('#review-live[data-live="open"]')).to_have_count(1, timeout=10_000)
        markers = _marked(bob_queue), _marked(bob_page)

        alice_page = alice_context.new_page()
        sign_in(alice_page, world.base_url, alice)
        open_change(alice_page, world.base_url, staged["change_id"])
        alice_page.get_by_test_id("approve").click()
        expect(alice_page.get_by_test_id("decided")).to_have_attribute("data-status", "pending")
        # Alice's own page says so already: her stream sends her no banner about her own approval.
        expect(alice_page.get_by_test_id("live-approval")).to_have_count(0)

        banner = bob_page.get_by_test_id("live-approval")
        expect(banner).to_contain_text(f"Approved by {alice} (1 of 2)", timeout=5_000)
        expect(banner).to_contain_text(re.compile(r"\d+ s ago"))
        # The page re-read the still-pending change: one approval given, Bob's would be the last.
        expect(bob_page.get_by_test_id("approvals")).to_contain_text("1 of 2")
        expect(bob_page.get_by_test_id("approvals")).to_contain_text(alice)
        expect(bob_page.get_by_test_id("approvals-needed")).to_have_count(0)
        expect(bob_page.get_by_test_id("live-decided")).to_have_count(0)
        expect(_queue_row(bob_queue, staged["change_id"]).locator('td[data-label="Approvals"]')).to_have_text(
            "1/2", timeout=5_000)
        assert (bob_queue.evaluate("() => window.__marker"), bob_page.evaluate("() => window.__marker")) == markers

        bob_page.get_by_test_id("approve").click()  # still offered, and it works: no stale review
        expect(bob_page.get_by_test_id("decided")).to_have_attribute("data-status", "approved")
        change = world.http.get(f"/v1/changes/{staged['change_id']}").json()
        assert change["status"] == "approved" and [a["name"] for a in change["approvals"]] == [alice, bob]
    finally:
        alice_context.close()
        bob_context.close()


def test_the_second_page_of_the_risk_sorted_queue_follows_the_stream(page, world):
    """Every sort and page stays current, not only page 1 newest first: the last page of the queue
    sorted by risk gains a change staged meanwhile (its place in that order) and loses one decided
    elsewhere, from the stream alone, without a reload."""
    from app.web.review import PAGE

    staged = [world.remember(f"Iris's filing note number {i}.", staged=True) for i in range(PAGE + 1)]
    sign_in(page, world.base_url, world.reviewer())
    page.goto(f"{world.base_url}/review?tenant={world.tenant.name}&sort=risk")
    page.get_by_role("link", name="Next page →").click()
    # Risk first is the default order, so its links leave the sort out; the page is still risk-sorted.
    expect(page).to_have_url(re.compile(r"after="))
    expect(page.get_by_test_id("sort")).to_have_value("risk")
    expect(page.locator('#queue-live[data-live="open"]')).to_have_count(1, timeout=10_000)
    expect(page.locator("#queue-poller")).to_have_count(0)  # what follows can only come from the stream
    rows = page.locator('[data-testid="change-row"]')
    expect(rows).to_have_count(1)
    last = staged[-1]["change_id"]
    expect(rows.first).to_have_attribute("data-change-id", last)
    marker = _marked(page)

    newer = world.remember("Iris's newest filing note.", staged=True)  # no risk: it sorts last, onto this page
    expect(rows).to_have_count(2, timeout=5_000)
    expect(rows.nth(1)).to_have_attribute("data-change-id", newer["change_id"])
    review.decide(world.ctx, tenant_id=world.tenant.id, change_id=last, actor=ACTOR,
                  may_see=lambda agent: True, request=review.DecisionRequest(decision="reject", reason="elsewhere"))
    expect(_queue_row(page, last)).to_have_count(0, timeout=5_000)
    expect(page.get_by_test_id("queue-total")).to_have_text(f"{PAGE + 1} pending")
    assert page.evaluate("() => window.__marker") == marker


def test_without_eventsource_the_change_page_polls_for_another_reviewers_approval(browser, world):
    set_policy(world.ctx, tenant_id=world.tenant.id, actor=ACTOR, doc={"rules": [
        {"id": "pairs", "match": {"agents": ["pair-*"]}, "action": "require_approval", "approvals_required": 2}]})
    staged = world.remember("The safe code changes monthly.", agent="pair-bot", staged=True)
    alice, bob = world.reviewer(), world.reviewer()
    context = browser.new_context()
    try:
        page = context.new_page()
        page.add_init_script("delete window.EventSource")
        sign_in(page, world.base_url, bob)
        open_change(page, world.base_url, staged["change_id"])
        expect(page.get_by_test_id("approvals-needed")).to_contain_text("has 0")
        marker = _marked(page)
        # Alice gives the first approval (through the service, as a person: her name is kept with it).
        review.decide(world.ctx, tenant_id=world.tenant.id, change_id=staged["change_id"],
                      actor={"kind": "user", "id": f"usr-{alice}", "name": alice}, may_see=lambda agent: True,
                      request=review.DecisionRequest(decision="approve"))
        banner = page.get_by_test_id("live-approval")
        expect(banner).to_contain_text(f"Approved by {alice} (1 of 2)", timeout=12_000)
        expect(page.get_by_test_id("approvals")).to_contain_text("1 of 2", timeout=5_000)
        expect(page.get_by_test_id("approvals-needed")).to_have_count(0)
        assert page.evaluate("() => window.__marker") == marker
    finally:
        context.close()
