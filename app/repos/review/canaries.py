"""SQL of reviewer canaries (migration 0044): the `canaries` rows that say which changes are
synthetic poisoned writes, their outcomes, each reviewer's catches and misses, and what a canary
is modelled on (a recent real staged write of the tenant).

No query a reviewer's page, the API or the events run joins this table: a canary's change and
staged memory are ordinary rows. Every query is scoped by tenant (the scrape's is by tenant too)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from sqlalchemy import text
from sqlalchemy.orm import Session


@dataclass(frozen=True)
class Canary:
    tenant_id: str
    change_id: str
    corpus: str
    entry_id: str
    family: str
    flags: tuple[str, ...]
    created_at: datetime
    outcome: str | None
    decided_by: str | None
    decided_at: datetime | None
    notified_at: datetime | None


def _canary(row) -> Canary:
    m = dict(row._mapping)
    return Canary(**{**m, "flags": tuple(m["flags"] or ())})


_COLUMNS = ("tenant_id, change_id, corpus, entry_id, family, flags, created_at, outcome, decided_by, decided_at, "
            "notified_at")


def insert(session: Session, *, tenant_id: str, change_id: str, corpus: str, entry_id: str, family: str,
           flags: Sequence[str], at: datetime) -> None:
    session.execute(text("""
        INSERT INTO canaries (tenant_id, change_id, corpus, entry_id, family, flags, created_at)
        VALUES (:t, :c, :corpus, :entry, :family, CAST(:flags AS text[]), :at)"""),
                    {"t": tenant_id, "c": change_id, "corpus": corpus, "entry": entry_id, "family": family,
                     "flags": list(flags), "at": at})


def get(session: Session, *, tenant_id: str, change_id: str) -> Canary | None:
    """The canary row of this change, or None for a real change (one primary-key lookup)."""
    row = session.execute(text(f"SELECT {_COLUMNS} FROM canaries WHERE tenant_id = :t AND change_id = :c"),
                          {"t": tenant_id, "c": change_id}).first()
    return _canary(row) if row is not None else None


def record_outcome(session: Session, *, tenant_id: str, change_id: str, outcome: str, decided_by: str,
                   at: datetime) -> None:
    session.execute(text("""
        UPDATE canaries SET outcome = :o, decided_by = :by, decided_at = :at
        WHERE tenant_id = :t AND change_id = :c AND outcome IS NULL"""),
                    {"t": tenant_id, "c": change_id, "o": outcome, "by": decided_by, "at": at})


def unnotified_misses(session: Session, *, tenant_id: str, deciders: Sequence[str]) -> list[Canary]:
    """The canaries these deciders (actor labels) approved and have not been told about, oldest first."""
    rows = session.execute(text(f"""
        SELECT {_COLUMNS} FROM canaries
        WHERE tenant_id = :t AND outcome = 'missed' AND notified_at IS NULL AND decided_by = ANY(:by)
        ORDER BY decided_at, change_id"""), {"t": tenant_id, "by": list(deciders)})
    return [_canary(r) for r in rows]


def mark_notified(session: Session, *, tenant_id: str, change_ids: Sequence[str], at: datetime) -> None:
    if change_ids:
        session.execute(text("""
            UPDATE canaries SET notified_at = :at
            WHERE tenant_id = :t AND change_id = ANY(:ids) AND notified_at IS NULL"""),
                        {"t": tenant_id, "ids": list(change_ids), "at": at})


@dataclass(frozen=True)
class Tally:
    """One reviewer's decided canaries: rejected (caught) and approved (missed)."""

    tenant_id: str
    reviewer: str
    caught: int
    missed: int

    @property
    def decided(self) -> int:
        return self.caught + self.missed

    @property
    def catch_rate(self) -> float:
        return self.caught / self.decided if self.decided else 0.0


_TALLY = """
    SELECT tenant_id, decided_by AS reviewer, count(*) FILTER (WHERE outcome = 'caught') AS caught,
           count(*) FILTER (WHERE outcome = 'missed') AS missed
    FROM canaries WHERE outcome IS NOT NULL {where}
    GROUP BY tenant_id, decided_by ORDER BY tenant_id, decided_by"""


def tallies(session_or_conn, *, tenant_id: str | None = None, reviewer: str | None = None) -> list[Tally]:
    """Each reviewer's catches and misses, of one tenant (or, for `/metrics`, of every tenant)."""
    where, params = "", {}
    if tenant_id is not None:
        where, params = "AND tenant_id = :t", {"t": tenant_id}
    if reviewer is not None:
        where, params = where + " AND decided_by = :r", {**params, "r": reviewer}
    return [Tally(**r._mapping) for r in session_or_conn.execute(text(_TALLY.format(where=where)), params)]


def lock_staging(session: Session, *, tenant_id: str) -> None:
    """Serialise canary staging in one tenant until commit (an advisory lock of its own: the tenant
    row stays unlocked, as every write's foreign-key check reads it while staging embeds and screens)."""
    session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended('memwarden-canaries:' || :t, 0))"),
                    {"t": tenant_id})


def latest_created_at(session: Session, *, tenant_id: str) -> datetime | None:
    return session.execute(text("SELECT max(created_at) FROM canaries WHERE tenant_id = :t"),
                           {"t": tenant_id}).scalar()


_REAL_STAGED = """
    FROM changes c
    WHERE c.tenant_id = :t AND c.operation = 'remember' AND c.submitted_at > :since
      AND c.submitted_by LIKE 'key%' AND c.request ? 'memory_id'
      AND NOT EXISTS (SELECT 1 FROM canaries k WHERE k.tenant_id = c.tenant_id AND k.change_id = c.id)"""


def real_staged_since(session: Session, *, tenant_id: str, since: datetime) -> int:
    """How many real remembers API keys staged for review after `since` (canaries not counted)."""
    return int(session.execute(text("SELECT count(*) " + _REAL_STAGED), {"t": tenant_id, "since": since}).scalar() or 0)


@dataclass(frozen=True)
class Template:
    """The real staged write a canary is modelled on: who wrote it, for which agent and user, its tags."""

    agent_id: str
    user_id: str | None
    submitted_by: str
    tags: tuple[str, ...]


def templates_since(session: Session, *, tenant_id: str, since: datetime, limit: int = 50) -> list[Template]:
    """The latest real staged remembers since `since` (newest first), as canary templates."""
    rows = session.execute(text(f"""
        SELECT c.agent_id, c.user_id, c.submitted_by, m.tags
        FROM ({"SELECT c.* " + _REAL_STAGED} ORDER BY c.submitted_at DESC LIMIT :n) c
        LEFT JOIN memories m ON m.tenant_id = c.tenant_id AND m.id = c.memory_ids[1]"""),
                           {"t": tenant_id, "since": since, "n": limit})
    return [Template(r[0], r[1], r[2], tuple(r[3] or ())) for r in rows]


def enabled_tenants(session: Session) -> list[str]:
    """Tenants whose settings enable canaries (the background round visits these only)."""
    return list(session.execute(text(
        "SELECT id FROM tenants WHERE (settings -> 'canaries' ->> 'enabled')::boolean IS TRUE ORDER BY id")).scalars())


NOT_A_CANARY_SQL = ("NOT EXISTS (SELECT 1 FROM canaries k WHERE k.tenant_id = changes.tenant_id "
                    "AND k.change_id = changes.id)")
"""A condition on `changes` rows: the change is a real write (decision history mined for learned
rules leaves canaries out)."""
