"""What every `memwarden` command module shares: who is acting, and the services' context."""

from __future__ import annotations

import getpass
import os
from typing import TYPE_CHECKING

from app.config import Settings

if TYPE_CHECKING:
    from app.services.context import AppContext


def cli_actor() -> dict:
    """The audit actor of a CLI command: the operating-system user running it."""
    try:
        who = getpass.getuser()
    except Exception:  # no passwd entry (containers)
        who = str(os.getuid())
    return {"kind": "cli", "id": who}


def open_context(settings: Settings) -> "AppContext":
    """The services' context for one command (starts or reaches the database, migrates it)."""
    from app.services.context import AppContext  # late: `memwarden --help` loads no services

    return AppContext.open(settings)
