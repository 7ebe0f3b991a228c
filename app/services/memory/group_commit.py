"""Group commit for remember: concurrent writes of one tenant share one transaction.

Every write of a tenant appends to the tenant's audit chain, under the chain's lock, held from
the lock call through the COMMIT (its WAL flush included). Concurrent writers of one tenant
therefore queue at that lock one transaction at a time, and each pays a BEGIN, the lock call
and a COMMIT of its own. Here they queue in the process instead, and the writes that queued
while one transaction was committing go together in the next one: one lock, one pipelined
INSERT of the rows, their audit entries and events, one COMMIT.

It is group commit, not a timer (like `app.embeddings.BatchingEmbedder`): a write that finds
its tenant idle commits at once, alone, so a lone writer waits for nothing; only writes that
arrive while a commit is in flight wait for the next one (at most `MAX_WRITES` in one).

What each write keeps:

- durability: a write's call returns (and its 201 is sent) only after the COMMIT that holds it
  returned, with `synchronous_commit` on;
- its own audit entry (its key as the actor), event and outcome; the chain stays one sequence;
- isolation from the others' failures: screening and the policy decision (which refuse a single
  write) run in the writer's own thread before it joins a group (`remembering.decide`); if the
  group's transaction fails anyway (the database, a constraint), nothing of it is kept and every
  write of it is committed again alone, so only a write that fails alone fails.

Only writes that went live by the plain policy are grouped; staged writes (a change to review)
and those decided by a learned rule commit alone, as before.

A group commits on a pooled psycopg connection without an ORM Session where it can
(`remembering.commit_on_driver`: the same rows, entries and events, built by the same code, in one
pipeline with the COMMIT); where it cannot (a scope's first ref, webhooks, a checkpoint due) it
commits through a Session. A group that fails is retried write by write through a Session.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:

    from app.services.runtime.context import AppContext
    from app.services.memory.memories import Outcome
    from app.services.memory.remembering import DecidedWrite

    #: What inserts, journals and returns the outcomes of decided writes inside a transaction
    #: (`remembering.write_decided`, handed in by the caller so this module never imports it).
    WriteDecided = Callable[..., list[Outcome]]
    #: What commits a group on the driver connection, without a Session, or declines with None
    #: having written nothing (`remembering.commit_on_driver`).
    CommitDirect = Callable[[AppContext, list[DecidedWrite]], list[Outcome] | None]

MAX_WRITES = 32
"""Writes committed in one transaction at most (the rest wait for the next)."""


class _Queued:
    __slots__ = ("decided", "done", "outcome", "error", "alone")

    def __init__(self, decided: DecidedWrite):
        self.decided = decided
        self.done = False
        self.outcome: Outcome | None = None
        self.error: BaseException | None = None
        self.alone = False  # the group failed: commit this write again in a transaction of its own


class GroupCommitter:
    """Per tenant, at most one group of remembers committing at a time in this process."""

    def __init__(self, max_writes: int = MAX_WRITES):
        self.max_writes = max_writes
        self._cond = threading.Condition()
        self._queues: dict[str, list[_Queued]] = {}
        self._committing: set[str] = set()

    def waiting(self, tenant_id: str) -> int:
        """Writes of the tenant queued for the next group (not the one committing)."""
        with self._cond:
            return len(self._queues.get(tenant_id, ()))

    def commit(self, ctx: AppContext, decided: DecidedWrite, write: WriteDecided,
               direct: CommitDirect | None = None) -> Outcome:
        """Insert and journal `decided` (a live write) with `write` and commit it, maybe with
        other writes of its tenant; its outcome once durable. `direct`, if given, commits the
        group first, without a Session; where it declines (None), `write` does."""
        tenant_id = decided.principal.tenant_id
        mine = _Queued(decided)
        with self._cond:
            self._queues.setdefault(tenant_id, []).append(mine)
            while tenant_id in self._committing and not mine.done:
                self._cond.wait()
            if not mine.done:  # this thread commits the group: its own write and the oldest others
                self._committing.add(tenant_id)
                others = [q for q in self._queues.pop(tenant_id) if q is not mine]
                group = [mine, *others[:self.max_writes - 1]]
                if others[self.max_writes - 1:]:
                    self._queues[tenant_id] = others[self.max_writes - 1:]
        if not mine.done:
            try:
                _commit_group(ctx, group, write, direct)
            finally:
                with self._cond:
                    self._committing.discard(tenant_id)
                    self._cond.notify_all()
        if mine.alone:
            return _commit_alone(ctx, decided, write)
        if mine.error is not None:
            raise mine.error
        assert mine.outcome is not None
        return mine.outcome


def _commit_group(ctx: AppContext, group: list[_Queued], write: WriteDecided, direct: CommitDirect | None) -> None:
    try:
        decided = [q.decided for q in group]
        outcomes = direct(ctx, decided) if direct is not None else None
        if outcomes is None:
            with ctx.db.sessions.begin() as session:
                outcomes = write(ctx, session, decided, at_commit=True)
    except BaseException as exc:  # noqa: BLE001 — handed to the writers, never lost
        for queued in group:
            if len(group) == 1:
                queued.error = exc
            else:
                queued.alone = True
            queued.done = True
        return
    for queued, outcome in zip(group, outcomes, strict=True):
        queued.outcome, queued.done = outcome, True


def _commit_alone(ctx: AppContext, decided: DecidedWrite, write: WriteDecided) -> Outcome:
    with ctx.db.sessions.begin() as session:
        return write(ctx, session, [decided], at_commit=True)[0]


_committers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_committers_lock = threading.Lock()


def committer(ctx: AppContext) -> GroupCommitter:
    """The process's group committer for `ctx`'s database."""
    engine = ctx.db.engine
    found = _committers.get(engine)
    if found is None:
        with _committers_lock:
            found = _committers.get(engine)
            if found is None:
                found = _committers[engine] = GroupCommitter()
    return found
