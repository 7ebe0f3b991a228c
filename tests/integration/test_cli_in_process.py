"""`app.cli.main` run in this process (as `tests.harness.cli_in_process` and tools that embed the CLI
do) leaves nothing behind: the context a command opened is closed when it returns, and the log
levels it lowers for a one-shot command are put back."""

from __future__ import annotations

import logging

from app.cli import ONE_SHOT_QUIET_LOGGERS
from app.services.context import AppContext
from tests.harness import cli_in_process, server_env


def test_a_command_run_in_process_closes_its_context_and_keeps_the_hosts_log_levels(settings, monkeypatch):
    opened: list[AppContext] = []
    real_open = AppContext.open.__func__

    def recording_open(cls, *args, **kwargs) -> AppContext:
        ctx = real_open(cls, *args, **kwargs)
        opened.append(ctx)
        return ctx

    monkeypatch.setattr(AppContext, "open", classmethod(recording_open))
    levels = {name: logging.getLogger(name).level for name in ONE_SHOT_QUIET_LOGGERS}

    for _ in range(2):
        done = cli_in_process(server_env(settings), "tenant", "list")
        assert done.returncode == 0, done.stderr

    assert len(opened) == 2
    for ctx in opened:  # disposed: the pool holds no connection, idle or in use
        assert (ctx.db.engine.pool.checkedin(), ctx.db.engine.pool.checkedout()) == (0, 0)
    assert {name: logging.getLogger(name).level for name in ONE_SHOT_QUIET_LOGGERS} == levels
