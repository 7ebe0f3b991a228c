"""Every policy change is backtested before it goes live (`app.core.backtest`): a hand-written
policy (`PUT /v1/policy`, the admin page, `memwarden tenant set --policy-file`), an accepted
suggestion, a screening category default. A change that newly admits, with no person deciding, a
known attack, a write a reviewer rejected or a write a recover pulled back is refused with 409
`backtest_failed` and the report, unless the admin gives an override reason; the audit log records
the backtest's counts and the override either way.

Known attacks are the poisoned writes of the shipped screening corpus, screened once per process
(per embedder) as a write of that text would be, against the live memories each was written to
contradict; the tenant's history is its latest `backtest_window` decided staged remembers.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from functools import cache
from typing import Any, Sequence

from app.core.backtest import Replayed, Report, corpus_agents, corpus_tags, harms_of, replay
from app.core.policy import Policy, WriteRequest
from app.core.screening import screen
from app.errors import BacktestFailed, ValidationFailed
from app.paths import ATTACK_CORPUS
from app.repos.review import suggestions as repo
from app.services.runtime.context import AppContext
from app.services.memory.staging import tenant_policy

KNOWN_ATTACKS = ATTACK_CORPUS
"""The shipped corpus whose poisoned writes a backtest replays as known attacks."""
CLAIMED_SOURCES: tuple[str | None, ...] = (None, "user")
"""Each known attack is replayed with no source and claiming the user said it."""
OVERRIDE_REASON_MAX = 500


@cache
def _attack_rows() -> tuple[dict[str, Any], ...]:
    rows = []
    with KNOWN_ATTACKS.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row.get("label") != "poisoned" or not isinstance(row.get("content"), str):
                continue
            # An attack defined by its claimed origin is replayed with it; any other with each claim.
            sources = (row["source"],) if isinstance(row.get("source"), str) else CLAIMED_SOURCES
            rows.append({"id": str(row["id"]), "family": str(row.get("class") or "attack"),
                         "type": row.get("type") if row.get("type") in ("semantic", "episodic") else "semantic",
                         "content": row["content"], "sources": sources,
                         "live": tuple(x for x in row.get("live") or () if isinstance(x, str))})
    return tuple(rows)


_screened: dict[str, tuple[tuple[dict[str, Any], str | None, tuple[str, ...], str], ...]] = {}
_screened_lock = threading.Lock()
_prepared = False


def _screened_attacks(ctx: AppContext) -> tuple[tuple[dict[str, Any], str | None, tuple[str, ...], str], ...]:
    """(corpus row, claimed source, flag names, risk level) of every known attack, screened once per
    embedder as a write of it would be: against the live memories it was written to contradict, by a
    key allowed no privileged source."""
    embedder = ctx.embedder
    with _screened_lock:
        found = _screened.get(embedder.name)
        if found is not None:
            return found
        rows = _attack_rows()
        vectors = embedder.embed([r["content"] for r in rows])
        out = []
        for row, vector in zip(rows, vectors):
            for source in row["sources"]:
                flags = screen(row["content"], memory_type=row["type"], source=source, live=row["live"],
                               embedding=vector.tolist(), embedder=embedder.name)
                out.append((row, source, tuple(flags.names), flags.risk))
        _screened[embedder.name] = tuple(out)
        return _screened[embedder.name]


def prepare(ctx: AppContext) -> None:
    """Screen the known attacks in the background if this process has not yet: called when an admin
    opens a page a policy change starts from, so the first backtest after a start does not wait for it."""
    global _prepared
    with _screened_lock:
        if _prepared or _screened:
            return
        _prepared = True
    threading.Thread(target=_screened_attacks, args=(ctx,), name="backtest-corpus", daemon=True).start()


def _history(session, tenant_id: str, limit: int) -> list[Replayed]:
    out = []
    for w in repo.replay_writes(session, tenant_id=tenant_id, limit=limit):
        request = WriteRequest(operation="remember", agent_id=w.agent_id, type=w.type, source=w.source, tags=w.tags,
                               content=w.content, confidence=w.confidence, risk_flags=w.risk_flags,
                               risk_level=w.risk_level)
        out.append(Replayed(w.change_id, "history", request, harms_of(w.status, w.memory_status, w.hard_deleted)))
    return out


def _corpus(ctx: AppContext, agents: Sequence[str], tag_sets: Sequence[tuple[str, ...]]) -> list[Replayed]:
    out = []
    for row, source, flags, risk in _screened_attacks(ctx):
        for agent in agents:
            for tags in tag_sets:
                request = WriteRequest(operation="remember", agent_id=agent, type=row["type"], source=source,
                                       tags=tags, content=row["content"], risk_flags=flags, risk_level=risk)
                ref = f"{row['id']}@{agent}/{source or 'none'}" + (f"#{tags[0]}" if tags else "")
                out.append(Replayed(ref, "corpus", request, ("known_attack",), row["family"]))
    return out


def backtest(ctx: AppContext, tenant_id: str, candidate: Policy, *, current: Policy | None = None) -> dict[str, Any]:
    """Replay the tenant's history and the known attacks under its policy and under `candidate`."""
    started = time.perf_counter()
    with ctx.db.sessions() as session:
        current = current if current is not None else tenant_policy(session, tenant_id)
        history = _history(session, tenant_id, ctx.settings.backtest_window)
        seen = repo.busiest_agents(session, tenant_id=tenant_id, limit=8)
    report: Report = replay(current, candidate, [*history, *_corpus(ctx, corpus_agents(candidate, seen), corpus_tags(candidate))])
    doc = report.to_json()
    doc["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return doc


def override_reason(value: Any) -> str | None:
    """An admin's reason for going ahead despite a failed backtest (None: no override given)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailed.at("/override_reason", "a non-empty string saying why the change goes ahead")
    if len(value) > OVERRIDE_REASON_MAX:
        raise ValidationFailed.at("/override_reason", f"at most {OVERRIDE_REASON_MAX} characters")
    return value.strip()


def gate(report: dict[str, Any], reason: str | None) -> dict[str, Any]:
    """Refuse a change whose backtest blocks unless overridden; what the audit log records of it."""
    if report["blocking"] and reason is None:
        raise BacktestFailed(
            f"this change would have admitted {report['blocking']} known-bad write(s) with no one deciding; "
            "give an override reason (override_reason, --override-reason) to go ahead", details=report)
    summary = {k: v for k, v in report.items() if k not in ("named", "named_limit", "known_attack_families",
                                                           "elapsed_ms")}
    if report["blocking"]:
        summary["override"] = True
        # The reason is an admin's free text: the log keeps its digest, never the text (as with reviews).
        summary["override_reason_sha256"] = hashlib.sha256(reason.encode()).hexdigest()
    return summary
