"""The folder sink, the embedded default: one markdown file per diary under
``<root>/diaries/agents/``, written atomically, idempotent per task span.
"""

from __future__ import annotations

import os
from pathlib import Path

from otel_diary.errors import DiaryError, UnsafePathError
from otel_diary.pipeline.render import DIARY_ROOT, Diary
from otel_diary.sinks.base import atomic_write


class FolderSink:
    """Writes diaries as files under ``<root>/diaries/agents/<agent>/``.

    The same task span always lands in the same file (a redelivery rewrites it); another
    run of the same task on the same day goes to ``alternate_path`` instead of
    overwriting the first run's diary.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._base = (self.root / DIARY_ROOT).resolve()

    def target(self, diary: Diary) -> Path:
        """The file this diary is (or will be) written to."""
        for relative in (diary.path, diary.alternate_path):
            path = self._inside(relative)
            owner = _owner(path)
            if owner is None or owner == diary.id:
                return path
        return self._inside(diary.alternate_path.removesuffix(".md") + f"-{diary.id}.md")

    def write(self, diary: Diary) -> str:
        data = diary.content.encode("utf-8")
        for _ in range(3):
            path = self.target(diary)
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                # A new file is linked in only if the name is still free, so two processes
                # finishing runs of one task at once cannot overwrite each other.
                atomic_write(path, data, replace=_owner(path) == diary.id)
                return str(path)
            except FileExistsError:
                continue  # another writer took the name first: look again
        raise DiaryError(f"could not find a free file name for diary {diary.id}")

    def close(self) -> None:
        pass

    def _inside(self, relative: str) -> Path:
        path = (self.root / relative).resolve()
        if not path.is_relative_to(self._base) or path == self._base:
            raise UnsafePathError(f"diary path {relative!r} leaves {self._base}")
        return path


def _owner(path: Path) -> str | None:
    """The diary id stored in ``path``'s front matter, ``None`` when there is no file."""
    try:
        with path.open("rb") as handle:
            head = handle.read(256).decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    for line in head.splitlines()[1:4]:
        if line.startswith("id: "):
            return line[4:].strip()
    return ""
