"""The embedded store: the diary folder, its SQLite index beside it and the lesson files.

A thin face over :class:`~otel_diary.index.store.DiaryIndex` and
:class:`~otel_diary.index.lessons.LessonBook` with the :class:`~otel_diary.index.base.DiaryStore`
methods. In the pipeline the folder sink writes the files and the index listener indexes
them; :meth:`FolderStore.add_diary` does both (imports, tests).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from otel_diary.errors import FolderUnwritable
from otel_diary.index.documents import MAX_DOCUMENT_BYTES, Entry, path_choices
from otel_diary.index.lessons import Lesson, LessonBook, Sighting
from otel_diary.index.query import Hit, SearchResult
from otel_diary.index.store import DiaryIndex
from otel_diary.pipeline import KB_FOLDER
from otel_diary.pipeline.core import MAX_RELATED
from otel_diary.sinks.base import atomic_write
from otel_diary.sinks.folder import owner_of
from otel_diary.text import read_text


class FolderStore:
    """The knowledge base under ``root``; safe to share between threads.

    Usage::

        store = FolderStore(root)
        store.search("TS2345").hits
    """

    def __init__(self, root: str | os.PathLike[str], *, index: DiaryIndex | None = None,
                 book: LessonBook | None = None) -> None:
        self.root = Path(root)
        self.where = str(self.root)
        self.index = index if index is not None else DiaryIndex(self.root)
        self.book = book if book is not None else LessonBook(self.root)
        self._folder = (self.root / KB_FOLDER).resolve()

    def add_diary(self, entry: Entry, content: str) -> str:
        """Write the diary's file (unless it holds ``content`` already) and index it; the
        path it was kept under (another run's diary keeps its own, see ``path_choices``)."""
        for path in path_choices(entry.path, entry.id, entry.span_id):
            if owner_of(self.root / path) in (None, entry.id):
                break
        file = (self.root / path).resolve()
        if not file.is_relative_to(self._folder / "agents"):
            raise ValueError(f"diary path {entry.path!r} leaves the diary folder")
        if self.document(path) != content:
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(file, content.encode("utf-8"))
            except OSError as exc:
                raise FolderUnwritable.of(self.root, exc) from exc
        self.index.add(replace(entry, path=path))
        return path

    def search(self, query: str = "", *, agent: str | None = None,
               outcome: str | None = None, task: str | None = None,
               since: str | None = None, limit: int = 10, raw: bool = False) -> SearchResult:
        return self.index.search(query, agent=agent, outcome=outcome, task=task, since=since,
                                 limit=limit, raw=raw)

    def by_id(self, ident: str) -> Hit | None:
        return self.index.by_id(ident)

    def by_trace(self, trace_id: str) -> list[Hit]:
        return self.index.by_trace(trace_id)

    def count(self) -> int:
        return self.index.count()

    def related(self, *, exclude: str, task: str | None, trigger: str | None,
                signatures: Sequence[str], before: str, limit: int = MAX_RELATED) -> list[str]:
        return self.index.related(exclude=exclude, task=task, trigger=trigger,
                                  signatures=signatures, before=before, limit=limit)

    def document(self, path: str) -> str | None:
        file = (self.root / path).resolve()
        if not file.is_relative_to(self._folder):
            return None
        try:
            return read_text(file, "replace", within=self._folder,
                             max_bytes=MAX_DOCUMENT_BYTES)
        except OSError:
            return None

    def lesson(self, signature: str) -> Lesson:
        return self.book.read(signature)

    def add_lesson(self, signature: str, seen: Sighting,
                   operations: Sequence[tuple[str, str, str]] = ()) -> Lesson:
        return self.book.add(signature, seen, operations)

    def lists_others(self, signature: str, ident: str) -> bool:
        return self.book.lists_others(signature, ident)

    def lessons(self) -> list[Lesson]:
        return self.book.all()

    def close(self) -> None:
        self.index.close()

    def __enter__(self) -> FolderStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

