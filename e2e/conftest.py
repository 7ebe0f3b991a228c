"""Browser fixtures: Playwright drives Debian's Chromium against the live server."""

from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# Screenshots the tests take go to a git-ignored folder; the README's images are regenerated only on
# purpose, by `python -m e2e.screenshots`, so running the tests never rewrites tracked files.
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-results" / "screenshots"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS, "headless": True}


# Playwright's sync API keeps an event loop running on the thread that started it. The suite runs in
# parallel workers (pytest-xdist), where a worker may run other tests after a browser module; those
# call `asyncio.run`, which refuses to start while that loop is running. So Playwright and its
# browser live for one module, not for the session.
@pytest.fixture(scope="module")
def playwright():
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="module")
def browser_type(playwright, browser_name: str):
    return getattr(playwright, browser_name)


@pytest.fixture(scope="module")
def launch_browser(browser_type_launch_args: dict, browser_type):
    return lambda **kwargs: browser_type.launch(**{**browser_type_launch_args, **kwargs})


@pytest.fixture(scope="module")
def browser_context_args(base_url: str) -> dict:
    return {"base_url": base_url}


@pytest.fixture(scope="module")
def browser(launch_browser):
    browser = launch_browser()
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def base_url(live_server: str) -> str:
    return live_server


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def world(committed_ctx, live_server):
    """A fresh tenant (so queues and counts are the test's own) with an agent key on the live server."""
    from e2e.helpers import World

    w = World(committed_ctx, live_server)
    yield w
    w.http.close()
