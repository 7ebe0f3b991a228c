"""Web routes that show live memory content are declared as such (`ReadingRoute`): each records
what it shows in the read audit, and `tests/api/test_read_routes.py` checks that it does, and that
no undeclared page ever shows seeded content."""

from __future__ import annotations

from starlette.routing import Route


class ReadingRoute(Route):
    """A page that shows live memory content to a signed-in person (recorded, never budgeted)."""

    reads_memory = True
