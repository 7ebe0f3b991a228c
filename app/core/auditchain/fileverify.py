"""`verify_export_file`: an export file verified by worker processes that each read their own
byte ranges of it and run the per-line checks, while this process links the results in order.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import stat
import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import BinaryIO

from .formats import ExportManifest
from .note import VerifierKey
from .report import VerifyReport
from .verify import Chunks, Records, inspect_lines, verify_export, verify_export_chunks

_RANGE_BYTES = 1 << 20  # bytes per chunk of a file
_MIN_RANGES_FOR_WORKERS = 4  # below, starting worker processes costs about what they would save


def _inspect_range(fd: int, start: int, end: int, origin: str, chain_id: str) -> tuple[Records, int]:
    """`inspect_lines` over bytes start..end of an open file; returns (records, lines read).

    Reads with `os.pread`, so forked workers share the parent's descriptor without moving its offset.
    """
    lines = os.pread(fd, end - start, start).split(b"\n")
    if not lines[-1]:  # the range ends with a newline (only the file's last line may lack one)
        lines.pop()
    return inspect_lines(lines, origin, chain_id), len(lines)


def _line_ranges(fh: BinaryIO, start: int, end: int) -> list[tuple[int, int]]:
    """Split bytes start..end of a file into ranges of about `_RANGE_BYTES`, each ending after a newline."""
    bounds = [start]
    while end - bounds[-1] > _RANGE_BYTES:
        fh.seek(bounds[-1] + _RANGE_BYTES - 1)
        fh.readline()  # to the end of the line holding the cut (just the cut if it follows a newline)
        bounds.append(min(fh.tell(), end))
    if bounds[-1] < end:
        bounds.append(end)
    return list(itertools.pairwise(bounds))


def _can_fork() -> bool:
    # Forking a multi-threaded process (e.g. a web server) can deadlock the child.
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def _file_chunks(fh: BinaryIO, start: int, end: int, origin: str, chain_id: str,
                 workers: int) -> Chunks:
    """`_inspect_range` over the file's ranges, in order; in worker processes for a larger file.

    At most 2 ranges per worker are in flight, so memory stays bounded however large the file.
    """
    ranges = _line_ranges(fh, start, end)
    fd = fh.fileno()
    if workers < 2 or len(ranges) < _MIN_RANGES_FOR_WORKERS or not _can_fork():
        for lo, hi in ranges:
            yield _inspect_range(fd, lo, hi, origin, chain_id)
        return
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))
    window: deque[Future[tuple[Records, int]]] = deque()
    try:
        for lo, hi in ranges:
            window.append(pool.submit(_inspect_range, fd, lo, hi, origin, chain_id))
            if len(window) >= 2 * workers:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _default_workers() -> int:
    return 2 if (os.cpu_count() or 1) >= 2 else 0


def verify_export_file(path: str | os.PathLike[str], vkeys: Sequence[str | VerifierKey] | None = None,
                       trusted_checkpoints: Sequence[str] = (), *, workers: int | None = None) -> VerifyReport:
    """`verify_export` of an export file (JSON lines, each ending with a newline), the same report.

    `workers` (default: 2 on a multi-core machine) processes each read their own byte ranges of
    the file and run the per-line checks, so this process only links the entries in order and
    checks the checkpoints. A file that cannot be split (a pipe) is read as a stream. Raises
    `OSError` if the file cannot be read.
    """
    with open(path, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            return verify_export(fh, vkeys, trusted_checkpoints)

        def chunks(m: ExportManifest) -> Chunks:
            return _file_chunks(fh, fh.tell(), info.st_size, m.origin, m.chain_id,
                                _default_workers() if workers is None else workers)

        return verify_export_chunks(iter(fh.readline, b""), chunks, vkeys, trusted_checkpoints)
