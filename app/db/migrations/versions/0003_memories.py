"""Memories (with embeddings, full-text, staging sentinel), staged changes, registered secrets.

Revision ID: 0003
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE memories (
            id text PRIMARY KEY,
            tenant_id text NOT NULL REFERENCES tenants(id),
            agent_id text NOT NULL,
            user_id text,
            type text NOT NULL CHECK (type IN ('semantic', 'episodic', 'procedural', 'emotional')),
            content text,
            metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
            tags text[] NOT NULL DEFAULT '{}',
            confidence real NOT NULL DEFAULT 1 CHECK (confidence >= 0 AND confidence <= 1),
            source text,
            embedding vector(384),
            content_tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', coalesce(content, ''))) STORED,
            status text NOT NULL CHECK (status IN ('pending', 'live', 'rejected', 'withdrawn', 'forgotten',
                                                   'archived', 'merged', 'superseded')),
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            live_from timestamptz,
            ended_at timestamptz,
            expires_at timestamptz,
            hard_deleted boolean NOT NULL DEFAULT false,
            score_multiplier real NOT NULL DEFAULT 1,
            recall_count integer NOT NULL DEFAULT 0,
            last_recalled_at timestamptz,
            merged_into text,
            superseded_by text,
            change_id text,
            run_id text,
            node_id text,
            digest_key bytea,
            CHECK (status <> 'live' OR live_from IS NOT NULL),
            CHECK (NOT hard_deleted OR (content IS NULL AND embedding IS NULL AND digest_key IS NULL))
        ) WITH (fillfactor = 80)""")
    # fillfactor: recall bumps recall_count/last_recalled_at on every hit; free space in each page
    # lets PostgreSQL update in place (HOT) instead of rewriting every index, HNSW included.
    # Live rows only: pending/forgotten rows never pollute the ANN graph or the keyword index.
    op.execute("""CREATE INDEX memories_embedding_live ON memories
                  USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)
                  WHERE status = 'live'""")
    op.execute("CREATE INDEX memories_tsv_live ON memories USING gin (content_tsv) WHERE status = 'live'")
    op.execute("CREATE INDEX memories_scope ON memories (tenant_id, agent_id, status, created_at DESC, id DESC)")
    op.execute("CREATE INDEX memories_tenant_live ON memories (tenant_id, created_at DESC, id DESC) WHERE status = 'live'")
    op.execute("CREATE INDEX memories_scope_user ON memories (tenant_id, agent_id, user_id) WHERE user_id IS NOT NULL")
    op.execute("CREATE INDEX memories_change ON memories (change_id) WHERE change_id IS NOT NULL")

    op.execute("""
        CREATE TABLE changes (
            id text PRIMARY KEY,
            tenant_id text NOT NULL REFERENCES tenants(id),
            agent_id text NOT NULL,
            user_id text,
            operation text NOT NULL,
            status text NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'approved', 'rejected', 'withdrawn')),
            request jsonb NOT NULL,
            memory_ids text[] NOT NULL DEFAULT '{}',
            submitted_at timestamptz NOT NULL DEFAULT now(),
            submitted_by text NOT NULL,
            decided_at timestamptz,
            decided_by text,
            reason text,
            approvals jsonb NOT NULL DEFAULT '[]'::jsonb,
            approvals_required integer NOT NULL DEFAULT 1 CHECK (approvals_required IN (1, 2)),
            policy_rule text,
            redactions jsonb NOT NULL DEFAULT '[]'::jsonb,
            result jsonb
        )""")
    op.execute("CREATE INDEX changes_queue ON changes (tenant_id, status, submitted_at, id)")

    op.execute("""
        CREATE TABLE tenant_secrets (
            id text PRIMARY KEY,
            tenant_id text NOT NULL REFERENCES tenants(id),
            label text NOT NULL,
            digest bytea NOT NULL,
            length integer NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            UNIQUE (tenant_id, digest)
        )""")


def downgrade() -> None:
    op.execute("DROP TABLE tenant_secrets")
    op.execute("DROP TABLE changes")
    op.execute("DROP TABLE memories")
