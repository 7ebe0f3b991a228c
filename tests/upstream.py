"""Peers' own published files (test suites, schemas) from their source distributions on PyPI.

Fetched with pip (the ordinary client) into a cache shared across runs, so a suite runs the
peer's files exactly as published, for the version installed here or any pinned one. Offline
without a cached copy, the caller's module is skipped; under CI (`CI` set) that is a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memwarden" / "upstream-tests"


def sdist(distribution: str, version: str) -> Path:
    """The sdist of `distribution` `version` from PyPI, cached."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{distribution.replace('-', '_')}-{version}.tar.gz"
    if not path.exists():
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                               "--dest", str(CACHE), f"{distribution}=={version}"], capture_output=True, text=True)
        if done.returncode != 0 or not path.exists():
            message = f"could not download the {distribution} {version} sdist: {done.stderr.strip()[-500:]}"
            if os.environ.get("CI"):
                pytest.fail(message, pytrace=False)
            pytest.skip(message, allow_module_level=True)
    return path


def sdist_files(distribution: str, version: str, prefix: str) -> dict[str, str]:
    """Every text file under `prefix` (a path inside the project, e.g. `tests/conformance/`) of the
    sdist, by that path."""
    top = f"{distribution.replace('-', '_')}-{version}/"
    with tarfile.open(sdist(distribution, version)) as archive:
        return {member.name[len(top):]: archive.extractfile(member).read().decode(errors="replace")
                for member in archive.getmembers()
                if member.isfile() and member.name.startswith(top + prefix)}
