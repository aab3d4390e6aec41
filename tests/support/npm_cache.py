"""Executables shipped as npm packages (Claude Code's Linux x64 build, Node.js itself),
installed into the cache outside the checkout on first use, for the tests that run them."""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest


def cached_binary(name: str, package: str, version: str, binary: str) -> Path:
    """``binary`` (a path inside the package) of npm package ``package`` at ``version``,
    installed with npm into ``$OTEL_DIARY_CACHE/<name>/<version>``
    (``~/.cache/otel-diary`` by default) on first use, by one process at a time (the
    test workers share the cache), a cache entry appearing once complete; skipped off
    Linux x64 and without npm."""
    npm = shutil.which("npm")
    if platform.system() != "Linux" or platform.machine() != "x86_64" or npm is None:
        pytest.skip(f"{package}, a Linux x64 build, and npm are needed")
    cache = Path(os.environ.get("OTEL_DIARY_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "otel-diary")
    root = cache / name / version
    found = root / "node_modules" / package / binary
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{version}.lock", "w") as lock:  # one install at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not found.is_file():
            staging = root.with_name(f"{version}.partial-{os.getpid()}")
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
            done = subprocess.run([npm, "install", "--prefix", str(staging), "--no-audit",
                                   "--no-fund", "--no-save", f"{package}@{version}"],
                                  capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, done.stdout + done.stderr
            shutil.rmtree(root, ignore_errors=True)  # an entry without its binary
            staging.rename(root)
    return found
