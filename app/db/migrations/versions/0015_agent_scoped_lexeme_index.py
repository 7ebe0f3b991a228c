"""An agent-scoped full-text index, so recall's keyword leg stays fast in a large scope.

The keyword query asks for the scope's rows sharing any stemmed word with the query. `memories_tsv_live`
indexes words across the whole table, so a common word ("feel", "live") matches tens of thousands of
rows of every agent, and the planner instead walks the scope's rows and tests each: at 1M memories
that read ~48,000 pages for a 50,000-row agent (~200-260 ms, `memwarden bench scale`). This index keys
each live row's words by its agent (`'agent-big feel'`), so the same query reads only the posting
lists of that agent's words: ~15 ms there, while 100-row scopes keep their scope-index plan.

Agent ids are unique per tenant only; a key shared by two tenants' agents just adds candidates that
the query's own tenant condition removes.

Revision ID: 0015
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE FUNCTION memwarden_scoped_lexemes(agent text, words tsvector) RETURNS text[]
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $$ SELECT array_agg(agent || ' ' || lexeme) FROM unnest(tsvector_to_array(words)) AS lexeme $$
    """)
    op.execute("CREATE INDEX memories_agent_lexemes_live ON memories "
               "USING gin (memwarden_scoped_lexemes(agent_id, content_tsv)) WHERE status = 'live'")


def downgrade() -> None:
    op.execute("DROP INDEX memories_agent_lexemes_live")
    op.execute("DROP FUNCTION memwarden_scoped_lexemes(text, tsvector)")
