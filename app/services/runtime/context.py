"""What every service needs, built once per process: settings, database, audit log, embedder."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from app.config import Settings
from app.db.database import Database, open_database
from app.services.audit.audit import AuditLog

if TYPE_CHECKING:
    from app.embeddings import Embedder
    from app.nli import Scorer
    from app.services.audit.state_digests import StateKeys


@dataclass
class AppContext:
    """Shared resources. Services take it as their first argument and open their own transactions."""

    settings: Settings
    db: Database
    audit: AuditLog = field(init=False)

    def __post_init__(self) -> None:
        self.audit = AuditLog.from_settings(self.settings)

    @classmethod
    def open(cls, settings: Settings, *, migrate: bool = True, wait_seconds: float = 0.0) -> AppContext:
        """Reach (or start) the database, migrate it, and build the context (retrying an
        unreachable database for `wait_seconds`)."""
        return cls(settings, open_database(settings, run_migrations=migrate, wait_seconds=wait_seconds))

    @cached_property
    def embedder(self) -> Embedder:
        """The configured embedding model, loaded on first use and shared by the process."""
        from app.embeddings import get_embedder

        return get_embedder(self.settings.embedder)

    @cached_property
    def contradiction_model(self) -> Scorer | None:
        """The contradiction model's scorer (``app.nli``), or None when it is switched off."""
        from app.nli import get_scorer

        return get_scorer(self.settings.contradiction_model)

    @cached_property
    def state_keys(self) -> StateKeys:
        """The key of memory state digests (`MEMWARDEN_STATE_KEY_FILE`), read on first use."""
        from app.services.audit.state_digests import StateKeys

        return StateKeys(self.settings.resolved_state_key())

    def with_database(self, db: Database) -> AppContext:
        """This context with another `Database` (e.g. one bound to a request's unit of work);
        settings, audit log and embedder are shared."""
        clone = copy.copy(self)
        clone.db = db
        return clone

    def close(self) -> None:
        from app.services.audit import read_audit
        from app.services.memory import recall_tracking

        recall_tracking.flush(self.db.engine)  # batched recall counts, while the database is still up
        read_audit.flush(self)  # batched read records
        self.db.dispose()
