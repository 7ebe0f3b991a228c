"""The audit log service: append inside the caller's transaction, sign checkpoints, export, verify.

Hashing and verification are pure (`app.core.auditchain`); this module only moves bytes to and
from PostgreSQL. `append` records an entry in the caller's transaction; the entry is hashed and
inserted when that transaction commits (a `before_commit` hook, `app.services.audit.audit_commit`),
still inside it, under a transaction-scoped advisory lock on the chain taken right then. So appends
are serialised per chain under READ COMMITTED (each sees every earlier committed entry) while the
lock is held only for the commit itself; `PRIMARY KEY (chain_id, seq)` is the backstop. No
sequences: they gap.

Fail closed: an append first checks that the chain head it extends recomputes from its stored
bytes and its predecessor's chain hash (skipped when the head is the one this process last
wrote or checked; the lock call returns those rows, so the check adds no round trip), a checkpoint
is only signed after proving the chain extends the last signed and the last witnessed checkpoint
(`app.services.audit.audit_proofs`), and an export verifies its range (bytes, links and the query
columns it serves) before its first line. Each refusal raises `AuditChainBroken` (409
`audit_chain_broken`), is logged and opens the chain's alarm (`app.repos.audit.audit_alarms`), in its
own transaction so it outlives the refused one. While a chain's alarm is open every write to it is
refused at commit, under the chain's lock (`memwarden_lock_chain` returns the open alarm), so a
chain broken anywhere, not only at its head, takes no more writes until an operator repairs it
and clears the alarm (`memwarden audit clear-alarm`).
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.config import Settings
from app.core import auditchain as chain
from app.core.timefmt import format_ts, utcnow
from app.db import prepared
from app.db.models import AuditCheckpoint, AuditEntry
from app.db.transaction_work import ChainWork, after_commit, commits_durably, work_of
from app.errors import AuditChainBroken
from app.observability import metrics, tracing
from app.repos.audit import audit_alarms, audit_reads
from app.repos.audit import audit_log as audit_log_repo
from app.services.audit import audit_proofs
from app.services.audit.audit_commit import (chain_closed, commit_pipelined, insert_with_commit, lock_chain,
                                            sends_with_commit)
from app.services.audit.audit_witness import Witness

log = logging.getLogger(__name__)
SYSTEM_CHAIN = "system"


def chain_for(tenant_id: str | None) -> str:
    """The chain a tenant's events go to (`system` for events without a tenant)."""
    return f"tenant:{tenant_id}" if tenant_id else SYSTEM_CHAIN


