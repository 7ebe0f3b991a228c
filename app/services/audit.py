"""The audit log service: append inside the caller's transaction, sign checkpoints, export, verify.

Hashing and verification are pure (`app.core.auditchain`); this module only moves bytes to and
from PostgreSQL. Appends are serialised per chain by a transaction-scoped advisory lock under
READ COMMITTED, so each append sees every earlier committed entry; `PRIMARY KEY (chain_id, seq)`
is the backstop. No sequences: they gap on rollback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from sqlalchemy import func, insert, select, text
from sqlalchemy.orm import Session

from app.config import Settings
from app.core import auditchain as chain
from app.core.timefmt import format_ts, utcnow
from app.db.models import AuditCheckpoint, AuditEntry

SYSTEM_CHAIN = "system"


def chain_for(tenant_id: str | None) -> str:
    """The chain a tenant's events go to (`system` for events without a tenant)."""
    return f"tenant:{tenant_id}" if tenant_id else SYSTEM_CHAIN


@dataclass(frozen=True)
class Appended:
    chain_id: str
    seq: int
    chain_hash: bytes


class AuditLog:
    """Appends and checkpoints for every chain, signed with one Ed25519 key."""

    def __init__(self, *, origin: str, signer: chain.Signer, checkpoint_every: int):
        self.origin = origin
        self.signer = signer
        self.checkpoint_every = checkpoint_every
        self._touched: set[str] = set()

    @classmethod
    def from_settings(cls, settings: Settings) -> "AuditLog":
        pem = Path(settings.resolved_signing_key_file()).read_bytes()
        signer = chain.Signer(chain.load_private_key_pem(pem), name=settings.audit_origin)
        return cls(origin=settings.audit_origin, signer=signer, checkpoint_every=settings.checkpoint_every)

    @property
    def vkey(self) -> str:
        return self.signer.vkey

    def checkpoint_origin(self, chain_id: str) -> str:
        return f"{self.origin}/{chain_id}"

    # -- append ---------------------------------------------------------------------------------

    def append(self, session: Session, *, tenant_id: str | None, event_type: str, actor: dict[str, Any],
               subject: dict[str, Any] | None, data: dict[str, Any]) -> Appended:
        """Append one event to the tenant's chain in `session`'s transaction (commits with it).

        `data` must never hold memory content: callers pass digests (`content_digest`) instead.
        """
        chain_id = chain_for(tenant_id)
        _lock_chain(session, chain_id)
        heads = _held(session)["heads"]
        head = heads.get(chain_id)  # our own earlier append in this transaction, under the same lock
        if head is None:
            head = session.execute(
                select(AuditEntry.seq, AuditEntry.chain_hash)
                .where(AuditEntry.chain_id == chain_id).order_by(AuditEntry.seq.desc()).limit(1)
            ).first()
        seq, prev = (head[0] + 1, head[1]) if head else (1, chain.GENESIS)
        now = utcnow()
        subject = subject or {}
        entry = chain.build_entry(origin=self.checkpoint_origin(chain_id), chain_id=chain_id, seq=seq,
                                  ts=format_ts(now), event_type=event_type, actor=actor, subject=subject,
                                  data=data)
        leaf = chain.leaf_hash(entry)
        link = chain.chain_hash(prev, leaf)
        # A Core INSERT: the ORM unit of work costs more than the hashing on this hot path.
        session.execute(insert(AuditEntry).values(
            chain_id=chain_id, seq=seq, entry=entry, leaf_hash=leaf, chain_hash=link, tenant_id=tenant_id,
            event_type=event_type, ts=now, actor=actor_label(actor),
            subject_type=subject.get("type"), subject_id=subject.get("id"),
        ))
        heads[chain_id] = (seq, link)
        self._touched.add(chain_id)
        if self.checkpoint_every > 0 and seq % self.checkpoint_every == 0:
            self._checkpoint_locked(session, chain_id)
        return Appended(chain_id, seq, link)

    # -- checkpoints ----------------------------------------------------------------------------

    def checkpoint(self, session: Session, chain_id: str) -> AuditCheckpoint | None:
        """Sign the chain's current state (if it grew since the last checkpoint) and return the latest."""
        _lock_chain(session, chain_id)
        return self._checkpoint_locked(session, chain_id)

    def _checkpoint_locked(self, session: Session, chain_id: str) -> AuditCheckpoint | None:
        last = latest_checkpoint(session, chain_id)
        start = last.size if last else 0
        rows = session.execute(
            select(AuditEntry.seq, AuditEntry.leaf_hash, AuditEntry.chain_hash)
            .where(AuditEntry.chain_id == chain_id, AuditEntry.seq > start).order_by(AuditEntry.seq)
        ).all()
        if not rows:
            return last
        if last is None:
            head_at_prev = chain.GENESIS
        else:
            head_at_prev = session.scalar(select(AuditEntry.chain_hash).where(
                AuditEntry.chain_id == chain_id, AuditEntry.seq == last.size))
        # Refuses (raises) unless the new state extends the last signed one.
        frontier = chain.extend_checkpoint(
            prev_checkpoint=chain.parse_checkpoint(last.note) if last else None,
            prev_frontier=chain.MerkleFrontier.from_json(last.frontier) if last else None,
            chain_head_at_prev_size=head_at_prev,
            new_leaves=[r.leaf_hash for r in rows],
            new_chain_hashes=[r.chain_hash for r in rows],
            new_size=rows[-1].seq,
        )
        size, head = rows[-1].seq, rows[-1].chain_hash
        note = self.signer.sign_checkpoint(self.checkpoint_origin(chain_id), size, frontier.root(), head,
                                           ts=format_ts(utcnow()))
        checkpoint = AuditCheckpoint(chain_id=chain_id, size=size, note=note, frontier=frontier.to_json())
        session.add(checkpoint)
        session.flush()
        return checkpoint

    def checkpoint_touched(self, sessions) -> int:
        """Sign a checkpoint of every chain this process appended to since the last call (the
        time-based cadence; the count-based one runs inside `append`)."""
        touched, self._touched = self._touched, set()
        for chain_id in sorted(touched):
            with sessions.begin() as session:
                self.checkpoint(session, chain_id)
        return len(touched)

    # -- export and verify ------------------------------------------------------------------------

    def export(self, sessions, chain_id: str, *, from_seq: int = 1, to_seq: int | None = None) -> Iterator[str]:
        """JSONL lines: manifest, entries (exact bytes), the checkpoints they cover. Streams in
        bounded memory. A fresh checkpoint is signed first, so every export ends covered."""
        with sessions.begin() as session:
            latest = self.checkpoint(session, chain_id)
        size = latest.size if latest else 0
        with sessions() as session:
            if to_seq is not None and to_seq < size:
                # End on a checkpoint so the whole range is covered by a signature.
                to_seq = session.scalar(select(func.max(AuditCheckpoint.size)).where(
                    AuditCheckpoint.chain_id == chain_id, AuditCheckpoint.size <= to_seq)) or 0
            to_seq = size if to_seq is None else min(to_seq, size)
            with session.begin():
                session.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"))
                prev = chain.GENESIS
                if from_seq > 1:
                    prev = session.scalar(select(AuditEntry.chain_hash).where(
                        AuditEntry.chain_id == chain_id, AuditEntry.seq == from_seq - 1)) or chain.GENESIS
                manifest = {
                    "kind": "manifest", "format": chain.EXPORT_FORMAT, "origin": self.checkpoint_origin(chain_id),
                    "chain_id": chain_id, "from_seq": from_seq, "to_seq": to_seq, "prev_chain_hash": prev.hex(),
                    "exported_at": format_ts(utcnow()), "vkey": self.vkey,
                }
                entries = session.execute(
                    select(AuditEntry.seq, AuditEntry.entry, AuditEntry.leaf_hash, AuditEntry.chain_hash)
                    .where(AuditEntry.chain_id == chain_id, AuditEntry.seq >= from_seq, AuditEntry.seq <= to_seq)
                    .order_by(AuditEntry.seq).execution_options(yield_per=2000)
                )
                notes = session.scalars(
                    select(AuditCheckpoint.note).where(
                        AuditCheckpoint.chain_id == chain_id, AuditCheckpoint.size >= from_seq,
                        AuditCheckpoint.size <= to_seq).order_by(AuditCheckpoint.size)
                ).all() if to_seq >= from_seq else []
                yield from chain.export_lines(manifest, ((r.seq, r.entry, r.leaf_hash, r.chain_hash) for r in entries),
                                              notes)

    def verify_database(self, sessions, chain_id: str, held_checkpoints: Sequence[str] = ()) -> chain.VerifyReport:
        """Check the stored chain: bytes, links, query columns against hashed bytes, checkpoints.

        `held_checkpoints` are signed notes kept outside the database (an auditor's copy): checked
        like stored ones, so rows deleted together with their checkpoint rows show as `truncated`."""
        with sessions() as session:
            with session.begin():
                session.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"))
                notes = session.scalars(select(AuditCheckpoint.note).where(
                    AuditCheckpoint.chain_id == chain_id).order_by(AuditCheckpoint.size)).all()
                if held_checkpoints:
                    notes = sorted([*notes, *held_checkpoints], key=_note_size)
                rows = session.execute(
                    select(AuditEntry).where(AuditEntry.chain_id == chain_id).order_by(AuditEntry.seq)
                    .execution_options(yield_per=2000)
                ).scalars()
                return chain.verify_rows(
                    ((r.seq, r.entry, r.leaf_hash, r.chain_hash, _columns(r)) for r in rows),
                    chain_id=chain_id, origin=self.checkpoint_origin(chain_id), checkpoints=notes,
                    vkeys=[self.vkey],
                )


