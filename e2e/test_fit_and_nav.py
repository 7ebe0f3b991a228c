"""Every page fits a 390 px phone and a 1440 px desktop without sideways scrolling, the nav offers
only what the role may open, and the tab shows a favicon — in a real Chromium."""

import subprocess

import pytest
from playwright.sync_api import Page, expect

from e2e.conftest import ARTIFACTS
from e2e.helpers import open_change, sign_in
from tests.harness import PROJECT_ROOT

pytestmark = pytest.mark.e2e

WIDTHS = (390, 1440)
LONG_WORD = "unbroken" * 40  # hostile content need not contain spaces
NAV = {
    "viewer": ["Review", "Memories"],
    "reviewer": ["Review", "Memories"],
    "auditor": ["Review", "Memories", "Audit"],
    "admin": ["Review", "Memories", "Audit", "Admin"],
}


WIDEST = """() => {
  const root = document.documentElement, limit = root.clientWidth;
  if (root.scrollWidth <= limit) return null;
  const scrolls = el => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  const contained = el => { for (let a = el.parentElement; a; a = a.parentElement) if (scrolls(a)) return true; return false; };
  const culprits = [...document.querySelectorAll("body *")]
    .filter(el => el.getBoundingClientRect().right > limit + 0.5 && !contained(el))
    .map(el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + el.className : ""));
  return {extra: root.scrollWidth - limit, culprits: culprits.slice(-3)};
}"""


def overflow_at(page: Page, width: int) -> dict | None:
    """How far the page is wider than the viewport at `width` and the innermost elements sticking out;
    None when there is no horizontal scroll (document.documentElement.scrollWidth <= clientWidth)."""
    page.set_viewport_size({"width": width, "height": 900})
    return page.evaluate(WIDEST)


def test_every_page_fits_390_and_1440_without_horizontal_scroll(page, browser, world):
    live = world.remember(f"Olga's note: {LONG_WORD}", agent="agent-with-a-rather-long-identifier-0123456789",
                          tags=["tag-" + "x" * 60], metadata={"k": LONG_WORD})
    staged = world.remember(f"Olga now writes {LONG_WORD}\nand more", staged=True,
                            agent="agent-with-a-rather-long-identifier-0123456789")
    console_errors: list[str] = []
    page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
    sign_in(page, world.base_url, world.reviewer("admin"))
    pages = ["/", "/review", f"/review/{staged['change_id']}", "/memories", f"/memories/{live['id']}", "/audit",
             "/admin", "/review?sort=risk&risk=low", "/no-such-page", "/audit/decisions", "/admin/suggestions"]
    too_wide = {}
    for path in pages:
        page.goto(world.base_url + path)
        for width in WIDTHS:
            extra = overflow_at(page, width)
            if extra:
                too_wide[f"{path} @ {width}px"] = extra
    open_change(page, world.base_url, staged["change_id"])
    page.get_by_test_id("approve").click()  # the decided state re-renders in place: it must fit too
    expect(page.get_by_test_id("decided")).to_be_visible()
    if overflow_at(page, 390):
        too_wide["decided change @ 390px"] = overflow_at(page, 390)

    context = browser.new_context(viewport={"width": 390, "height": 800})
    anonymous = context.new_page()
    anonymous.goto(world.base_url + "/login")
    for width in WIDTHS:
        if overflow_at(anonymous, width):
            too_wide[f"/login @ {width}px"] = overflow_at(anonymous, width)
    context.close()
    assert too_wide == {}, f"pages wider than the viewport: {too_wide}"
    # No CSP violation or script error on any page (the 404 page's own failed load is expected).
    assert [e for e in console_errors if "404" not in e] == []


@pytest.mark.parametrize("role", list(NAV))
def test_nav_shows_exactly_the_pages_the_role_may_open(page, world, role):
    sign_in(page, world.base_url, world.reviewer(role))
    links = page.get_by_test_id("nav-link")
    expect(links).to_have_text(NAV[role])
    for href in links.evaluate_all("links => links.map(a => a.getAttribute('href'))"):
        assert page.request.get(world.base_url + href).status == 200, href
    for hidden in {"/audit", "/admin"} - {f"/{label.lower()}" for label in NAV[role]}:
        assert page.request.get(world.base_url + hidden, max_redirects=0).status == 403, hidden
    page.goto(world.base_url + "/")
    expect(page.get_by_test_id("home-link")).to_have_text(NAV[role])


def test_signed_out_pages_offer_no_nav_and_a_favicon(page, base_url):
    page.goto(base_url + "/")
    expect(page.get_by_test_id("nav-link")).to_have_count(0)
    icon = page.locator('link[rel="icon"]')
    response = page.request.get(base_url + icon.get_attribute("href"))
    assert response.status == 200 and response.headers["content-type"].startswith("image/svg+xml")
    legacy = page.request.get(base_url + "/favicon.ico")
    assert legacy.status == 200 and legacy.url.endswith("/static/favicon.svg")


def test_browser_test_screenshots_go_to_an_ignored_folder_not_the_readme_images():
    assert "docs" not in ARTIFACTS.relative_to(PROJECT_ROOT).parts
    ignored = subprocess.run(["git", "check-ignore", "-q", str(ARTIFACTS / "review-queue.png")], cwd=PROJECT_ROOT)
    assert ignored.returncode == 0, f"{ARTIFACTS} is not git-ignored"
