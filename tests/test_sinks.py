"""FolderSink: atomic, idempotent per span, never overwriting another run, never escaping."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from otel_diary import FolderSink, StubReflector, render
from otel_diary._sinks import UnsafePathError

from .test_render import COMPLETED


def write(root: Path, **changes: object) -> Path:
    run = replace(COMPLETED, **changes)  # type: ignore[arg-type]
    return Path(FolderSink(root).write(render(run, StubReflector().reflect(run))))


def test_same_span_same_file(tmp_path: Path) -> None:
    """Delivering the same task span twice leaves one file."""
    first = write(tmp_path)
    second = write(tmp_path)
    assert first == second
    assert len(list(tmp_path.rglob("*.md"))) == 1
    assert not list(tmp_path.rglob("*.tmp"))


def test_other_run_of_same_task_does_not_overwrite(tmp_path: Path) -> None:
    """Another run of the same task on the same day gets its own file; both survive."""
    first = write(tmp_path)
    second = write(tmp_path, span_id=0x1111)
    third = write(tmp_path, span_id=0x2222)
    again = write(tmp_path, span_id=0x1111)
    assert len({first, second, third}) == 3 and again == second
    assert len(list(tmp_path.rglob("*.md"))) == 3
    assert "id: " + render(COMPLETED, "x").id in first.read_text()


def test_symlinked_agent_folder_cannot_escape(tmp_path: Path) -> None:
    """A symlink planted as an agent folder pointing outside the root is refused."""
    outside = tmp_path / "outside"
    outside.mkdir()
    agents = tmp_path / "kb" / "diaries" / "agents"
    agents.mkdir(parents=True)
    (agents / "coder").symlink_to(outside)
    with pytest.raises(UnsafePathError):
        write(tmp_path / "kb")
    assert not any(outside.iterdir())
