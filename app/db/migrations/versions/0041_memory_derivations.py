"""Memory lineage: which memories each memory was derived from, so taint can follow it.

`memory_derivations` holds one row per (derived memory, source memory, kind): a merge's canonical
memory from each duplicate folded into it (`merge`, or `compaction` when a compaction pass merged
them), a memory that superseded another (`supersede`), a consolidation's semantic fact from each
episodic item it was promoted from (`consolidation`). `via` names the change, compaction run or
consolidation run that made it, when there is one. Every deriving path writes its rows in the
same transaction as the derived memory (`app.services.memory.derivations`); recover follows them
transitively (its blast radius). The primary key serves derived → sources, the second index
sources → derived, both tenant first. Append-only for the app role, like the read indexes:
lineage is evidence.

The backfill reads the lineage recorded before: each `memory.merged_into` and `memory.superseded`
audit entry (a merge reverted since still left its content in the canonical memory), the
`merged_into` / `superseded_by` columns (rows imported without such entries), and each
consolidation promotion's claim (its source ids). It scans those audit entries once.

Revision ID: 0041
"""

from alembic import op

revision = "0041"
down_revision = "0038"
branch_labels = None
depends_on = None

KINDS = ("merge", "compaction", "supersede", "consolidation")


def upgrade() -> None:
    kinds = ", ".join(f"'{k}'" for k in KINDS)
    op.execute(f"""
        CREATE TABLE memory_derivations (
            tenant_id text NOT NULL REFERENCES tenants(id),
            derived_id text NOT NULL,
            source_id text NOT NULL,
            kind text NOT NULL CHECK (kind IN ({kinds})),
            via text,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, derived_id, source_id, kind),
            CHECK (derived_id <> source_id)
        )""")
    op.execute("CREATE INDEX memory_derivations_source ON memory_derivations (tenant_id, source_id, derived_id)")
    for statement in BACKFILL:
        op.execute(statement)


# The entries' bytes are canonical JSON (RFC 8785): valid JSON text, read as jsonb here. A merge the
# audit entries gave as `compaction` is not repeated as a plain `merge` from the pointer columns.
BACKFILL = (
    """
        INSERT INTO memory_derivations (tenant_id, derived_id, source_id, kind, via, created_at)
        SELECT e.tenant_id, d.derived, e.subject_id, d.kind, d.via, e.ts
        FROM audit_entries e
        CROSS JOIN LATERAL (SELECT convert_from(e.entry, 'UTF8')::jsonb -> 'data' AS data) j
        CROSS JOIN LATERAL (SELECT
            CASE e.event_type WHEN 'memory.merged_into' THEN j.data ->> 'canonical'
                              ELSE j.data ->> 'superseded_by' END AS derived,
            CASE WHEN e.event_type = 'memory.superseded' THEN 'supersede'
                 WHEN starts_with(j.data ->> 'strategy', 'compaction:') THEN 'compaction'
                 ELSE 'merge' END AS kind,
            j.data ->> 'change_id' AS via) d
        WHERE e.event_type IN ('memory.merged_into', 'memory.superseded') AND e.tenant_id IS NOT NULL
          AND e.subject_type = 'memory' AND d.derived IS NOT NULL AND d.derived <> e.subject_id
        ON CONFLICT DO NOTHING""",
    """
        INSERT INTO memory_derivations (tenant_id, derived_id, source_id, kind, created_at)
        SELECT tenant_id, merged_into, id, 'merge', coalesce(ended_at, updated_at) FROM memories
        WHERE merged_into IS NOT NULL AND merged_into <> id
        UNION ALL
        SELECT tenant_id, superseded_by, id, 'supersede', coalesce(ended_at, updated_at) FROM memories
        WHERE superseded_by IS NOT NULL AND superseded_by <> id
        ON CONFLICT DO NOTHING""",
    """
        DELETE FROM memory_derivations m USING memory_derivations c
        WHERE m.kind = 'merge' AND c.kind = 'compaction' AND c.tenant_id = m.tenant_id
          AND c.derived_id = m.derived_id AND c.source_id = m.source_id""",
    """
        INSERT INTO memory_derivations (tenant_id, derived_id, source_id, kind, via, created_at)
        SELECT c.tenant_id, c.memory_id, s.id, 'consolidation', c.run_id, c.created_at
        FROM consolidation_claims c CROSS JOIN LATERAL unnest(c.source_ids) AS s (id)
        WHERE c.kind = 'promote' AND c.memory_id IS NOT NULL AND s.id <> c.memory_id
        ON CONFLICT DO NOTHING""",
)
"""The lineage recorded before this revision, as derivation rows (`tests/integration/test_taint.py`
runs these over a tenant's lineage and compares with what the deriving paths wrote)."""


def downgrade() -> None:
    op.execute("DROP TABLE memory_derivations")
