"""Atomic writes: whole files, a temporary name a crashed writer left passed over."""

from __future__ import annotations

import os
from pathlib import Path

from otel_diary.sinks import base
from otel_diary.sinks.base import atomic_write


def test_a_temporary_name_left_by_an_ended_writer_is_passed_over(tmp_path: Path) -> None:
    """A process that ended mid-write left its temporary files; a later one with the same
    process id (a restarted container's) writes beside them and leaves them alone."""
    path = tmp_path / "lesson.md"
    upcoming = next(base._temporary_names) + 1
    left = [tmp_path / f".lesson.md.{os.getpid()}.{upcoming + n}.tmp" for n in range(3)]
    for stale in left:
        stale.write_bytes(b"half a lesson")
    atomic_write(path, b"x" * 100_000, durable=True)
    assert path.read_bytes() == b"x" * 100_000
    assert sorted(tmp_path.glob(".*.tmp")) == left
    atomic_write(path, b"new")
    assert path.read_bytes() == b"new"


def test_files_take_the_mode_asked_for_less_the_umask(tmp_path: Path) -> None:
    """Diaries and lessons are shared (0666 less the umask); a spool file is private."""
    import stat

    mask = os.umask(0o022)
    try:
        atomic_write(tmp_path / "shared.md", b"x")
        atomic_write(tmp_path / "private.json", b"x", durable=True, mode=0o600)
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "shared.md").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "private.json").stat().st_mode) == 0o600
