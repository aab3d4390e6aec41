"""Sinks: where a rendered :class:`~otel_diary.Diary` goes, the only stage that does
outside I/O. :class:`Sink` is the whole contract; ``folder`` and ``hub`` implement it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from otel_diary.pipeline.render import Diary


@runtime_checkable
class Sink(Protocol):
    """Receives each diary once it is rendered. ``write`` returns where it landed."""

    def write(self, diary: Diary) -> str: ...

    def close(self) -> None: ...


_temporary_names = itertools.count()


def atomic_write(path: str | os.PathLike[str], data: bytes, *, durable: bool = False,
                 replace: bool = True, mode: int = 0o666) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, whole.

    ``durable`` also syncs the data to disk before the rename and the folder after it
    (survives a power cut, at about a millisecond per file); diaries can be regenerated,
    so they skip it. With ``replace`` false an existing ``path`` is left alone and
    ``FileExistsError`` raised. The file's ``mode`` is less the umask, like any file the
    process creates (diaries and lessons are shared).
    """
    fd, tmp = _temporary(path, mode)
    try:
        try:  # written whole through the descriptor: no file object to set up
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
            os.unlink(tmp)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        _sync_folder(os.path.dirname(path))


def _temporary(path: str | os.PathLike[str], mode: int) -> tuple[int, str]:
    """A new file beside ``path`` for its next content, open for writing. A name left by
    a process that ended mid-write (a restarted one may have its id) is passed over."""
    folder, name = os.path.split(os.fspath(path))
    for _ in range(100):
        tmp = os.path.join(folder, f".{name}.{os.getpid()}.{next(_temporary_names)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def _sync_folder(folder: str) -> None:
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
