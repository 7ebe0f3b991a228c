"""SQL for schemas beside Memwarden's own: a backend library that keeps its tables in Memwarden's
database (the offline mem0 store, `app.stores.mem0_local`) gets a schema of its own."""

from __future__ import annotations


def ensure_schema(dsn: str, schema: str) -> None:
    """Create `schema` in the database at `dsn` unless it exists (its own autocommit connection)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
