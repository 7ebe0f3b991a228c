"""The schema can be distributed by tenant (Citus): checked from the catalog of the migrated database.

Every primary key, unique constraint or unique index, and foreign key of a table distributed by
`tenant_id` must include `tenant_id` (Citus enforces uniqueness only within a shard, and routes a
foreign key only between colocated rows). The exceptions are listed here and in docs/operators/scale-out.md:
reference tables (copied to every node), tables distributed by the audit chain, and tables that
stay on the coordinator. A new table must join one of the lists or carry `tenant_id` in its keys.
"""

from sqlalchemy import text

# Small, tenant-less or cross-tenant lookup tables: `create_reference_table` (a copy on every node).
REFERENCE_TABLES = {"tenants", "users", "web_sessions", "login_throttle"}
# Append-only audit log, one chain per tenant plus the system chain: distributed by `chain_id`.
CHAIN_TABLES = {"audit_entries", "audit_checkpoints", "audit_chain_alarms"}
# Alembic's bookkeeping: stays on the coordinator.
LOCAL_TABLES = {"alembic_version"}
DISTRIBUTION_COLUMN = {**{t: None for t in REFERENCE_TABLES | LOCAL_TABLES}, **{t: "chain_id" for t in CHAIN_TABLES}}

_TABLES = text("""
    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY 1""")
# Every PK / UNIQUE / FK constraint, and every unique index that backs no constraint.
_KEYS = text("""
    SELECT cl.relname AS tbl, con.conname AS name, con.contype::text AS kind,
           -- WITH ORDINALITY: a foreign key's columns pair up by position, which a plain join to
           -- pg_attribute does not keep.
           array(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
                 JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
                 ORDER BY k.ord)::text[] AS cols,
           array(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, ord)
                 JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum
                 ORDER BY k.ord)::text[] AS ref_cols,
           (SELECT relname FROM pg_class WHERE oid = con.confrelid) AS ref_table
    FROM pg_constraint con JOIN pg_class cl ON cl.oid = con.conrelid
    JOIN pg_namespace n ON n.oid = cl.relnamespace
    WHERE n.nspname = 'public' AND con.contype IN ('p', 'u', 'f')
    UNION ALL
    SELECT cl.relname, ic.relname, 'i',
           array(SELECT a.attname FROM unnest(i.indkey::int2[]) k
                 JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k)::text[],
           NULL, NULL
    FROM pg_index i JOIN pg_class cl ON cl.oid = i.indrelid JOIN pg_class ic ON ic.oid = i.indexrelid
    JOIN pg_namespace n ON n.oid = cl.relnamespace
    WHERE n.nspname = 'public' AND i.indisunique
      AND NOT EXISTS (SELECT 1 FROM pg_constraint x WHERE x.conindid = i.indexrelid)
    ORDER BY 1, 2""")


def _offences(conn) -> list[str]:
    tables = set(conn.scalars(_TABLES))
    offences = []
    for row in conn.execute(_KEYS):
        if row.tbl in REFERENCE_TABLES | LOCAL_TABLES:
            continue
        if row.kind == "f" and row.ref_table in REFERENCE_TABLES:
            continue  # distributed -> reference is allowed on any column (the copy is on every node)
        column = DISTRIBUTION_COLUMN.get(row.tbl, "tenant_id")
        if column not in row.cols:
            offences.append(f"{row.tbl}.{row.name} ({row.kind}: {', '.join(row.cols)}) lacks {column}")
        elif row.kind == "f":
            # Between distributed tables a foreign key must join on the distribution column.
            if row.ref_cols[row.cols.index(column)] != DISTRIBUTION_COLUMN.get(row.ref_table, "tenant_id"):
                offences.append(f"{row.tbl}.{row.name} joins {row.ref_table} off its distribution column")
    for table in sorted(tables - REFERENCE_TABLES - LOCAL_TABLES):
        column = DISTRIBUTION_COLUMN.get(table, "tenant_id")
        has_column = conn.scalar(text(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'public' "
            "AND table_name = :t AND column_name = :c"), {"t": table, "c": column})
        if not has_column:
            offences.append(f"{table} has no {column} column to distribute by")
    return offences


def test_every_key_of_a_distributed_table_includes_its_distribution_column(app_database):
    with app_database.engine.connect() as conn:
        offences = _offences(conn)
    assert offences == [], "\n".join(offences)


def test_the_exception_lists_name_real_tables(app_database):
    with app_database.engine.connect() as conn:
        tables = set(conn.scalars(_TABLES))
    assert REFERENCE_TABLES | CHAIN_TABLES | LOCAL_TABLES <= tables
