"""Where the project's non-Python assets live (templates, static files, schemas, migrations).

An installed wheel carries `templates/`, `static/` and `schemas/` inside the package (setup.py
copies them to `app/…`); a checkout (editable install, or the tests' `pythonpath`) keeps them at
the repository root beside `app/`. Either way they are read as files relative to this package.
"""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def _asset_dir(name: str) -> Path:
    """`app/<name>` when the package carries it (a wheel), else `<checkout>/<name>`."""
    bundled = PACKAGE_DIR / name
    return bundled if bundled.is_dir() else PACKAGE_DIR.parent / name


TEMPLATES_DIR = _asset_dir("templates")
STATIC_DIR = _asset_dir("static")
SCHEMAS_DIR = _asset_dir("schemas")
MIGRATIONS_DIR = PACKAGE_DIR / "db" / "migrations"
ATTACK_CORPUS = PACKAGE_DIR / "bench" / "data" / "screening_corpus.jsonl"
"""The shipped attack corpus (labelled poisoned and benign writes): what a policy backtest replays
as known attacks and what reviewer canaries are drawn from. Data, not the benchmark code beside it."""
