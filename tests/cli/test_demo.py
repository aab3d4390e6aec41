"""`otel-diary demo` runs three tasks and writes the two successful ones' diaries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_demo_writes_two_diaries(tmp_path: Path) -> None:
    """The demo prints both paths and the recovered diary; the failed task writes nothing."""
    done = subprocess.run([sys.executable, "-m", "otel_diary.cli", "demo", "--dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    files = sorted(p.name for p in tmp_path.rglob("*.md"))
    assert [f[-8:] for f in files] == ["T-101.md", "T-102.md"]
    assert "outcome: recovered" in done.stdout and "error TS2345" in done.stdout
    assert done.stdout.count("wrote ") == 2
