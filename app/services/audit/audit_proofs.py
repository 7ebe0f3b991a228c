"""Proving that the stored chain extends each signed state known, before a checkpoint is signed:
the last checkpoint in the database and the last witnessed one (`app.services.audit.audit`'s
`AuditLog.checkpoint`). Reads the stored links and leaves; the hashing and proofs are pure
(`app.core.auditchain`).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.core import auditchain as chain
from app.db.models import AuditCheckpoint
from app.repos.audit import audit_reads


def _state(cp: chain.Checkpoint) -> tuple[int, bytes, bytes]:
    return cp.size, cp.root, cp.chain_head


def prove_extensions(session: Session, chain_id: str, last: AuditCheckpoint | None,
                     witnessed: chain.Checkpoint | None):
    """The stored chain's (size, head, frontier) and the consistency proofs {anchor size:
    proof} from each signed anchor (the last stored checkpoint, the last witnessed one) to
    it. Raises `AuditChainError` unless the stored chain extends every anchor."""
    last_cp = chain.parse_checkpoint(last.note) if last else None
    anchors = [a for a in (last_cp, witnessed) if a is not None]
    if len(anchors) == 2 and _state(last_cp) == _state(witnessed):
        anchors.pop()
    first = min((a.size for a in anchors), default=0) or 1  # the rows read: the oldest anchor's on
    rows = audit_reads.links_from(session, chain_id=chain_id, first=first)
    for i, r in enumerate(rows):
        if r.seq != first + i:
            raise chain.NotAnExtension(f"seq {first + i} is missing", seq=first + i, found=r.seq)
    size = rows[-1].seq if rows else audit_reads.length(session, chain_id=chain_id)
    head = bytes(rows[-1].chain_hash) if rows else chain.GENESIS
    frontier, proofs = None, {}
    for anchor in anchors or [None]:
        if anchor is None or anchor.size == 0:  # nothing signed yet: start at genesis and link
            old_frontier = None if anchor is None else chain.MerkleFrontier()
            old_head, new_rows = chain.GENESIS, rows
        else:
            if anchor.size > size:
                raise chain.ChainError("truncated", f"the chain ends at seq {size} but a signed checkpoint "
                                       f"covers {anchor.size}", seq=size + 1, expected=anchor.size, found=size)
            old_frontier = (chain.MerkleFrontier.from_json(last.frontier) if anchor is last_cp
                            else frontier_at(session, chain_id, anchor))
            old_head, new_rows = bytes(rows[anchor.size - first].chain_hash), rows[anchor.size - first + 1:]
        frontier, proof = chain.prove_extension(anchor, old_frontier, old_head,
                                                [bytes(r.leaf_hash) for r in new_rows],
                                                [bytes(r.chain_hash) for r in new_rows], size)
        if anchor is not None:
            proofs[anchor.size] = proof
    return size, head, frontier, proofs


def frontier_at(session: Session, chain_id: str, anchor: chain.Checkpoint) -> chain.MerkleFrontier:
    """The Merkle frontier at a checkpoint's size: the stored one if that checkpoint is in the
    database, else recomputed from the stored leaves (checked against the signed root after)."""
    stored = audit_reads.checkpoint_frontier(session, chain_id=chain_id, size=anchor.size)
    if stored is not None:
        frontier = chain.MerkleFrontier.from_json(stored)
        if frontier.root() == anchor.root:
            return frontier
    frontier = chain.MerkleFrontier()
    frontier.extend(bytes(h) for h in audit_reads.leaf_hashes_through(session, chain_id=chain_id,
                                                                      size=anchor.size))
    return frontier