def _note_size(note: str) -> int:
    try:
        return chain.parse_checkpoint(note).size
    except chain.CheckpointError:
        return 0  # first in line, so the verifier reports it


def _columns(row: AuditEntry) -> dict[str, Any]:
    """A row's query columns, named as the verifier reads them from the hashed bytes."""
    actor_kind, _, actor_id = row.actor.partition(":")
    return {"seq": row.seq, "chain_id": row.chain_id, "event_type": row.event_type, "ts": row.ts,
            "actor_kind": actor_kind, "actor_id": actor_id, "subject_type": row.subject_type,
            "subject_id": row.subject_id,
            # tenant_id is not in the entry, but the chain it names is.
            "chain": chain_for(row.tenant_id)}


def actor_label(actor: dict[str, Any]) -> str:
    return f"{actor.get('kind', '?')}:{actor.get('id', '?')}"


def _held(session: Session) -> dict[str, Any]:
    """Per-transaction facts: chain locks taken and chain heads written in this transaction.

    Keyed by the innermost transaction object itself (kept referenced, so identity is exact): a
    new transaction, or a savepoint that may roll back, starts with nothing cached.
    """
    tx = session.get_nested_transaction() or session.get_transaction()
    state = session.info.get("memwarden.held")
    if state is None or state["tx"] is not tx:
        state = session.info["memwarden.held"] = {"tx": tx, "locks": set(), "heads": {}}
    return state


def _lock_chain(session: Session, chain_id: str) -> None:
    """Take the chain's transaction-scoped advisory lock (once per transaction)."""
    held = _held(session)
    if chain_id not in held["locks"]:
        session.execute(select(func.pg_advisory_xact_lock(func.hashtext("memwarden.audit:" + chain_id))))
        held["locks"].add(chain_id)


def latest_checkpoint(session: Session, chain_id: str) -> AuditCheckpoint | None:
    return session.scalars(select(AuditCheckpoint).where(AuditCheckpoint.chain_id == chain_id)
                           .order_by(AuditCheckpoint.size.desc()).limit(1)).first()


def list_checkpoints(ctx, chain_id: str) -> list[dict[str, Any]]:
    """Every signed checkpoint of a chain, oldest first."""
    with ctx.db.sessions() as session:
        rows = session.scalars(select(AuditCheckpoint).where(AuditCheckpoint.chain_id == chain_id)
                               .order_by(AuditCheckpoint.size)).all()
        return [{"size": r.size, "note": r.note, "created_at": format_ts(r.created_at)} for r in rows]
