"""Claude Code, the CLI itself, for tests that run it: its Linux x64 build from npm,
installed into the cache outside the checkout on first use."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.npm_cache import cached_binary

VERSION = "2.1.332"
PACKAGE = "@anthropic-ai/claude-code-linux-x64"


def claude_binary() -> Path:
    """Claude Code's binary, from the cache (see :func:`cached_binary`)."""
    return cached_binary("claude-code", PACKAGE, VERSION, "claude")


def offline(home: Path, model_url: str) -> dict[str, str]:
    """The environment of a Claude Code run against a local model: its own home, no
    update checks nor other traffic of its own, and this machine's ``PATH``."""
    return {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": model_url,
            "ANTHROPIC_API_KEY": "test-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1"}