class AuditLog:
    """Appends and checkpoints for every chain, signed with one Ed25519 key."""

    def __init__(self, *, origin: str, signer: chain.Signer, checkpoint_every: int, witness: Witness | None = None):
        self.origin = origin
        self.signer = signer
        self.checkpoint_every = checkpoint_every
        self.witness = witness or Witness()
        self._touched: set[str] = set()
        # chain -> (seq, chain hash) of a head known good: written and committed by this process,
        # or verified by it. An append whose head is still this one skips the head check.
        self.known_good_heads: dict[str, tuple[int, bytes]] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> AuditLog:
        pem = Path(settings.resolved_signing_key_file()).read_bytes()
        signer = chain.Signer(chain.load_private_key_pem(pem), name=settings.audit_origin)
        return cls(origin=settings.audit_origin, signer=signer, checkpoint_every=settings.checkpoint_every,
                   witness=Witness.from_settings(settings))

    @property
    def vkey(self) -> str:
        return self.signer.vkey

    def checkpoint_origin(self, chain_id: str) -> str:
        return f"{self.origin}/{chain_id}"

    # -- append ---------------------------------------------------------------------------------

    def append(self, session: Session, *, tenant_id: str | None, event_type: str, actor: dict[str, Any],
               subject: dict[str, Any] | None, data: dict[str, Any]) -> None:
        """Append one event to the tenant's chain as part of `session`'s transaction.

        The entry is hashed and written when the transaction commits, in that same transaction,
        so an action and its audit entry exist together or not at all. Writing at commit keeps
        each chain's lock held for the last milliseconds of a transaction rather than all of it.
        `data` must never hold memory content: callers pass digests (`content_digest`) instead.
        """
        pending = chain_work(session, tenant_id)
        pending.writer = self
        pending.audit.append((tenant_id, event_type, actor, subject or {}, data))

    def append_access(self, session: Session, *, tenant_id: str | None, event_type: str, actor: dict[str, Any],
                      subject: dict[str, Any] | None, data: dict[str, Any]) -> None:
        """`append` for a record of access (a sign-in or sign-out, a verification) that must not be
        refused: people must still get in to investigate a tenant whose chain is closed by an open
        alarm. Such a record goes to the system chain instead, naming the tenant."""
        if tenant_id is not None and audit_alarms.open_alarm(session, chain_for(tenant_id)) is not None:
            tenant_id, data = None, {**data, "tenant_id": tenant_id, "tenant_chain": "closed_by_alarm"}
        self.append(session, tenant_id=tenant_id, event_type=event_type, actor=actor, subject=subject, data=data)

    def write_at_commit(self, session: Session, chain_id: str, records: list[tuple], head: Row) -> None:
        """Hash and insert pending entries of one chain after `head` (the `memwarden_lock_chain`
        row read under the chain's lock, which the caller holds; `audit_seq` None: empty chain).
        Called by the commit hook (`audit_commit._write_pending`) for what `append` deferred.

        When this commit is the database's and signs no checkpoint, the INSERT goes out in one
        pipeline with the COMMIT (`audit_commit._insert_with_commit`): one round trip fewer under the lock."""
        conn = session.connection()
        seq, prev = self._extend(chain_id, head, lambda: session_engine(session))
        rows, seq, prev, checkpoint_due = self.build_rows(chain_id, records, seq, prev)
        if checkpoint_due or not sends_with_commit(session):
            audit_log_repo.insert_entries(conn, rows)  # read back by the checkpoint, or not the last statement
        else:
            insert_with_commit(session, audit_log_repo.pipelined_insert_sql(tuple(rows[0])), rows)
        self._touched.add(chain_id)
        metrics.AUDIT_APPENDS.inc(len(rows))
        if commits_durably(session):
            after_commit(session, lambda: self.known_good_heads.__setitem__(chain_id, (seq, prev)))
        if checkpoint_due:
            self._checkpoint_locked(session, chain_id)

    def _extend(self, chain_id: str, head: Row, engine: Callable[[], Engine]) -> tuple[int, bytes]:
        """The (seq, chain hash) new entries extend: the locked `head`, checked unless it is the
        one this process last wrote or checked (`engine()`: where a refusal's alarm is recorded)."""
        seq, prev = (head.audit_seq, bytes(head.audit_hash)) if head.audit_seq is not None else (0, chain.GENESIS)
        if seq and self.known_good_heads.get(chain_id) != (seq, prev):
            self.verify_head(engine(), chain_id, head)
        return seq, prev

    def build_rows(self, chain_id: str, records: list[tuple], seq: int,
                   prev: bytes) -> tuple[list[dict[str, Any]], int, bytes, bool]:
        """Hash `records` ((tenant_id, event_type, actor, subject, data) each) into the chain after
        (`seq`, `prev`): the `audit_entries` rows, the new head's seq and chain hash, and whether a
        count-based checkpoint is due. The one place an entry's bytes and row are made, for the
        Session's commit hook and for `commit_on_driver` alike."""
        origin, now, rows, checkpoint_due = self.checkpoint_origin(chain_id), utcnow(), [], False
        for tenant_id, event_type, actor, subject, data in records:
            seq += 1
            entry = chain.build_entry(origin=origin, chain_id=chain_id, seq=seq, ts=format_ts(now),
                                      event_type=event_type, actor=actor, subject=subject, data=data)
            leaf = chain.leaf_hash(entry)
            prev = chain.chain_hash(prev, leaf)
            rows.append({"chain_id": chain_id, "seq": seq, "entry": entry, "leaf_hash": leaf, "chain_hash": prev,
                         "tenant_id": tenant_id, "event_type": event_type, "ts": now, "actor": actor_label(actor),
                         "subject_type": subject.get("type"), "subject_id": subject.get("id")})
            checkpoint_due |= self.checkpoint_every > 0 and seq % self.checkpoint_every == 0
        return rows, seq, prev, checkpoint_due

    def commit_on_driver(self, engine: Engine, tenant_id: str, records: list[tuple],
                         inserts: list[tuple[str, list[dict[str, Any]]]],
                         events: Callable[[int], list[tuple[str, list[dict[str, Any]]]]]) -> bool:
        """A whole write transaction on a pooled psycopg connection, without a `Session`: lock the
        tenant's chain and read its heads (one round trip, the wake-up NOTIFY sent), hash `records`
        onto it (`build_rows`, as the commit hook does), then send `inserts` (the write's own rows),
        the entries, the event rows `events(event head id)` returns, and the COMMIT in one pipeline.

        What the commit hook does that this does not (a checkpoint due, webhook deliveries to
        queue) makes it return False having written nothing: the caller commits through a
        `Session` instead. An open alarm raises `AuditChainBroken`, a head that does not verify
        too (its alarm opened), as at a Session's commit; psycopg's errors are raised as
        SQLAlchemy's. True once the COMMIT returned (durable)."""
        chain_id = chain_for(tenant_id)
        with tracing.span("memwarden.audit.append", **{"memwarden.audit.chain": "tenant",
                                                       "memwarden.audit.entries": len(records)}), \
                prepared.transaction(engine) as driver:
            heads = audit_log_repo.lock_and_read_heads_on(driver, chain_id=chain_id, tenant_id=tenant_id, notify=True)
            if heads.alarm_id is not None:
                raise chain_closed(chain_id, heads)
            if heads.has_webhooks:  # deliveries are queued through the ORM (`events._write_queued`)
                return False
            seq, prev = self._extend(chain_id, heads, lambda: engine)
            rows, seq, prev, checkpoint_due = self.build_rows(chain_id, records, seq, prev)
            if checkpoint_due:  # signed in the transaction, from rows read back: the Session's path
                return False
            entries = (audit_log_repo.pipelined_insert_sql(tuple(rows[0])), rows)
            statements = [*inserts, entries, *events(heads.event_id)]
            prepared.commit(driver, lambda: commit_pipelined(driver, statements))
        self._touched.add(chain_id)
        metrics.AUDIT_APPENDS.inc(len(rows))
        self.known_good_heads[chain_id] = (seq, prev)
        return True

    def check_head(self, session: Session, chain_id: str, head: Row) -> None:
        """Refuse to extend a head that does not verify: its stored bytes must be a well-formed
        entry at that seq whose leaf hash, chained onto its predecessor's stored chain hash, gives
        its stored chain hash (a row INSERTed by hand without the right hashes shows here).
        `head` is the `memwarden_lock_chain` row: the head's seq, bytes and hashes and its
        predecessor's seq and chain hash, read under the lock. O(1), whatever the chain's length."""
        self.verify_head(session_engine(session), chain_id, head)

    def verify_head(self, engine: Engine, chain_id: str, head: Row) -> None:
        """`check_head` with the engine a refusal's alarm is recorded on."""
        seq, head_hash = head.audit_seq, bytes(head.audit_hash)
        try:
            if seq > 1 and head.prev_seq != seq - 1:
                raise chain.ChainError("seq_mismatch", f"seq {seq - 1} below the head at {seq} is missing",
                                       seq=seq - 1)
            prev = bytes(head.prev_hash) if seq > 1 else chain.GENESIS
            verifier = chain.ChainVerifier(self.checkpoint_origin(chain_id), chain_id, start_seq=seq,
                                           prev_chain_hash=prev)
            verifier.add(bytes(head.head_entry), bytes(head.head_leaf), head_hash, seq=seq)
            if verifier.chain_head != head_hash:
                raise chain.ChainError("chain_hash_mismatch", f"the head at seq {seq} does not recompute", seq=seq)
        except chain.AuditChainError as exc:
            raise self._broken(engine, chain_id, exc, "append",
                               "append refused: the chain head does not verify") from None
        self.known_good_heads[chain_id] = (seq, head_hash)

    def _broken(self, engine: Engine, chain_id: str, exc: chain.AuditChainError, detected_by: str,
                what: str) -> AuditChainBroken:
        """Log a refusal (hashes and seqs only, never content), open the chain's alarm and return
        the error the caller raises."""
        log.error("audit chain %s: %s: seq %s: %s: %s", chain_id, what, exc.seq, exc.reason, exc.detail)
        self.raise_alarm(engine, chain_id, first_bad_seq=exc.seq, reason=exc.reason, detail=exc.detail,
                         detected_by=detected_by)
        return AuditChainBroken(f"audit chain {chain_id}: {what}: first bad seq {exc.seq}: {exc.reason}",
                                details={"chain_id": chain_id, "first_bad_seq": exc.seq, "reason": exc.reason,
                                         "detail": exc.detail})

    def raise_alarm(self, engine: Engine, chain_id: str, *, first_bad_seq: int | None, reason: str, detail: str,
                    detected_by: str) -> bool:
        """Open the chain's alarm in a transaction of its own, committed even though the caller's
        (which may hold the chain's lock: the alarm needs no lock) is about to roll back. True when
        this call opened it. A failure to record is logged, never raised over the refusal itself."""
        try:
            with engine.begin() as conn:
                opened = audit_alarms.raise_alarm(conn, chain_id=chain_id, tenant_id=tenant_of(chain_id),
                                                  first_bad_seq=first_bad_seq, reason=reason, detail=detail or "",
                                                  detected_by=detected_by)
        except SQLAlchemyError:
            log.exception("audit chain %s: the alarm could not be recorded", chain_id)
            return False
        if opened:
            log.critical("audit chain %s: ALARM: writes to the chain are refused until it verifies again and "
                         "the alarm is cleared (memwarden audit clear-alarm); first bad seq %s: %s",
                         chain_id, first_bad_seq, reason)
        return opened

    # -- checkpoints ----------------------------------------------------------------------------

    def checkpoint(self, session: Session, chain_id: str) -> AuditCheckpoint | None:
        """Sign the chain's current state (if it grew since the last checkpoint) and return the latest."""
        lock_chain(session, chain_id)
        return self._checkpoint_locked(session, chain_id)

    def _checkpoint_locked(self, session: Session, chain_id: str) -> AuditCheckpoint | None:
        """Sign the stored chain only after proving it extends every signed state known: the last
        checkpoint in the database and the last one in the witness file (which the database owner
        cannot delete). Raises `AuditChainBroken` otherwise; nothing is signed."""
        origin = self.checkpoint_origin(chain_id)
        last = latest_checkpoint(session, chain_id)
        record = self.witness.latest(origin, self.vkey)
        witnessed = record.checkpoint if record is not None else None
        try:
            size, head, frontier, proofs = audit_proofs.prove_extensions(session, chain_id, last, witnessed)
        except chain.AuditChainError as exc:
            raise self._broken(session_engine(session), chain_id, exc, "checkpoint",
                               "checkpoint refused: the chain does not extend the last signed checkpoint") from None
        signed = None
        if size and (last is None or size != last.size):
            note = self.signer.sign_checkpoint(origin, size, frontier.root(), head, ts=format_ts(utcnow()))
            signed = AuditCheckpoint(chain_id=chain_id, size=size, note=note, frontier=frontier.to_json())
            audit_log_repo.add_checkpoint(session, signed)
            metrics.CHECKPOINTS_SIGNED.inc()
        latest = signed or last
        if (latest is not None and self.witness.enabled and commits_durably(session)
                and (witnessed is None or witnessed.size < latest.size)):
            # Witness the newest checkpoint (also one an earlier crash left unwitnessed) once it is
            # durable, with the consistency proof from the last witnessed one when known.
            base = witnessed if witnessed is not None else (last if signed is not None else None)
            line = chain.witness_line(latest.note, from_size=base.size if base else None,
                                      proof=proofs.get(base.size, []) if base else [])
            after_commit(session, lambda: self.witness.publish(line))
        return latest

    def checkpoint_touched(self, sessions) -> int:
        """Sign a checkpoint of every chain this process appended to since the last call (the
        time-based cadence; the count-based one runs inside `append`)."""
        touched, self._touched = self._touched, set()
        return self.checkpoint_chains(sessions, sorted(touched))

    def checkpoint_chains(self, sessions, chain_ids: Sequence[str]) -> int:
        """Sign a checkpoint of each chain, each in its own transaction. A chain that does not verify
        is logged and its alarm opened (by `checkpoint`), then passed over, so the others still get
        theirs. Returns how many."""
        for chain_id in chain_ids:
            try:
                with sessions.begin() as session:
                    self.checkpoint(session, chain_id)
            except AuditChainBroken:
                pass
        return len(chain_ids)

    # -- export and verify ------------------------------------------------------------------------

    def export(self, sessions, chain_id: str, *, from_seq: int = 1, to_seq: int | None = None) -> Iterator[str]:
        """JSONL lines: manifest, entries (exact bytes), the checkpoints they cover. Streams in
        bounded memory. A fresh checkpoint is signed first, so every export ends covered.

        Everything that can fail happens before this returns: signing the checkpoint and verifying
        the whole range (in the snapshot the lines are then read from) - a broken chain raises
        `AuditChainBroken` here rather than cutting a download short."""
        lines = self._export(sessions, chain_id, from_seq=from_seq, to_seq=to_seq)
        first = next(lines)
        return itertools.chain([first], lines)

    def _export(self, sessions, chain_id: str, *, from_seq: int, to_seq: int | None) -> Iterator[str]:
        with sessions.begin() as session:
            latest = self.checkpoint(session, chain_id)
        size = latest.size if latest else 0
        with sessions() as session:
            with session.begin():
                audit_reads.snapshot_read_only(session)
                if to_seq is not None and to_seq < size:
                    # Extend to the first checkpoint at or after to_seq, so the range asked for is covered
                    # by a signature (rounding down could end before from_seq: an unverifiable export).
                    to_seq = audit_reads.first_checkpoint_size_from(session, chain_id=chain_id, size=to_seq) or size
                to_seq = size if to_seq is None else min(to_seq, size)
                from_seq = min(from_seq, to_seq + 1)  # a range past the end is empty, not malformed
                prev = chain.GENESIS
                if from_seq > 1:
                    prev = audit_reads.chain_hash_at(session, chain_id=chain_id, seq=from_seq - 1) or chain.GENESIS
                manifest = {
                    "kind": "manifest", "format": chain.EXPORT_FORMAT, "origin": self.checkpoint_origin(chain_id),
                    "chain_id": chain_id, "from_seq": from_seq, "to_seq": to_seq, "prev_chain_hash": prev.hex(),
                    "exported_at": format_ts(utcnow()), "vkey": self.vkey,
                }
                notes = audit_reads.checkpoint_notes(session, chain_id=chain_id, from_size=from_seq,
                                                     to_size=to_seq) if to_seq >= from_seq else []
                self.verify_range(session, chain_id, from_seq, to_seq, prev, notes)
                entries = audit_reads.rows_in_range(session, chain_id=chain_id, from_seq=from_seq, to_seq=to_seq)
                yield from chain.export_lines(manifest, ((r.seq, r.entry, r.leaf_hash, r.chain_hash) for r in entries),
                                              notes)

    def verify_range(self, session: Session, chain_id: str, from_seq: int, to_seq: int, prev: bytes,
                      notes: Sequence[str]) -> None:
        """Verify rows from_seq..to_seq against their links, their query columns (the export
        serves them to whoever filters on them) and the signed (and witnessed) checkpoints in the
        range; raise `AuditChainBroken` at the first bad seq."""
        origin = self.checkpoint_origin(chain_id)
        witnessed = self.witness.latest(origin, self.vkey)
        if witnessed is not None and from_seq <= witnessed.checkpoint.size <= to_seq:
            notes = sorted([*notes, witnessed.note], key=_note_size)
        rows = audit_reads.rows_in_range(session, chain_id=chain_id, from_seq=from_seq, to_seq=to_seq,
                                         with_columns=True)
        report = chain.verify_rows(((r.seq, r.entry, r.leaf_hash, r.chain_hash, _columns(r)) for r in rows),
                                   chain_id=chain_id, origin=origin, checkpoints=notes, vkeys=[self.vkey],
                                   start_seq=from_seq, prev_chain_hash=prev)
        if not report.ok:
            problem = chain.ChainError(report.reason or "malformed", report.detail, seq=report.first_bad_seq)
        elif report.tree_size < to_seq:
            problem = chain.ChainError("truncated", f"rows end at seq {report.tree_size}, before {to_seq}",
                                       seq=report.tree_size + 1)
        else:
            return
        raise self._broken(session_engine(session), chain_id, problem, "export",
                           "export refused: the chain does not verify")

    def verify_database(self, sessions, chain_id: str, held_checkpoints: Sequence[str] = ()) -> chain.VerifyReport:
        """Check the stored chain: bytes, links, query columns against hashed bytes, checkpoints.

        `held_checkpoints` are signed notes kept outside the database (an auditor's copy): checked
        like stored ones, so rows deleted together with their checkpoint rows show as `truncated`."""
        with sessions() as session:
            with session.begin():
                audit_reads.snapshot_read_only(session)
                notes = audit_reads.checkpoint_notes(session, chain_id=chain_id)
                if held_checkpoints:
                    notes = sorted([*notes, *held_checkpoints], key=_note_size)
                rows = audit_reads.all_entries(session, chain_id=chain_id)
                return chain.verify_rows(
                    ((r.seq, r.entry, r.leaf_hash, r.chain_hash, _columns(r)) for r in rows),
                    chain_id=chain_id, origin=self.checkpoint_origin(chain_id), checkpoints=notes,
                    vkeys=[self.vkey],
                )

    def verify_and_alarm(self, sessions, chain_id: str, detected_by: str,
                         held_checkpoints: Sequence[str] = ()) -> chain.VerifyReport:
        """`verify_database`, held also to the last witnessed checkpoint; a chain found tampered
        opens its alarm (a break below the last checkpoint shows only in such a full verification)."""
        record = self.witness.latest(self.checkpoint_origin(chain_id), self.vkey)
        if record is not None:
            held_checkpoints = [*held_checkpoints, record.note]
        report = self.verify_database(sessions, chain_id, held_checkpoints)
        if report.status == "tampered":
            log.error("audit chain %s: full verification failed: seq %s: %s: %s", chain_id, report.first_bad_seq,
                      report.reason, report.detail)
            with sessions() as session:
                engine = session_engine(session)
            self.raise_alarm(engine, chain_id,
                             first_bad_seq=report.first_bad_seq, reason=report.reason or "malformed",
                             detail=report.detail or "", detected_by=detected_by)
        return report


