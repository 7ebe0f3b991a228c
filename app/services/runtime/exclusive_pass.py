"""One background pass per tenant at a time (compaction, consolidation), across processes."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

from app.errors import Conflict
from app.services.runtime.context import AppContext


@contextlib.contextmanager
def one_pass_at_a_time(ctx: AppContext, tenant_id: str, *, try_lock: Callable[..., bool], unlock: Callable[..., None],
                       what: str) -> Iterator[None]:
    """Hold `try_lock`'s session-level advisory lock for the pass, or 409 when another holds it.
    The lock is on a connection of its own: it spans the pass's transactions and ends with the
    connection, so a killed pass leaves no lock behind."""
    with ctx.db.engine.connect() as conn:
        if not try_lock(conn, tenant_id=tenant_id):
            raise Conflict(f"a {what} of this tenant is already running")
        try:
            yield
        finally:
            unlock(conn, tenant_id=tenant_id)
