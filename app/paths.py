"""Where the project's non-Python assets live (templates, static files, schemas)."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TEMPLATES_DIR = PROJECT_ROOT / "templates"
STATIC_DIR = PROJECT_ROOT / "static"
SCHEMAS_DIR = PROJECT_ROOT / "schemas"
MIGRATIONS_DIR = Path(__file__).resolve().parent / "db" / "migrations"
