"""Screening a write against live state: looks up what ``app.core.screening`` needs, then runs it.

Contradiction needs the nearest live memories of the same agent and user; ``unlike_agent`` the
size of the agent's live history (any user) and the write's similarity to the nearest of it; FSM
widening needs the live procedure of the same name. Both are read in the caller's session: an import's own
transaction, or for a remember an autocommit read just before its transaction (under READ
COMMITTED a statement inside it would see no more), so the flags describe the state the write is
decided against.
"""

from __future__ import annotations

from typing import Any, Sequence

from sqlalchemy.orm import Session

from app.core import attributes, jsontext
from app.core.screening import Protection, Screening, screen
from app.core.screening.novelty import Familiarity
from app.observability import metrics, tracing
from app.repos.memory import memories as memories_repo
from app.repos.memory import search_vector
from app.repos.memory.memories import Scope

NEIGHBOURS = 5
"""Live memories compared for contradictions (the review diff shows as many)."""
FSM_CANDIDATES = 20
TEXT_TYPES = ["semantic", "episodic", "emotional"]

ALLOWED_SOURCES: tuple[str, ...] = ()
"""What a key may assert when it was given no ``sources`` (``memwarden apikey create --sources``):
no privileged origin (``system``, ``admin``, ``user:verified``, ``tool:*`` …)."""


def screen_write(session: Session, *, tenant_id: str, agent_id: str, user_id: str | None, memory_type: str,
                 content: str, tags: Sequence[str], metadata: dict[str, Any], source: str | None,
                 embedding: Sequence[float], protection: Protection, allowed_sources: Sequence[str] = ALLOWED_SOURCES,
                 embedder: str | None = None, encoder: attributes.Encoder | None = None) -> Screening:
    """Flags for a (redacted) write about to be stored or staged; ``allowed_sources`` are the key's source globs,
    ``protection`` the tenant's extra protected keys and paths (its cached `TenantRules`),
    ``embedder`` the name of the model that made ``embedding`` (the semantic signal needs its own model's),
    ``encoder`` that model's embedding function (contradiction reads the attribute of the write and of
    each live text by its prototypes of that model; the live texts' stored vectors are reused)."""
    with tracing.span("memwarden.screen", **{"memwarden.memory_type": memory_type}) as traced:
        live: list[str] = []
        live_fsm, familiarity, meaning = None, None, None
        if memory_type == "procedural":
            live_fsm = _live_fsm(session, Scope(tenant_id, agent_id), content)
        else:
            rows, familiarity = _nearest_live(session, Scope(tenant_id, agent_id, user_id), embedding)
            live = [text for _, text in rows]
            if user_id is not None:  # the agent's whole history, not one user's
                familiarity = _familiarity(session, Scope(tenant_id, agent_id), embedding)
            if rows and encoder is not None:
                vectors = memories_repo.embeddings_of(session, tenant_id=tenant_id, ids=[i for i, _ in rows])
                meaning = attributes.meaning(encoder, embedder, embedding, [vectors.get(i) for i, _ in rows])
        flags = screen(content, memory_type=memory_type, tags=tags, metadata=metadata, source=source, live=live,
                       live_fsm=live_fsm, allowed_sources=allowed_sources, protection=protection,
                       embedding=embedding, embedder=embedder, familiarity=familiarity, meaning=meaning)
        if traced is not None:  # flag names are a fixed vocabulary, never what the write said
            traced.set_attribute("memwarden.screening.flags", sorted(flags.names))
    metrics.screened(flags.names)
    return flags


def _nearest_live(session: Session, scope: Scope, embedding: Sequence[float]
                  ) -> tuple[list[tuple[str, str]], Familiarity]:
    """(id, text) of the nearest live non-procedural memories (recall's search: exact in small scopes, HNSW
    in large) and the scope's `Familiarity`."""
    found = search_vector.vector_search(session, scope, {"types": TEXT_TYPES}, embedding, NEIGHBOURS, fetch=True)
    rows = [(i, found.rows[i].content) for i, _ in found.hits if found.rows[i].content]  # rows in the same statement
    return rows, _familiar(found)


def _familiarity(session: Session, scope: Scope, embedding: Sequence[float]) -> Familiarity:
    """How the write relates to every live non-procedural memory of the agent (tenant and agent scoped)."""
    return _familiar(search_vector.vector_search(session, scope, {"types": TEXT_TYPES}, embedding, 1))


def _familiar(found: search_vector.VectorResult) -> Familiarity:
    nearest = 1.0 - found.hits[0][1] if found.hits else None
    return Familiarity(found.stats.rows, nearest)


def _live_fsm(session: Session, scope: Scope, content: str) -> str | None:
    """The newest live procedural memory with the same FSM ``name``, if any."""
    try:
        name = jsontext.loads(content).get("name")
    except (ValueError, AttributeError):
        return None
    if not isinstance(name, str):
        return None
    # JSON writes such a name verbatim, so it narrows the scan; other names are escaped variously.
    verbatim = name.isascii() and name.isprintable() and not set(name) & set('"\\')
    for candidate in memories_repo.newest_procedural(session, scope=scope, containing=name if verbatim else None,
                                                     limit=FSM_CANDIDATES):
        try:
            doc = jsontext.loads(candidate)
        except (TypeError, ValueError):
            continue  # e.g. merged procedural text that is no longer one FSM
        if isinstance(doc, dict) and doc.get("name") == name:
            return candidate
    return None
