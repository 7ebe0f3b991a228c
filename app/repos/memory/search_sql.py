"""The SQL that recall's candidate statements share: a request's shape, the scope's WHERE, the
entry columns, the query's words, and the one way they are executed.

Every statement is SQL text built once per shape (which of user, `as_of` and the filters a request
sets) and executed with bound parameters: building SQLAlchemy expressions and compiling them for
each request cost more CPU than the queries themselves on a small scope.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy.orm import Session

from app.db import prepared
from app.repos.memory.memories import ONCE_LIVE, Scope

# The contract's Entry columns (plus the score multiplier), named as the model's attributes
# (`row.metadata_` …), so `entry_json` takes a row as it takes a `Memory`. Plain rows, not ORM
# objects: a recall fetches up to 40 candidates to return 5.
ENTRY = ("m.id, m.agent_id, m.user_id, m.type, m.content, m.metadata AS metadata_, m.tags, m.confidence, m.source, "
         "m.created_at, m.updated_at, m.expires_at, m.score_multiplier")
QUERY = "%(q)s::vector"
ANDED = "plainto_tsquery('english'::regconfig, %(text)s)"
# OR of the query's stemmed words (websearch_to_tsquery would AND them and miss paraphrases), built
# in SQL so it costs no extra round trip: plainto_tsquery ANDs the quoted lexemes with ' & ' (a
# lexeme never contains a space), so swapping the operator gives the OR query. With a constant
# config the whole expression folds to a constant at plan time.
ORED = f"replace({ANDED}::text, ' & ', ' | ')::tsquery"
ROW_WORDS = "memwarden_scoped_lexemes(m.agent_id, m.content_tsv)"
QUERY_WORDS = "memwarden_scoped_lexemes(%(agent)s::text, to_tsvector('english'::regconfig, %(text)s))"


@dataclass(frozen=True)
class Shape:
    """What decides a statement's text: which parts of the scope and which filters are set."""

    agent: bool
    user: bool
    as_of: bool
    types: bool
    tags: bool
    metadata: bool
    fresher: bool


def shape_and_params(scope: Scope, filters: dict[str, Any]) -> tuple[Shape, dict[str, Any]]:
    """The statement shape of a scope and filters, and their bound parameters."""
    types, tags, metadata = filters.get("types"), filters.get("tags"), filters.get("metadata")
    fresher = filters.get("fresher_than_days")
    shape = Shape(scope.agent_id is not None, scope.user_id is not None, scope.as_of is not None,
                  bool(types), bool(tags), bool(metadata), fresher is not None)
    params = {"tenant": scope.tenant_id, "agent": scope.agent_id, "user": scope.user_id, "as_of": scope.as_of,
              "types": list(types) if types else None, "tags": list(tags) if tags else None,
              "metadata": Jsonb(metadata) if metadata else None,
              "fresher_s": float(fresher) * 86400 if fresher is not None else None}
    return shape, params

@functools.cache
def where(shape: Shape, *, live_only: bool = False) -> str:
    """`memories.visible` and `memories.apply_filters` as SQL over alias `m`. `live_only`: live rows,
    expiry left out (the size probe: index-only on the scope index)."""
    conds = ["m.tenant_id = %(tenant)s"]
    if not live_only:
        conds.append("(m.expires_at IS NULL OR m.expires_at > statement_timestamp())")
    if shape.agent:
        conds.append("m.agent_id = %(agent)s")
    if shape.user:
        conds.append("m.user_id = %(user)s")
    if not shape.as_of or live_only:
        conds.append("m.status = 'live'")
    else:
        statuses = ", ".join(f"'{s}'" for s in ONCE_LIVE)
        conds += [f"m.status IN ({statuses})", "m.hard_deleted IS false", "m.live_from <= %(as_of)s::timestamptz",
                  "(m.ended_at IS NULL OR m.ended_at > %(as_of)s::timestamptz)"]
    if shape.types:
        conds.append("m.type = ANY(%(types)s::text[])")
    if shape.tags:
        conds.append("m.tags @> %(tags)s::text[]")
    if shape.metadata:
        conds.append("m.metadata @> %(metadata)s::jsonb")
    if shape.fresher:
        conds.append("m.created_at >= statement_timestamp() - make_interval(secs => %(fresher_s)s::float8)")
    return " AND ".join(conds)

class Rows(list):
    """A statement's rows (named tuples), read as SQLAlchemy's result would be."""

    def all(self) -> list[Any]:
        return self

    def scalar(self) -> Any:
        return self[0][0] if self else None

    def scalars(self) -> list[Any]:
        return [row[0] for row in self]


def execute(session: Session, sql: str, params: dict[str, Any]) -> Rows:
    """Run a pre-built statement on the session's psycopg connection, in its transaction
    (`app.db.prepared`: psycopg binds the parameters; ~0.1 ms of CPU less per statement than
    SQLAlchemy's execution context and result wrapping, on a path that runs one to three per request)."""
    return Rows(prepared.fetch_rows(session.connection(), prepared.Statement(sql), params, prepare=None))

