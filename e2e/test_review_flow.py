"""Reviewers in a real Chromium against a live server and the real database (contract §5)."""

import json
import re
import time

import pytest
from playwright.sync_api import expect

from app.services.tenancy.tenant_config import set_policy
from e2e.helpers import ACTOR, World, open_change, sign_in

pytestmark = pytest.mark.e2e


def test_sign_in_and_staged_write_appears_in_queue_without_reload(page, world, artifacts_dir):
    sign_in(page, world.base_url, world.reviewer())
    expect(page.get_by_test_id("change-row")).to_have_count(0)
    marker = page.evaluate("() => (window.__marker = Math.random())")
    staged = world.remember("Alice now prefers green tea.", staged=True)
    row = page.locator(f'[data-testid="change-row"][data-change-id="{staged["change_id"]}"]')
    expect(row).to_be_visible(timeout=10_000)
    assert page.evaluate("() => window.__marker") == marker  # same document: no reload happened
    page.screenshot(path=str(artifacts_dir / "review-queue.png"), full_page=True)


def test_diff_shows_nearest_live_memory_and_approve_makes_it_recallable(page, world, artifacts_dir):
    live = world.remember("Alice's favourite colour is teal.", user_id="alice")
    staged = world.remember("Alice's favourite colour is purple.", staged=True, user_id="alice")
    sign_in(page, world.base_url, world.reviewer())
    open_change(page, world.base_url, staged["change_id"])
    diff = page.get_by_test_id("diff")
    expect(diff).to_contain_text(live["id"])
    expect(diff.locator("del")).to_contain_text("teal")
    expect(diff.locator("ins")).to_contain_text("purple")
    expect(page.get_by_test_id("flag-contradiction")).to_be_visible()
    page.screenshot(path=str(artifacts_dir / "review-diff.png"), full_page=True)
    if page.get_by_test_id("confirm-risk").count():  # a contradiction's risk may ask for confirmation
        page.get_by_test_id("confirm-risk").check()
    page.get_by_test_id("approve").click()
    expect(page.get_by_test_id("decided")).to_have_attribute("data-status", "approved")
    assert staged["id"] in [h["id"] for h in world.recall("Alice favourite colour")]


def test_reject_with_reason_never_appears(page, world):
    staged = world.remember("Bob's salary is 1 million.", staged=True)
    sign_in(page, world.base_url, world.reviewer())
    open_change(page, world.base_url, staged["change_id"])
    page.locator('textarea[name="reason"]').fill("speculation, not a fact")
    page.get_by_test_id("reject").click()
    expect(page.get_by_test_id("decided")).to_have_attribute("data-status", "rejected")
    assert world.recall("Bob salary") == []
    status = world.http.get(f"/v1/changes/{staged['change_id']}").json()
    assert status["status"] == "rejected" and status["reason"] == "speculation, not a fact"


def test_approve_with_edit_stores_the_edited_text(page, world):
    staged = world.remember("Carol works at Initek.", staged=True)
    sign_in(page, world.base_url, world.reviewer())
    open_change(page, world.base_url, staged["change_id"])
    page.get_by_text("Edit before approving").click()
    page.get_by_test_id("edit-content").fill("Carol works at Initech as a staff engineer.")
    page.get_by_test_id("approve-edited").click()
    expect(page.get_by_test_id("decided")).to_have_attribute("data-status", "approved")
    entry = world.http.get(f"/v1/memories/{staged['id']}").json()
    assert entry["content"] == "Carol works at Initech as a staff engineer."


def test_stale_review_is_refused_and_the_fresh_diff_shown(page, world):
    world.remember("Dave's flight leaves at 9am.")
    staged = world.remember("Dave's flight leaves at 10am.", staged=True)
    sign_in(page, world.base_url, world.reviewer())
    open_change(page, world.base_url, staged["change_id"])
    newer = world.remember("Dave's flight leaves at 11am.")  # live state moves while the page is open
    page.get_by_test_id("approve").click()
    expect(page.get_by_test_id("review-message")).to_contain_text("fresh diff")
    expect(page.get_by_test_id("diff")).to_contain_text(newer["id"])
    assert world.http.get(f"/v1/changes/{staged['change_id']}").json()["status"] == "pending"
    page.get_by_test_id("approve").click()  # approving the fresh diff works
    expect(page.get_by_test_id("decided")).to_have_attribute("data-status", "approved")


