"""Claude Code, the CLI itself, for tests that run it: its Linux x64 build from npm,
installed into the cache outside the checkout on first use."""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

VERSION = "2.1.332"
PACKAGE = f"@anthropic-ai/claude-code-linux-x64@{VERSION}"


def claude_binary() -> Path:
    """Claude Code's binary, installed with npm into ``$OTEL_DIARY_CACHE/claude-code``
    (``~/.cache/otel-diary`` by default) on first use, by one process at a time (the
    test workers share the cache), a cache entry appearing once complete; skipped off
    Linux x64 and without npm."""
    npm = shutil.which("npm")
    if platform.system() != "Linux" or platform.machine() != "x86_64" or npm is None:
        pytest.skip("Claude Code's Linux x64 build and npm are needed")
    cache = Path(os.environ.get("OTEL_DIARY_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "otel-diary")
    root = cache / "claude-code" / VERSION
    binary = root / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{VERSION}.lock", "w") as lock:  # one install at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.is_file():
            staging = root.with_name(f"{VERSION}.partial-{os.getpid()}")
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
            done = subprocess.run([npm, "install", "--prefix", str(staging), "--no-audit",
                                   "--no-fund", "--no-save", PACKAGE],
                                  capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, done.stdout + done.stderr
            shutil.rmtree(root, ignore_errors=True)  # an entry without its binary
            staging.rename(root)
    return binary


def offline(home: Path, model_url: str) -> dict[str, str]:
    """The environment of a Claude Code run against a local model: its own home, no
    update checks nor other traffic of its own, and this machine's ``PATH``."""
    return {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": model_url,
            "ANTHROPIC_API_KEY": "test-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1"}
