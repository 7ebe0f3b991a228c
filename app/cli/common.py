"""What every `memwarden` command module shares: who is acting, and the services' context."""

from __future__ import annotations

import argparse
import getpass
import os
from typing import TYPE_CHECKING, Callable

from app.config import Settings

if TYPE_CHECKING:
    from app.services.runtime.context import AppContext


def cli_actor() -> dict:
    """The audit actor of a CLI command: the operating-system user running it."""
    try:
        who = getpass.getuser()
    except Exception:  # no passwd entry (containers)
        who = str(os.getuid())
    return {"kind": "cli", "id": who}


def open_context(settings: Settings) -> AppContext:
    """The services' context for one command (starts or reaches the database, migrates it)."""
    from app.services.runtime.context import AppContext  # late: `memwarden --help` loads no services

    return AppContext.open(settings)


class Commands(argparse._SubParsersAction):
    """The `memwarden` subcommands. A command added with `add_deferred_parser` builds its own
    subcommands only when it is the one being run: `memwarden bench` needs numpy, httpx and
    SQLAlchemy to describe its benchmarks, and every other command (an auditor's offline
    `audit verify` above all) would otherwise pay for importing them at each start."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._deferred: dict[str, Callable[[argparse.ArgumentParser], None]] = {}

    def add_deferred_parser(self, name: str, fill: Callable[[argparse.ArgumentParser], None],
                            **kwargs) -> argparse.ArgumentParser:
        """Add command `name` (its one-line help shows in `memwarden --help` as usual); `fill(parser)`
        adds its arguments and subcommands when `name` is parsed."""
        parser = self.add_parser(name, **kwargs)
        self._deferred[name] = fill
        return parser

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        fill = self._deferred.pop(values[0], None)
        if fill is not None:
            fill(self._name_parser_map[values[0]])
        super().__call__(parser, namespace, values, option_string)
