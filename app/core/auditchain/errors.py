"""Errors of the audit log core: a stable `reason` code, a human `detail`, and the evidence."""

from __future__ import annotations

from typing import Any


class AuditChainError(ValueError):
    """Base error: a stable `reason` code, human `detail`, and evidence (`seq`, `expected`, `found`)."""

    def __init__(self, reason: str, detail: str, *, seq: int | None = None, expected: Any = None,
                 found: Any = None):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.seq = seq
        self.expected = expected
        self.found = found


class EntryError(AuditChainError):
    """An entry cannot be built or parsed (`not_canonical`, `entry_invalid`)."""


class CheckpointError(AuditChainError):
    """`checkpoint_malformed`, `checkpoint_unknown_key` or `checkpoint_bad_signature`."""


class ChainError(AuditChainError):
    """Verification found evidence of tampering; `seq` is the first bad sequence number."""


class NotAnExtension(AuditChainError):
    """The state to be signed does not extend the last signed checkpoint (`not_an_extension`)."""

    def __init__(self, detail: str, **evidence: Any):
        super().__init__("not_an_extension", detail, **evidence)


class ExportFormatError(AuditChainError):
    """An export line is not in the export format (`malformed`); `line` is its 1-based number."""

    def __init__(self, detail: str, *, line: int | None = None):
        super().__init__("malformed", f"line {line}: {detail}" if line else detail)
        self.message = detail
        self.line = line


class KeyFormatError(ValueError):
    """A key name, verifier key or private key is not usable."""
