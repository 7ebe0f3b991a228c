"""Checkpoints leave the database: each signed checkpoint is appended to a witness outside it.

A witness is an append-only JSON-lines file (`MEMWARDEN_AUDIT_WITNESS_FILE`, one
`auditchain.witness_line` record per checkpoint, kept on storage the database owner cannot
rewrite) and/or a URL (`MEMWARDEN_AUDIT_WITNESS_URL`) that receives each record as a POST.
The signer reads the file back so that it never signs a state that does not extend the last
witnessed one, and `memwarden audit verify --witness FILE` checks a chain against it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import queue
import threading
import time
from pathlib import Path

import httpx

from app.config import Settings
from app.core import auditchain as chain
from app.observability import metrics
from app.services.runtime.outbound import OutboundRule, failure_reason, outbound_client, status_reason

log = logging.getLogger(__name__)

POST_ATTEMPTS = 5
POST_BACKOFF_SECONDS = 0.5
POST_TIMEOUT_SECONDS = 10


class Witness:
    """Appends witness records and remembers the last witnessed checkpoint of each origin."""

    def __init__(self, file: Path | None = None, url: str | None = None, *, rule: OutboundRule | None = None):
        self.file = Path(file) if file else None
        self.url = url or None
        self.rule = rule or OutboundRule(False, "MEMWARDEN_WEBHOOK_ALLOW_PRIVATE")  # as deployed by default
        # origin -> (largest record seen, whether its signature has been checked)
        self._latest: dict[str, tuple[chain.WitnessRecord, bool]] = {}
        self._offset = 0
        self._lock = threading.Lock()
        self._outbox: queue.Queue[str] | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Witness:
        file = settings.audit_witness_file
        if file is not None:
            file = Path(file).expanduser().resolve()
            if file.is_relative_to(settings.data_path):
                log.warning("MEMWARDEN_AUDIT_WITNESS_FILE %s is inside the data dir; a witness only helps on "
                            "storage the database owner cannot rewrite", file)
        return cls(file, settings.audit_witness_url, rule=OutboundRule.for_audit_witness(settings))

    @property
    def enabled(self) -> bool:
        return self.file is not None or self.url is not None

    # -- reading back ----------------------------------------------------------------------------

    def latest(self, origin: str, vkey: str) -> chain.WitnessRecord | None:
        """The record of the largest checkpoint of `origin` witnessed (in the file, or published by
        this process) and signed by `vkey`; None if there is none.

        Reads only what was appended to the file since the last call, a line at a time, and checks
        only the signature of the record it returns (a file of years of checkpoints costs one
        signature check, not one per line). What this process has seen is kept even if the file
        is later truncated (that is logged)."""
        with self._lock:
            if self.file is not None:
                self._read_new()
            rec, checked = self._latest.get(origin, (None, True))
            if checked:
                return rec
            try:
                chain.verify_checkpoint(rec.note, [vkey])
            except chain.AuditChainError as exc:
                log.warning("audit witness file %s: the record at byte %d is not signed by this log (%s); "
                            "re-reading the file for the last record of %s that is", self.file, rec.line,
                            exc.reason, origin)
                rec = self._last_signed(origin, vkey)
            if rec is None:
                self._latest.pop(origin, None)
            else:
                self._latest[origin] = (rec, True)
            return rec

    def _read_new(self) -> None:
        try:
            with self.file.open("rb") as fh:
                end = fh.seek(0, os.SEEK_END)
                if end < self._offset:
                    log.error("audit witness file %s shrank from %d to %d bytes; re-reading it",
                              self.file, self._offset, end)
                    self._offset = 0
                fh.seek(self._offset)
                for raw in fh:
                    if not raw.endswith(b"\n"):
                        break  # a line still being written is read next time
                    self._keep(self._parse(raw, self._offset), checked=False)
                    self._offset += len(raw)
        except FileNotFoundError:
            pass
        except OSError as exc:  # an operational fault, not evidence: keep what this process knows
            log.error("audit witness file %s: cannot read it (%s); checking against what this process has "
                      "seen of it", self.file, exc)

    def _parse(self, raw: bytes, offset: int) -> chain.WitnessRecord | None:
        try:
            return chain.parse_witness_line(raw, offset)  # `line` holds the byte offset
        except chain.AuditChainError as exc:
            log.warning("audit witness file %s: skipped a line that is not a witness record: %s", self.file, exc)
            return None

    def _last_signed(self, origin: str, vkey: str) -> chain.WitnessRecord | None:
        """Slow path after a forged record: the largest record of `origin` whose signature holds."""
        best = None
        try:
            fh = self.file.open("rb")
        except OSError:
            return None
        with fh:
            for raw in fh:
                rec = self._parse(raw, 0) if raw.endswith(b"\n") else None
                if rec is None or rec.checkpoint.origin != origin or (
                        best is not None and rec.checkpoint.size <= best.checkpoint.size):
                    continue
                try:
                    chain.verify_checkpoint(rec.note, [vkey])
                except chain.AuditChainError:
                    continue
                best = rec
        return best

    def _keep(self, rec: chain.WitnessRecord | None, *, checked: bool) -> None:
        if rec is None:
            return
        known = self._latest.get(rec.checkpoint.origin)
        if known is None or rec.checkpoint.size > known[0].checkpoint.size:
            self._latest[rec.checkpoint.origin] = (rec, checked)

    # -- appending -------------------------------------------------------------------------------

    def publish(self, line: str) -> None:
        """Append one record to the file (locked, fsynced) and queue it for the URL. Never raises:
        the checkpoint is already committed; a failure is logged and the next one is witnessed."""
        record = chain.parse_witness_line(line)
        if record is not None:
            with self._lock:  # what this process witnessed counts even before the file is re-read
                self._keep(record, checked=True)
        if self.file is not None:
            try:
                self.file.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    os.write(fd, line.encode("utf-8") + b"\n")
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                log.error("audit witness file %s: cannot append a checkpoint: %s", self.file, exc)
                metrics.WITNESS_FAILURES.labels("file").inc()
        if self.url is not None:
            self._post_later(line)

    def _post_later(self, line: str) -> None:
        with self._lock:
            if self._outbox is None:
                self._outbox = queue.Queue()
                threading.Thread(target=self._post_loop, name="audit-witness-post", daemon=True).start()
        self._outbox.put(line)

    def _post_loop(self) -> None:
        assert self._outbox is not None
        with self.client() as client:
            while True:
                line = self._outbox.get()
                self.post(client, line)

    def client(self) -> httpx.Client:
        """A client for `post`: the outbound rule applies at each request, redirects are not followed."""
        return outbound_client(self.rule, timeout=POST_TIMEOUT_SECONDS)

    def post(self, client: httpx.Client, line: str) -> bool:
        """POST one record (with a client from `client()`), retrying with back-off."""
        assert self.url is not None
        error = None
        for attempt in range(POST_ATTEMPTS):
            if attempt:
                time.sleep(POST_BACKOFF_SECONDS * 2 ** (attempt - 1))
            try:
                response = client.post(self.url, content=line.encode("utf-8"), headers={
                    "Content-Type": "application/json", "User-Agent": "Memwarden-Audit-Witness/1"})
                if 200 <= response.status_code < 300:
                    return True
                error = status_reason(response.status_code)
            except httpx.HTTPError as exc:
                error = f"{failure_reason(exc)} ({exc})"  # the operator's log: the detail may help
        log.error("audit witness URL: gave up on a checkpoint after %d attempts: %s", POST_ATTEMPTS, error)
        metrics.WITNESS_FAILURES.labels("url").inc()
        return False