def _note_size(note: str) -> int:
    try:
        return chain.parse_checkpoint(note).size
    except chain.CheckpointError:
        return 0  # first in line, so the verifier reports it


def _columns(row: AuditEntry) -> dict[str, Any]:
    """A row's query columns, named as the verifier reads them from the hashed bytes."""
    actor_kind, _, actor_id = row.actor.partition(":")
    # `actor_label` writes "?" for a part the actor lacks (entries made with an actor that named its
    # kind under another key, `{"type": "system"}`): the hashed entry has none, so neither has the column.
    return {"seq": row.seq, "chain_id": row.chain_id, "event_type": row.event_type, "ts": row.ts,
            "actor_kind": None if actor_kind == "?" else actor_kind, "actor_id": None if actor_id == "?" else actor_id,
            "subject_type": row.subject_type,
            "subject_id": row.subject_id,
            # tenant_id is not in the entry, but the chain it names is.
            "chain": chain_for(row.tenant_id)}


def actor_label(actor: dict[str, Any]) -> str:
    return f"{actor.get('kind', '?')}:{actor.get('id', '?')}"


def tenant_of(chain_id: str) -> str | None:
    """The tenant whose chain this is (None for the system chain)."""
    return chain_id.removeprefix("tenant:") if chain_id.startswith("tenant:") else None


def session_engine(session: Session) -> Engine:
    """The engine under the session, also when it is bound to a connection (a unit of work)."""
    bind = session.get_bind()
    return bind.engine if isinstance(bind, Connection) else bind


def chain_work(session: Session, tenant_id: str | None) -> ChainWork:
    """What this transaction will write to a tenant's logs at commit: its audit records, its
    events (the event log shares the chain's lock) and writes to run under that lock."""
    return work_of(session).chain(chain_for(tenant_id), tenant_id)


def latest_checkpoint(session: Session, chain_id: str) -> AuditCheckpoint | None:
    return audit_reads.latest_checkpoint(session, chain_id=chain_id)


def list_checkpoints(ctx, chain_id: str) -> list[dict[str, Any]]:
    """Every signed checkpoint of a chain, oldest first."""
    with ctx.db.sessions() as session:
        rows = audit_reads.checkpoints(session, chain_id=chain_id)
        return [{"size": r.size, "note": r.note, "created_at": format_ts(r.created_at)} for r in rows]
