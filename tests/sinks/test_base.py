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
