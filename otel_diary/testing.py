"""Helpers for testing code that uses otel-diary: an in-memory sink.

Usage::

    sink = InMemorySink()
    provider.add_span_processor(DiarySpanProcessor(enabled=True, sinks=[sink]))
    ...
    provider.force_flush()
    assert sink.diaries[0].outcome == "completed"
"""

from __future__ import annotations

import threading

from otel_diary.pipeline.render import Diary

__all__ = ["InMemorySink"]


class InMemorySink:
    """Keeps every diary written to it, in order. Thread-safe."""

    def __init__(self) -> None:
        self._diaries: list[Diary] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    @property
    def diaries(self) -> list[Diary]:
        """A copy of the diaries received so far."""
        with self._lock:
            return list(self._diaries)

    def write(self, diary: Diary) -> str:
        with self._changed:
            self._diaries.append(diary)
            self._changed.notify_all()
        return f"memory:{diary.path}"

    def wait_for(self, count: int, timeout: float = 5.0) -> list[Diary]:
        """Wait until at least ``count`` diaries arrived (or ``timeout`` passed)."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._diaries) >= count, timeout)
            return list(self._diaries)

    def clear(self) -> None:
        with self._lock:
            self._diaries.clear()

    def close(self) -> None:
        pass
