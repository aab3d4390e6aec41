"""The read side over a shared store (PostgreSQL): the same answers as over a folder.

:class:`StoreKnowledgeBase` is a :class:`~otel_diary.readers.knowledge.KnowledgeBase`
whose diaries, lessons and documents come from a
:class:`~otel_diary.index.postgres.PostgresStore` instead of files; paths in its answers
are the documents' paths in the store (``diaries/…``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from otel_diary.index.postgres import PostgresStore
from otel_diary.index.query import Hit
from otel_diary.readers.knowledge import (
    Document,
    Found,
    KnowledgeBase,
    ReadError,
    document,
    ranked_lessons,
)
from otel_diary.readers.lessons import KnownLesson
from otel_diary.text import one_line

_T = TypeVar("_T")


class StoreLessons:
    """The lessons of a store, with the face the knowledge base reads lessons through."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    @staticmethod
    def _lesson(row: tuple[str, ...]) -> tuple[KnownLesson, str]:
        ident, path, title, signature, last_seen, worked, snippet = row
        lesson = KnownLesson(id=ident, path=path, title=title, signatures=[signature],
                             created=last_seen, worked=one_line(worked, 300))
        return lesson, " ".join(snippet.split())

    def by_id(self, ident: str) -> KnownLesson | None:
        rows = self._store.lesson_rows(ident=ident)
        return self._lesson(rows[0])[0] if rows else None

    def by_signature(self, signatures: Sequence[str]) -> list[tuple[KnownLesson, list[str]]]:
        if not signatures:
            return []
        order = {signature: n for n, signature in enumerate(signatures)}
        found = [self._lesson(row)[0] for row in
                 self._store.lesson_rows(signatures=signatures, limit=len(signatures))]
        found.sort(key=lambda lesson: order[lesson.signatures[0]])
        return [(lesson, list(lesson.signatures)) for lesson in found]

    def search(self, terms: Sequence[str], limit: int) -> list[tuple[KnownLesson, str]]:
        if not terms:
            return []
        return [self._lesson(row) for row in self._store.lesson_rows(terms=terms, limit=limit)]

    def gathering(self, diaries: Sequence[str], limit: int) -> list[tuple[KnownLesson, str]]:
        if not diaries:
            return []
        return [self._lesson(row) for row in
                self._store.lesson_rows(gathering=diaries, limit=limit)]

    def close(self) -> None:
        pass


def search_store_lessons(store: PostgresStore, terms: Sequence[str], limit: int = 10,
                         diaries: Sequence[str] = ()) -> list[Found]:
    """The lessons of ``store`` with every one of ``terms``, then those gathering
    ``diaries`` (ids), best first (see :func:`ranked_lessons`)."""
    return ranked_lessons(StoreLessons(store), terms, diaries, limit)


class StoreKnowledgeBase(KnowledgeBase):
    """Read-only answers over a shared store; safe to share between threads.

    Usage::

        with StoreKnowledgeBase(PostgresStore(url)) as kb:
            kb.lessons("error TS2345: ...").results
    """

    def __init__(self, store: PostgresStore) -> None:  # no folder: nothing of super's
        self.root = Path()
        self.where = store.where
        self.store = store
        self._lessons = StoreLessons(store)
        self._lock = threading.Lock()

    def close(self) -> None:
        self.store.close()

    def _query(self, action: Callable[[PostgresStore], _T]) -> _T:  # type: ignore[override]
        return action(self.store)

    def _content(self, path: str) -> str:
        content = self.store.document(path)
        if content is None:
            raise ReadError(f"no document at {path!r} in the store")
        return content

    def _read(self, path: str) -> Document:
        path = path.removeprefix("./")
        return document(path, path, self._content(path))

    def _shared(self, hits: Sequence[Hit], signatures: Sequence[str]) -> dict[str, list[str]]:
        return self.store.shared_signatures([hit.id for hit in hits], signatures)

    @staticmethod
    def _by_ids(index: PostgresStore, idents: Sequence[str]) -> list[Hit]:  # type: ignore[override]
        return index.by_ids(idents)  # in one query

