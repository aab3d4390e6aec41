"""The folder sink, the embedded default: one markdown file per diary under
``<root>/diaries/agents/``, written atomically, idempotent per task span.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from otel_diary.errors import DiaryError, FolderUnwritable, UnsafePathError
from otel_diary.pipeline import DIARY_ROOT, KB_FOLDER
from otel_diary.sinks.base import atomic_write
from otel_diary.text import open_to_read

if TYPE_CHECKING:
    from otel_diary.pipeline.render import Diary

logger = logging.getLogger("otel_diary")


def unwritable(root: Path) -> FolderUnwritable | None:
    """Why nothing can be written under ``root`` (creating it if need be), else ``None``."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return FolderUnwritable.of(root, exc)
    if not os.access(root, os.W_OK | os.X_OK):
        return FolderUnwritable(root, os.strerror(errno.EACCES))
    return None


_MAX_FOLDERS = 1024
"""Resolved agent folders a sink remembers."""

_reported: set[Path] = set()
_reported_lock = threading.Lock()


def log_unwritable(error: FolderUnwritable) -> None:
    """Log ``error`` as one line, once per folder: its reason says all, a traceback would not.
    (Every diary after it meets the same error; each is still counted where it fails.)"""
    with _reported_lock:
        first = error.root not in _reported
        _reported.add(error.root)
    if first:
        logger.error("%s (no diary can be written there until that is fixed)", error)
    else:
        logger.debug("%s", error)


class FolderSink:
    """Writes diaries as files under ``<root>/diaries/agents/<agent>/``.

    The same task span always lands in the same file (a redelivery rewrites it); another
    run of the same task on the same day goes to ``alternate_path`` instead of
    overwriting the first run's diary.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._resolved_root = self.root.resolve()
        self._base = (self.root / DIARY_ROOT).resolve()
        self._leads_out = not self._base.is_relative_to((self.root / KB_FOLDER).resolve())
        """``diaries/agents`` is a link out of ``diaries``: what readers would not read."""
        self._folders: dict[str, str] = {}
        """Agent folders (relative) already resolved and found inside ``_base``."""

    def target(self, diary: Diary) -> Path:
        """The file this diary is (or will be) written to."""
        return Path(self._claim(diary)[0])

    def _claim(self, diary: Diary) -> tuple[str, str | None]:
        """The file for this diary, and the id of the diary in it now (``None``: no file)."""
        if self._leads_out:
            raise UnsafePathError(f"{self.root / DIARY_ROOT} leads out of the knowledge base")
        checked: set[str] = set()
        for relative in (diary.path, diary.alternate_path):
            path, owner = self._look(relative, checked)
            if owner is None or owner == diary.id:
                return path, owner
        return self._look(diary.alternate_path.removesuffix(".md") + f"-{diary.id}.md",
                          checked)

    def write(self, diary: Diary) -> str:
        data = diary.content.encode("utf-8")
        for _ in range(3):
            path, owner = self._claim(diary)
            try:
                # A new file is linked in only if the name is still free, so two processes
                # finishing runs of one task at once cannot overwrite each other.
                try:
                    atomic_write(path, data, replace=owner == diary.id)
                except FileNotFoundError:  # the agent's folder is new (or was removed)
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    atomic_write(path, data, replace=owner == diary.id)
                return path
            except FileExistsError:
                if not os.path.isdir(os.path.dirname(path)):
                    raise FolderUnwritable(
                        self.root, f"{os.path.dirname(path)} is not a folder") from None
                continue  # another writer took the name first: look again
            except OSError as exc:
                raise FolderUnwritable.of(self.root, exc) from exc
        raise DiaryError(f"could not find a free file name for diary {diary.id}")

    def close(self) -> None:
        pass

    def _look(self, relative: str, checked: set[str]) -> tuple[str, str | None]:
        """``relative`` resolved (as a string), refused when it leaves the diary folder,
        and the id of the diary in it (``None``: no file). An agent folder is resolved
        once; after that a file name in it needs only a look at the folder (once per
        claim: ``checked``) and the file, neither of which may have become a symbolic
        link, instead of one system call per component of the path."""
        folder, _, name = relative.rpartition("/")
        known = self._folders.get(folder)
        if known is not None and name not in ("", ".", "..") and (
                folder in checked or not os.path.islink(known)):
            checked.add(folder)
            path = known + os.sep + name  # name holds no "/": what Path(known) / name gives
            try:
                return path, owner_of(path, follow=False)
            except OSError:
                pass  # a symbolic link: resolved below
        resolved_path = (self.root / relative).resolve()
        if not resolved_path.is_relative_to(self._base) or resolved_path == self._base:
            raise UnsafePathError(f"diary path {relative!r} leaves {self._base}")
        if known is None and folder:
            resolved = (self.root / folder).resolve()
            if (resolved.is_relative_to(self._base) and resolved != self._base
                    and resolved == self._resolved_root / folder and resolved.is_dir()):
                if len(self._folders) >= _MAX_FOLDERS:
                    self._folders.clear()
                self._folders[folder] = str(resolved)
        return str(resolved_path), owner_of(resolved_path)


def relative_location(root: str, location: str) -> str | None:
    """``location``, a path the folder sink returned, relative to ``root`` (the resolved
    folder, as a string) in POSIX form; ``None`` when it is not inside ``root``. The sink
    returns resolved paths, so comparing strings is enough."""
    prefix = root.rstrip(os.sep) + os.sep
    if not location.startswith(prefix) or len(location) == len(prefix):
        return None
    relative = location[len(prefix):]
    return relative if os.sep == "/" else relative.replace(os.sep, "/")


def owner_of(path: str | os.PathLike[str], *, follow: bool = True) -> str | None:
    """The diary id stored in ``path``'s front matter, ``None`` when there is no file, ``""``
    when it holds something else. With ``follow`` false, a symbolic link at ``path`` raises
    ``OSError``, as anything else it cannot open does (systems differ in the error a link
    gives), for the caller to resolve the path and look again. Opening never waits (a FIFO
    planted where a diary goes reads as empty: taken)."""
    try:
        fd = open_to_read(path, follow=follow)
    except FileNotFoundError:
        return None
    except OSError:
        if not follow:
            raise
        return ""
    try:
        head = os.read(fd, 256).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
    for line in head.splitlines()[1:4]:
        if line.startswith("id: "):
            return line[4:].strip()
    return ""
