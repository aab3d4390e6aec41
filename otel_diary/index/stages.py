"""The index's pipeline stages: a listener indexing each diary the folder sink wrote, the
Related finder over any store, and the one putting a run's lesson first."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from otel_diary.counters import Counters, LogOnce
from otel_diary.errors import IndexUnavailable
from otel_diary.index.base import DiaryStore
from otel_diary.index.documents import entry_from_diary, primary_signature, run_signatures
from otel_diary.index.lessons import LessonBook, lesson_id
from otel_diary.index.store import DiaryIndex
from otel_diary.pipeline.classify import TaskRun
from otel_diary.pipeline.core import MAX_RELATED
from otel_diary.pipeline.render import Diary, diary_id
from otel_diary.sinks.folder import (
    FolderSink,
    log_unwritable,
    relative_location,
    unwritable,
)
from otel_diary.text import one_line, utc_stamp


def _failed(stats: Counters | None, log_once: LogOnce, root: Path | None, kind: str,
            message: str, *args: object) -> None:
    """Inside an ``except`` block: count an index error and log it once, or, when the
    index failed because nothing can be written under ``root``, as one line (once per
    folder, with the sink's)."""
    if stats is not None:
        stats.add("index_errors")
    failure = sys.exc_info()[1]
    if isinstance(failure, IndexUnavailable):
        folder = unwritable(root) if root is not None else None
        if folder is not None:
            log_unwritable(folder)
        else:  # a store away or an index that cannot be opened: the reason says it all
            log_once(kind, message + ": %s", *args, failure, trace=False)
        return
    log_once(kind, message, *args)


class IndexListener:
    """A pipeline listener: indexes each diary the folder sink wrote. Never raises."""

    def __init__(self, index: DiaryIndex, folder: FolderSink,
                 stats: Counters | None = None) -> None:
        self.index = index
        self._root = str(folder.root.resolve())
        self._stats = stats
        self._log_once = LogOnce()

    def __call__(self, diary: Diary, run: TaskRun, locations: Sequence[str]) -> None:
        try:
            for location in locations:
                relative = relative_location(self._root, location)
                if relative is not None:
                    self.index.add(entry_from_diary(relative, diary, run))
                    return
        except Exception:
            _failed(self._stats, self._log_once, self.index.root, "index",
                    "otel-diary could not index diary %s; `otel-diary reindex` adds it",
                    diary.id)

    def hold(self) -> None:
        self.index.hold()

    def release(self) -> None:
        try:
            self.index.release()
        except Exception:
            _failed(self._stats, self._log_once, self.index.root, "index",
                    "otel-diary could not index a batch of diaries; `otel-diary reindex` "
                    "adds them")

    def close(self) -> None:
        self.index.close()


class IndexRelatedFinder:
    """A pipeline related-finder: earlier diaries sharing a run's task, trigger or error."""

    def __init__(self, index: DiaryIndex | DiaryStore, stats: Counters | None = None,
                 limit: int = MAX_RELATED) -> None:
        self.index = index
        self.limit = limit
        self._stats = stats
        self._log_once = LogOnce()
        self._cut = False

    def cut_short(self) -> None:
        """No more lookups; one waiting on a store for a connection ends now."""
        self._cut = True
        interrupt = getattr(self.index, "interrupt", None)
        if interrupt is not None:
            interrupt()

    def __call__(self, run: TaskRun) -> list[str]:
        if self._cut:
            return []
        try:
            return self.index.related(
                exclude=diary_id(run.trace_id, run.span_id),
                task=one_line(run.task_id, 200) or run.span_id_hex,
                trigger=one_line(run.trigger, 200) if run.trigger else None,
                signatures=run_signatures(run),
                before=utc_stamp(run.end_ns)[0],
                limit=self.limit,
            )
        except Exception:
            _failed(self._stats, self._log_once, getattr(self.index, "root", None), "related",
                    "otel-diary could not look up related diaries for %s",
                    diary_id(run.trace_id, run.span_id))
            return []


class LessonFirstFinder:
    """A pipeline related-finder: the run's lesson (when there is one yet), then what
    ``finder`` finds."""

    def __init__(self, book: LessonBook | DiaryStore,
                 finder: Callable[[TaskRun], Sequence[str]]) -> None:
        self.book = book
        self.finder = finder
        self._log_once = LogOnce()
        self._cut = False

    def cut_short(self) -> None:
        """No more lookups (see :meth:`IndexRelatedFinder.cut_short`)."""
        self._cut = True
        cut = getattr(self.finder, "cut_short", None)
        if cut is not None:
            cut()

    def __call__(self, run: TaskRun) -> list[str]:
        found = list(self.finder(run))
        if self._cut:
            return found
        try:
            signature = primary_signature(run_signatures(run))
            ident = diary_id(run.trace_id, run.span_id)
            if signature is not None and self.book.lists_others(signature, ident):
                return [lesson_id(signature), *found]  # earlier runs' lesson, not this one's
        except Exception:
            _failed(None, self._log_once, None, "related",
                    "otel-diary could not look up the lesson of a run")
        return found
