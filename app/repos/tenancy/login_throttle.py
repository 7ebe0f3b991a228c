"""SQL for sign-in throttling (table `login_throttle`): one row per (username, client) pair, and
one per username under the client name the service uses for "all clients". The rules (how many
failures, how long to wait) live in `app.services.tenancy.users`; times are the database's clock, so every
serving process agrees."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.orm import Session


def read(session: Session, *, username: str, clients: tuple[str, ...], known_within: timedelta) -> dict:
    """The rows of `username` for `clients`, by client: `wait` (whole seconds still blocked, or
    None/≤0), `known` (signed in from this client within `known_within`) and `refusal_audited`
    (a refusal under the current block was already audited)."""
    rows = session.execute(text(
        "SELECT client, ceil(extract(epoch FROM blocked_until - now()))::int AS wait,"
        " coalesce(last_success_at > now() - :known, false) AS known,"
        " coalesce(refusal_audited_for = blocked_until, false) AS refusal_audited"
        " FROM login_throttle WHERE username = :u AND client = ANY(:clients)"
    ), {"u": username, "clients": list(clients), "known": known_within})
    return {row.client: row for row in rows}


def add_failure(session: Session, *, username: str, client: str, memory: timedelta) -> int:
    """Count one failure (failures older than `memory` are forgotten first); returns the count."""
    return session.scalar(text(
        "INSERT INTO login_throttle AS t (username, client, failures, last_failure_at) VALUES (:u, :c, 1, now())"
        " ON CONFLICT (username, client) DO UPDATE SET failures = CASE"
        "   WHEN t.last_failure_at > now() - :memory THEN t.failures + 1 ELSE 1 END,"
        " last_failure_at = now(), updated_at = now()"
        " RETURNING failures"), {"u": username, "c": client, "memory": memory})


def block(session: Session, *, username: str, client: str, seconds: int) -> None:
    session.execute(text(
        "UPDATE login_throttle SET blocked_until = now() + make_interval(secs => :s)"
        " WHERE username = :u AND client = :c"), {"u": username, "c": client, "s": seconds})


def mark_refusal_audited(session: Session, *, username: str, client: str) -> None:
    """A refusal under the pair's current block has been audited; later ones need not be."""
    session.execute(text(
        "UPDATE login_throttle SET refusal_audited_for = blocked_until WHERE username = :u AND client = :c"),
        {"u": username, "c": client})


def record_success(session: Session, *, username: str, client: str) -> None:
    """The client's count starts again, unblocked, and it is known from now on."""
    session.execute(text(
        "UPDATE login_throttle SET failures = 0, blocked_until = NULL, last_success_at = now(), updated_at = now()"
        " WHERE username = :u AND client = :c"), {"u": username, "c": client})


def forget_one_failure(session: Session, *, username: str, client: str) -> None:
    session.execute(text(
        "UPDATE login_throttle SET failures = greatest(failures - 1, 0) WHERE username = :u AND client = :c"),
        {"u": username, "c": client})


def prune(session: Session, *, idle: timedelta, limit: int = 100) -> None:
    """Delete up to `limit` rows untouched for `idle` (bounded work per sign-in)."""
    session.execute(text(
        "DELETE FROM login_throttle WHERE ctid = ANY(ARRAY("
        " SELECT ctid FROM login_throttle WHERE updated_at < now() - :idle LIMIT :limit))"),
        {"idle": idle, "limit": limit})
