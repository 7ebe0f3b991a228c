"""Workspace files (OpenWOP RFC 0059) with version history and tombstones; compaction runs (RFC 0012).

Revision ID: 0006
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# Flat names with `/` allowed inside (RFC 0059), never `..`, `//` or a trailing `/`.
PATH_CHECK = r"""path ~ '^[A-Za-z0-9][A-Za-z0-9._/-]{0,255}$' AND position('..' in path) = 0
                 AND position('//' in path) = 0 AND right(path, 1) <> '/'"""


def upgrade() -> None:
    op.execute(f"""
        CREATE TABLE workspace_files (
            tenant_id text NOT NULL REFERENCES tenants(id),
            path text NOT NULL CHECK ({PATH_CHECK}),
            version integer NOT NULL CHECK (version >= 0),
            content_type text NOT NULL,
            deleted boolean NOT NULL DEFAULT false,
            digest_key bytea NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, path)
        )""")
    op.execute("""
        CREATE TABLE workspace_versions (
            tenant_id text NOT NULL,
            path text NOT NULL,
            version integer NOT NULL CHECK (version >= 1),
            content text,
            content_type text NOT NULL,
            etag text NOT NULL,
            byte_size integer NOT NULL DEFAULT 0,
            deleted boolean NOT NULL DEFAULT false,
            created_at timestamptz NOT NULL DEFAULT now(),
            created_by text NOT NULL,
            run_id text,
            change_id text,
            PRIMARY KEY (tenant_id, path, version),
            FOREIGN KEY (tenant_id, path) REFERENCES workspace_files (tenant_id, path),
            CHECK (deleted = (content IS NULL))
        )""")
    op.execute("CREATE INDEX workspace_versions_asof ON workspace_versions (tenant_id, created_at)")

    op.execute("""
        CREATE TABLE compaction_runs (
            id text PRIMARY KEY,
            tenant_id text NOT NULL REFERENCES tenants(id),
            agent_id text,
            trigger text NOT NULL CHECK (trigger IN ('schedule', 'cli')),
            status text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done', 'failed')),
            started_at timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz,
            stats jsonb NOT NULL DEFAULT '{}'::jsonb
        )""")
    op.execute("CREATE INDEX compaction_runs_tenant ON compaction_runs (tenant_id, started_at DESC)")


def downgrade() -> None:
    op.execute("DROP TABLE compaction_runs")
    op.execute("DROP TABLE workspace_versions")
    op.execute("DROP TABLE workspace_files")
