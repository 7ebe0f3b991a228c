"""The documentation site builds clean, and what points into it resolves.

`mkdocs build --strict` fails on a broken link or anchor, a page missing from disk, or a page on
disk missing from the navigation (mkdocs.yml's `validation`), so the build is the check.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


class _Loader(yaml.SafeLoader):
    """mkdocs.yml may carry `!!python/name:` tags for Markdown extensions; read them as text."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: suffix)


def _nav_pages(nav) -> list[str]:
    pages = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_the_site_builds_in_strict_mode(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "design" / "contract" / "index.html").is_file()


def test_every_page_on_disk_is_in_the_navigation_and_back():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    listed = set(_nav_pages(config["nav"]))
    on_disk = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md") if "bench" not in path.parts}
    assert listed == on_disk, (sorted(on_disk - listed), sorted(listed - on_disk))


def test_the_site_fetches_nothing_from_elsewhere():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    assert config["theme"]["font"] is False  # Material would load Google Fonts
    assert not config.get("extra_javascript") and not config.get("extra_css")
    assert not (config.get("extra") or {}).get("analytics")


def test_every_contract_citation_in_the_code_resolves():
    """The code cites "contract §N"; each N is a numbered section of docs/design/contract.md."""
    sections = set(re.findall(r"^## §(\d+) ", (DOCS / "design" / "contract.md").read_text(), re.M))
    assert sections == {str(n) for n in range(1, 9)}
    cited = set()
    for folder in ("app", "client", "schemas", "tests", "e2e"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".json"} and path.is_file():
                text = path.read_text(errors="replace")
                cited |= set(re.findall(r"[Cc]ontract §(\d+)", text))
                cited |= {n for group in re.findall(r"[Cc]ontract §\d+(?:,? §\d+)+", text)
                          for n in re.findall(r"§(\d+)", group)}
    assert cited, "no citation found: the pattern is wrong"
    assert cited <= sections, sorted(cited - sections)


def test_the_readme_is_short_and_its_links_land():
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    targets = re.findall(r"\]\(((?:docs/|LICENSE)[^)#\s]*)(?:#[^)]*)?\)", text)
    assert len(targets) > 10
    for target in targets:
        assert (ROOT / target).exists(), target


def test_every_error_code_is_in_the_contract_page():
    """Each code `app/errors.py` can answer with is in the contract's error table, with its status."""
    from app import errors

    page = (DOCS / "design" / "contract.md").read_text()
    table = dict(re.findall(r"^\| `([a-z_]+)`(?: / `[a-z_]+`)? \| (\d{3}) \|", page, re.M))
    table.update(re.findall(r"^\| `[a-z_]+` / `([a-z_]+)` \| (\d{3}) \|", page, re.M))
    raised = {cls.code: cls.status for cls in vars(errors).values()
              if isinstance(cls, type) and issubclass(cls, errors.AppError) and cls is not errors.AppError}
    raised.pop("bad_request", None)  # defined, raised nowhere: unreadable bodies are validation errors
    assert raised
    for code, status in raised.items():
        assert table.get(code) == str(status), f"{code} ({status}) is not in docs/design/contract.md"
