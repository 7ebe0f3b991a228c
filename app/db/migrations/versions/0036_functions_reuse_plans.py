"""The hot path's plpgsql functions keep their statements' plans (plan_cache_mode = auto in them).

Every connection of the app runs with `plan_cache_mode = force_custom_plan` (`app.db.database`):
a generic plan for recall's scope-skewed statements was catastrophic on a large agent. plpgsql
caches its statements' plans through the same plan cache, so under that setting every statement
inside these functions was planned again on every call: the read budget (up to 11 statements for
two principals), the chain lock (4-5) and the backends trigger (1 a memory row). Their statements
are primary-key and single-index lookups whose generic plan is the custom plan, and planning
them was a third to a half of PostgreSQL's CPU for the function (docs/benchmarks/, "PostgreSQL's
share"). A function-level SET applies for the call only, so the app's statements keep their
custom plans.

Revision ID: 0036
"""

from alembic import op

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None

FUNCTIONS = (
    "memwarden_take_read_budget(text, text[], integer[], timestamptz, text[])",
    "memwarden_lock_chain(text, text, boolean)",
    "memwarden_owe_backends()",
)


def upgrade() -> None:
    for signature in FUNCTIONS:
        op.execute(f"ALTER FUNCTION {signature} SET plan_cache_mode = auto")


def downgrade() -> None:
    for signature in FUNCTIONS:
        op.execute(f"ALTER FUNCTION {signature} RESET plan_cache_mode")
