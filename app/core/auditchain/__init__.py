"""Tamper-evident audit log core: entries, hash chain, Merkle tree, signed checkpoints, verifier.

Pure (no database, no web framework) so the offline verifier CLI can import it alone.

Recipe (RFC 6962/9162 hashing, C2SP signed-note and tlog-checkpoint):

* An entry is an RFC 8785 canonical JSON object, canonicalised once and stored as exact bytes:
  ``{"v":1,"origin","chain","seq","ts","type","actor","subject","data"}``.
* ``leaf_hash(e) = SHA-256(0x00 || e)``; ``node_hash(l, r) = SHA-256(0x01 || l || r)``.
* ``chain_hash(prev, leaf) = SHA-256("memwarden/v1/chain" || 0x00 || prev || leaf)``, with
  ``GENESIS`` (32 zero bytes) as the ``prev`` of seq 1. Sequence numbers start at 1, gapless.
* The Merkle root of the first n leaves is the RFC 6962 Merkle Tree Hash (tree size n = seq n).
* A checkpoint is a C2SP signed note whose body is ``origin``, size, base64 root, then
  ``chain-head <base64>`` and an optional ``ts <RFC 3339>`` line, signed with Ed25519.

``origin`` names one chain's log (e.g. ``memwarden.local/tenant:42``): it is the ``origin`` of
every entry, the first line of every checkpoint and the ``origin`` of an export manifest.

The modules, each importing only those above it:

* `errors` - the error classes; `entry` - the entry format; `merkle` - the hashes and the tree;
* `note` - keys, signed notes, checkpoints; `proofs` - the signer's guard, consistency proofs;
* `formats` - witness records and the export format (described there);
* `verifier` - `ChainVerifier`; `report` - a verification run and its `VerifyReport`;
* `verify` - `verify_export`, `verify_rows`; `fileverify` - `verify_export_file` and its workers.

This package re-exports the names callers use (``from app.core import auditchain as chain``).
"""

from .entry import ENTRY_VERSION, build_entry, parse_entry
from .errors import (
    AuditChainError,
    ChainError,
    CheckpointError,
    EntryError,
    ExportFormatError,
    KeyFormatError,
    NotAnExtension,
)
from .fileverify import verify_export_file
from .formats import (
    EXPORT_FORMAT,
    WITNESS_FORMAT,
    ExportCheckpoint,
    ExportEntry,
    ExportManifest,
    WitnessRecord,
    export_lines,
    parse_witness_line,
    read_export,
    read_witness,
    witness_line,
)
from .merkle import EMPTY_ROOT, GENESIS, MerkleFrontier, chain_hash, leaf_hash, merkle_root, node_hash
from .note import (
    Checkpoint,
    NoteSignature,
    Signer,
    VerifierKey,
    generate_private_key_pem,
    load_private_key_pem,
    parse_checkpoint,
    parse_vkey,
    verify_checkpoint,
)
from .proofs import consistency_proof, extend_checkpoint, prove_extension, verify_consistency
from .report import VerifyReport
from .verifier import ChainVerifier
from .verify import verify_export, verify_rows

__all__ = [
    "EMPTY_ROOT",
    "ENTRY_VERSION",
    "EXPORT_FORMAT",
    "GENESIS",
    "AuditChainError",
    "ChainError",
    "ChainVerifier",
    "Checkpoint",
    "CheckpointError",
    "EntryError",
    "ExportCheckpoint",
    "ExportEntry",
    "ExportFormatError",
    "ExportManifest",
    "KeyFormatError",
    "MerkleFrontier",
    "NotAnExtension",
    "NoteSignature",
    "Signer",
    "VerifierKey",
    "VerifyReport",
    "WITNESS_FORMAT",
    "WitnessRecord",
    "build_entry",
    "chain_hash",
    "consistency_proof",
    "export_lines",
    "extend_checkpoint",
    "generate_private_key_pem",
    "leaf_hash",
    "load_private_key_pem",
    "merkle_root",
    "node_hash",
    "parse_checkpoint",
    "parse_entry",
    "parse_vkey",
    "parse_witness_line",
    "prove_extension",
    "read_export",
    "read_witness",
    "verify_checkpoint",
    "verify_export",
    "verify_export_file",
    "verify_consistency",
    "verify_rows",
    "witness_line",
]