def test_two_reviewers_satisfy_a_two_person_rule(browser, world):
    set_policy(world.ctx, tenant_id=world.tenant.id, actor=ACTOR, doc={"rules": [
        {"id": "payments-two-person", "match": {"agents": ["payments-*"]}, "action": "require_approval",
         "approvals_required": 2}]})
    response = world.http.post("/v1/memories/remember", json={"agent_id": "payments-bot", "type": "semantic",
                                                              "content": "Refund limit is 500 EUR."})
    assert response.status_code == 202  # the policy, not the agent, asked for review
    staged = response.json()
    first, second = world.reviewer(), world.reviewer()
    for username, expected in ((first, "pending"), (first, None), (second, "approved")):
        context = browser.new_context()
        page = context.new_page()
        sign_in(page, world.base_url, username)
        open_change(page, world.base_url, staged["change_id"])
        if expected == "pending":  # the first approval is said not to change live memory yet
            expect(page.get_by_test_id("approvals-needed")).to_contain_text("needs 2 approvals")
        if expected:
            page.get_by_test_id("approve").click()
            expect(page.get_by_test_id("decided")).to_have_attribute("data-status", expected)
        else:  # the same reviewer is told they approved and offered no second approve
            expect(page.get_by_test_id("you-approved")).to_contain_text("You already approved this change")
            expect(page.get_by_test_id("approve")).to_have_count(0)
        context.close()
    change = world.http.get(f"/v1/changes/{staged['change_id']}").json()
    assert change["status"] == "approved" and len(change["approvals"]) == 2


def test_keyboard_only_review_of_three_items(page, world):
    staged = [world.remember(f"Keyboard fact number {i}.", staged=True) for i in range(3)]
    sign_in(page, world.base_url, world.reviewer())
    expect(page.get_by_test_id("change-row")).to_have_count(3)
    page.keyboard.press("j")
    expect(page.locator('[data-testid="change-row"].selected')).to_have_attribute(
        "data-change-id", staged[0]["change_id"])
    page.keyboard.press("Enter")
    for item in staged:
        expect(page).to_have_url(re.compile(item["change_id"]))
        expect(page.get_by_test_id("diff")).to_be_visible()
        page.keyboard.press("a")
        expect(page.get_by_test_id("decided")).to_have_attribute("data-status", "approved")
        page.keyboard.press("n")
    for item in staged:
        assert world.http.get(f"/v1/changes/{item['change_id']}").json()["status"] == "approved"


XSS = ['<script>alert("xss-content")</script>', '"><img src=x onerror=alert("xss-attr")>']


def test_hostile_content_metadata_and_agent_id_render_as_text(page, world):
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    hostile_agent = "agent<b>x</b>"
    staged = world.http.post("/v1/memories/remember", json={
        "agent_id": "evil-agent", "type": "semantic", "content": XSS[0] + " and " + XSS[1],
        "tags": [XSS[1]], "metadata": {"note": XSS[0]}, "approval_required": True}).json()
    assert world.http.post("/v1/memories/remember", json={"agent_id": hostile_agent, "type": "semantic",
                                                         "content": "x"}).status_code == 422
    sign_in(page, world.base_url, world.reviewer())
    open_change(page, world.base_url, staged["change_id"])
    expect(page.get_by_test_id("proposed-content")).to_have_text(XSS[0] + " and " + XSS[1])
    expect(page.get_by_test_id("proposed-metadata")).to_contain_text(json.dumps(XSS[0]))
    assert page.locator("img[src=x]").count() == 0 and page.locator("script:not([src])").count() == 0
    page.get_by_test_id("approve").click()
    expect(page.get_by_test_id("decided")).to_be_visible()
    time.sleep(0.3)
    assert dialogs == []


def test_a_request_without_csrf_token_is_refused(page, world):
    staged = world.remember("Erin's badge is 42.", staged=True)
    sign_in(page, world.base_url, world.reviewer())
    open_change(page, world.base_url, staged["change_id"])
    status = page.evaluate("""async (url) => {
        const r = await fetch(url, {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'},
                                    body: 'reason=x'});
        return r.status; }""", f"{world.base_url}/review/{staged['change_id']}/approve")
    assert status == 403
    assert world.http.get(f"/v1/changes/{staged['change_id']}").json()["status"] == "pending"


def test_reviewer_of_tenant_a_cannot_open_tenant_b_change(page, world, committed_ctx, live_server):
    other = World(committed_ctx, live_server)
    foreign = other.remember("Tenant B's secret roadmap.", staged=True)
    sign_in(page, world.base_url, world.reviewer())
    response = page.goto(f"{world.base_url}/review/{foreign['change_id']}")
    assert response.status == 404
    expect(page.locator("body")).not_to_contain_text("roadmap")
    other.http.close()
