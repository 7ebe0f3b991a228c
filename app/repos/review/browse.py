"""SQL for reviewers' reads of live memory across a tenant's agents (`app.services.review.browse`): the
role's agent allow-list (globs) is translated to SQL so keyset pages stay full; the service checks
every row again in Python."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Sequence

from sqlalchemy import and_, false, func, or_, select, true
from sqlalchemy.orm import Session

from app.db.models import Memory
from app.repos.memory.memories import Scope, apply_filters, visible

MEMORY_ID = re.compile(r"^mem_[0-9a-z]{1,64}$")


def _escape(char: str) -> str:
    """A character as a literal in a PostgreSQL ARE (also inside a bracket expression)."""
    if char.isascii() and not char.isalnum():
        return "\\" + char
    return char


def glob_regex(pattern: str) -> str | None:
    """An anchored PostgreSQL regex matching exactly what `fnmatch.fnmatchcase(_, pattern)` matches,
    or None when the pattern can match nothing. Bracket sets are resolved with Python's own
    `fnmatch` over ASCII (allow-list globs are ASCII, see `app.core.access.AGENT_GLOB`)."""
    import fnmatch

    out = ["^"]
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        i += 1
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: fnmatch treats "[" literally
                out.append(_escape("["))
                continue
            bracket = pattern[i - 1:j + 1]
            i = j + 1
            members = [chr(c) for c in range(1, 128) if fnmatch.fnmatchcase(chr(c), bracket)]
            negated = bracket.startswith("[!")
            if negated:
                excluded = [chr(c) for c in range(1, 128) if chr(c) not in members]
                out.append("[^" + "".join(_escape(c) for c in excluded) + "]" if excluded else ".")
            elif members:
                out.append("[" + "".join(_escape(c) for c in members) + "]")
            else:
                return None
        else:
            out.append(_escape(char))
    out.append("$")
    return "".join(out)


def agents_predicate(patterns: Sequence[str]):
    """SQL: the memory's agent id matches one of the allow-list globs."""
    if "*" in patterns:
        return true()
    regexes = [r for r in (glob_regex(p) for p in patterns) if r is not None]
    if not regexes:
        return false()
    return or_(*[Memory.agent_id.op("~")(r) for r in regexes])


def browse_page(session: Session, *, tenant_id: str, agents: Sequence[str], agent_id: str | None,
                user_id: str | None, type_: str | None, tag: str | None, query: str | None, limit: int,
                after: tuple[datetime, str] | None) -> list[Memory]:
    """Live, unexpired memories of the tenant whose agent matches `agents`, newest first, keyset-paged
    on (created_at, id). `query` is a web-search-style full-text query on content (or an exact id)."""
    stmt = select(Memory).where(visible(Scope(tenant_id)), agents_predicate(agents))
    stmt = apply_filters(stmt, types=[type_] if type_ else None, tags=[tag] if tag else None)
    if agent_id:
        stmt = stmt.where(Memory.agent_id == agent_id)
    if user_id:
        stmt = stmt.where(Memory.user_id == user_id)
    if query:
        text_match = Memory.content_tsv.op("@@")(func.websearch_to_tsquery("english", query))
        stmt = stmt.where(or_(text_match, Memory.id == query) if MEMORY_ID.match(query) else text_match)
    if after is not None:
        created, memory_id = after
        stmt = stmt.where(or_(Memory.created_at < created,
                              and_(Memory.created_at == created, Memory.id < memory_id)))
    return list(session.scalars(stmt.order_by(Memory.created_at.desc(), Memory.id.desc()).limit(limit)))


def previews(session: Session, *, tenant_id: str, memory_ids: Sequence[str], chars: int) -> dict[str, Any]:
    """id -> (id, type, the first `chars` of content) of the tenant's memories `memory_ids`."""
    return {row.id: row for row in session.execute(
        select(Memory.id, Memory.type, func.left(Memory.content, chars).label("content"))
        .where(Memory.tenant_id == tenant_id, Memory.id.in_(list(memory_ids))))}
