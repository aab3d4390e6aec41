"""Sinks: where a rendered :class:`~otel_diary.Diary` goes, the only stage that does
outside I/O. :class:`Sink` is the whole contract; ``folder`` and ``hub`` implement it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from pathlib import Path
from typing import Protocol, runtime_checkable

from otel_diary.pipeline.render import Diary


@runtime_checkable
class Sink(Protocol):
    """Receives each diary once it is rendered. ``write`` returns where it landed."""

    def write(self, diary: Diary) -> str: ...

    def close(self) -> None: ...


_temporary_names = itertools.count()


def atomic_write(path: Path, data: bytes, *, durable: bool = False,
                 replace: bool = True) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, whole.

    ``durable`` also syncs the data to disk before the rename (survives a power cut, at
    about a millisecond per file); diaries can be regenerated, so they skip it. With
    ``replace`` false an existing ``path`` is left alone and ``FileExistsError`` raised.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{next(_temporary_names)}.tmp")
    # Mode 0666 less the umask, like any file the process creates: diaries are shared.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
            os.unlink(tmp)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
