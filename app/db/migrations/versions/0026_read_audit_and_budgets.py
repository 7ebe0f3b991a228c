"""Read audit and read budgets.

`read_records` (one row per read that returned memory) and `memory_reads` (one row per memory a
read returned) are query indexes over the `memory.read` entries of the tenant chains, written in
the same transaction as those entries; the entry's subject is the read's id, so
`audit_entries_subject` finds the hashed entry (and its seq) of any row. A read returns up to a
thousand ids, so "who read memory M" is a side table rather than a GIN index on an array: a
B-tree on (tenant, memory, time) serves the newest readers first with a keyset cursor, where a
GIN index finds every row holding M and sorts them all. Both are append-only for the app role.

The budget tables are UNLOGGED like `rate_limit_buckets`: written on every read, they produce no
WAL; after a database crash they are empty, which only gives every key a fresh window.
`memwarden_take_read_budget` counts distinct memory ids per (principal, window) exactly across
processes: it locks each principal's window row, counts the ids not yet seen in it, and either
refuses (nothing recorded) or records them, in one statement.

Revision ID: 0026
"""

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE read_records (
            tenant_id text NOT NULL,
            id text NOT NULL,
            read_at timestamptz NOT NULL,
            actor text NOT NULL,
            key_id text,
            agent_id text,
            operation text NOT NULL,
            query_digest text,
            memory_ids text[] NOT NULL,
            PRIMARY KEY (tenant_id, id)
        )""")
    op.execute("CREATE INDEX read_records_time ON read_records (tenant_id, read_at, id)")
    op.execute("CREATE INDEX read_records_key ON read_records (tenant_id, key_id, read_at, id)")
    op.execute("CREATE INDEX read_records_agent ON read_records (tenant_id, agent_id, read_at, id)")
    op.execute("""
        CREATE TABLE memory_reads (
            tenant_id text NOT NULL,
            memory_id text NOT NULL,
            read_at timestamptz NOT NULL,
            read_id text NOT NULL,
            PRIMARY KEY (tenant_id, memory_id, read_at, read_id)
        )""")
    op.execute("""
        CREATE UNLOGGED TABLE read_budget_windows (
            tenant_id text NOT NULL,
            principal text NOT NULL,
            window_start timestamptz NOT NULL,
            used integer NOT NULL DEFAULT 0,
            exceeded_at timestamptz,
            PRIMARY KEY (tenant_id, principal, window_start)
        )""")
    op.execute("""
        CREATE UNLOGGED TABLE read_budget_seen (
            tenant_id text NOT NULL,
            principal text NOT NULL,
            window_start timestamptz NOT NULL,
            memory_id text NOT NULL,
            PRIMARY KEY (tenant_id, principal, window_start, memory_id)
        )""")
    op.execute("ALTER TABLE api_keys ADD COLUMN read_budget_exceeded_at timestamptz")
    # Each statement of a VOLATILE plpgsql function takes a fresh snapshot, so the count after
    # the row lock sees every id a previous holder of that lock recorded.
    op.execute("""
        CREATE FUNCTION memwarden_take_read_budget(p_tenant text, p_principals text[], p_limits integer[],
                                                   p_window timestamptz, p_ids text[])
        RETURNS TABLE (allowed boolean, refused_principal text, used integer, first_refusal boolean)
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE
            i integer;
            current_used integer;
            fresh integer[] := '{}';
        BEGIN
            FOR i IN 1 .. coalesce(cardinality(p_principals), 0) LOOP
                INSERT INTO read_budget_windows (tenant_id, principal, window_start)
                VALUES (p_tenant, p_principals[i], p_window) ON CONFLICT DO NOTHING;
                SELECT w.used INTO current_used FROM read_budget_windows w
                WHERE w.tenant_id = p_tenant AND w.principal = p_principals[i] AND w.window_start = p_window
                FOR UPDATE;
                fresh[i] := (SELECT count(*) FROM (SELECT DISTINCT unnest(p_ids)) AS x (id)
                             WHERE NOT EXISTS (SELECT 1 FROM read_budget_seen s
                                               WHERE s.tenant_id = p_tenant AND s.principal = p_principals[i]
                                                 AND s.window_start = p_window AND s.memory_id = x.id));
                IF current_used + fresh[i] > p_limits[i] THEN
                    UPDATE read_budget_windows w SET exceeded_at = now()
                    WHERE w.tenant_id = p_tenant AND w.principal = p_principals[i] AND w.window_start = p_window
                      AND w.exceeded_at IS NULL;
                    RETURN QUERY SELECT false, p_principals[i], current_used, FOUND;
                    RETURN;
                END IF;
            END LOOP;
            FOR i IN 1 .. coalesce(cardinality(p_principals), 0) LOOP
                IF fresh[i] > 0 THEN
                    INSERT INTO read_budget_seen (tenant_id, principal, window_start, memory_id)
                    SELECT DISTINCT p_tenant, p_principals[i], p_window, x.id FROM unnest(p_ids) AS x (id)
                    ON CONFLICT DO NOTHING;
                    UPDATE read_budget_windows w SET used = w.used + fresh[i]
                    WHERE w.tenant_id = p_tenant AND w.principal = p_principals[i] AND w.window_start = p_window;
                END IF;
            END LOOP;
            RETURN QUERY SELECT true, NULL::text, 0, false;
        END $$""")


def downgrade() -> None:
    op.execute("DROP FUNCTION memwarden_take_read_budget(text, text[], integer[], timestamptz, text[])")
    op.execute("ALTER TABLE api_keys DROP COLUMN read_budget_exceeded_at")
    op.execute("DROP TABLE read_budget_seen")
    op.execute("DROP TABLE read_budget_windows")
    op.execute("DROP TABLE memory_reads")
    op.execute("DROP TABLE read_records")
