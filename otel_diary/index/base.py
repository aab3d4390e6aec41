"""The store contract: what the pipeline's index and lessons, and every reader, need from a
knowledge base, whatever holds it.

Two stores implement it: :class:`~otel_diary.index.folder.FolderStore` (the diary folder
with its SQLite index and lesson files, the embedded default) and
:class:`~otel_diary.index.postgres.PostgresStore` (one PostgreSQL database shared by many
replicas).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from otel_diary.index.documents import Entry
from otel_diary.index.lessons import Lesson, Sighting
from otel_diary.index.query import Hit, SearchResult
from otel_diary.pipeline.core import MAX_RELATED


@runtime_checkable
class DiaryStore(Protocol):
    """Diaries and lessons: written by the pipeline, read by ``search``, ``show``, ``lessons``,
    ``context`` and the MCP server. Methods raise :class:`~otel_diary.errors.IndexUnavailable`
    when the store cannot be reached or read."""

    where: str
    """Where the store is, for messages (never with a password)."""

    def add_diary(self, entry: Entry, content: str) -> str:
        """Keep the diary ``content`` (its index ``entry`` made from it); the same id twice
        is one diary, the newer text kept. Returns the path it is kept under: ``entry.path``,
        unless another run's diary holds that (then the first free of
        :func:`~otel_diary.index.documents.path_choices`)."""

    def search(self, query: str = "", *, agent: str | None = None,
               outcome: str | None = None, task: str | None = None,
               since: str | None = None, limit: int = 10,
               raw: bool = False) -> SearchResult: ...

    def by_id(self, ident: str) -> Hit | None: ...

    def by_trace(self, trace_id: str) -> list[Hit]: ...

    def count(self) -> int: ...

    def related(self, *, exclude: str, task: str | None, trigger: str | None,
                signatures: Sequence[str], before: str,
                limit: int = MAX_RELATED) -> list[str]: ...

    def document(self, path: str) -> str | None:
        """The text of the diary or lesson at ``path`` (relative, ``diaries/…``)."""

    def lesson(self, signature: str) -> Lesson:
        """The lesson for ``signature`` (a new, empty one when there is none)."""

    def add_lesson(self, signature: str, seen: Sighting,
                   operations: Sequence[tuple[str, str, str]] = ()) -> Lesson:
        """Count ``seen`` into its lesson, one writer at a time; the lesson as kept."""

    def lists_others(self, signature: str, ident: str) -> bool:
        """True when the lesson for ``signature`` counts a run other than diary ``ident``."""

    def lessons(self) -> list[Lesson]:
        """Every lesson, the most recently met first."""

    def close(self) -> None: ...
