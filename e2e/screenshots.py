"""Regenerate the README's screenshots on purpose: `python -m e2e.screenshots [--out DIR]`.

Starts `memwarden serve --demo` on a throw-away data directory (its own embedded PostgreSQL), signs
in as the demo admin in Debian's Chromium and photographs the home page, the review queue (desktop
and phone width) and a change's diff. The browser tests never write here; they keep their
screenshots in the git-ignored `test-results/screenshots/`.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from e2e.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.harness import free_port, fresh_env, wait_ready

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "screenshots"
SIGN_IN = re.compile(r"sign in at /login as (\S+) / (\S+)")


def _demo_server(data_dir: Path) -> tuple[subprocess.Popen, str, str, str]:
    """`memwarden serve --demo` on a free port: the process, its URL and the demo sign-in."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--demo", "--port", str(port)], cwd=ROOT,
                            env=fresh_env(data_dir), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        found = SIGN_IN.search(line)
        if found:
            base_url = f"http://127.0.0.1:{port}"
            wait_ready(base_url, proc)
            return proc, base_url, found.group(1), found.group(2)
    raise RuntimeError(f"memwarden serve --demo exited ({proc.wait()}) without printing a sign-in")


def capture(out: Path) -> list[Path]:
    """Photograph the demo; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="memwarden-shots-") as data_dir:
        proc, base_url, username, password = _demo_server(Path(data_dir))
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.goto(base_url + "/login")
                page.get_by_label("Username").fill(username)
                page.get_by_label("Password").fill(password)
                page.get_by_test_id("login-submit").click()
                page.wait_for_url(re.compile(r"/review"))

                def shot(name: str, full_page: bool = True) -> None:
                    path = out / name
                    page.screenshot(path=str(path), full_page=full_page)
                    written.append(path)

                page.goto(base_url + "/")
                shot("home.png", full_page=False)
                page.goto(base_url + "/review")  # highest risk first is the default
                shot("review-queue.png")
                page.set_viewport_size({"width": 390, "height": 844})
                page.reload()  # as a phone opens it: filters folded, the bulk bar pinned to the bottom
                page.get_by_test_id("change-row").first.wait_for()
                shot("review-queue-390.png", full_page=False)  # one phone screen, as a person sees it
                page.set_viewport_size({"width": 1280, "height": 800})
                page.get_by_test_id("change-preview").filter(has_text="purple").click()
                page.get_by_test_id("diff").wait_for()
                shot("review-diff.png")
                browser.close()
        finally:
            proc.terminate()  # serve stops its embedded PostgreSQL on SIGTERM
            proc.wait(30)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"folder to write (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    for path in capture(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
