"""Leave a fifth of each `memories` page free, so the recall counters update in place.

Every recalled memory gets `recall_count` and `last_recalled_at` updated (in batches, off the
request: `recall_tracking`). Neither column is indexed, so PostgreSQL can update the row "HOT" —
a new version on the same page, no index touched — but only if the page has room. At the default
fillfactor of 100 a page is full once written, so each counter update wrote a new version
elsewhere and a new entry into every index of the table: the HNSW graph, both word indexes, four
btrees. At 150,000 rows that made the update ~9-10 ms and 88% of updates non-HOT; with room on the
page it measured 0.4-3 ms, 72-83% HOT (docs/benchmarks/, "Scale").

This applies to pages written from now on; rows already stored move to roomier pages as they are
updated, or all at once with `VACUUM FULL memories` (which locks the table while it rewrites it).

Revision ID: 0017
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE memories SET (fillfactor = 80)")


def downgrade() -> None:
    op.execute("ALTER TABLE memories RESET (fillfactor)")
