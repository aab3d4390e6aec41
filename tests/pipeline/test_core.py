"""The pipeline's handling of what stops a program, on the main thread and in a worker."""

from __future__ import annotations

import threading

import pytest

from otel_diary import ORCHESTRATOR, Diary
from otel_diary.pipeline.core import Pipeline
from otel_diary.record import ChildSummary, SpanRecord

RECORD = SpanRecord(0xAB, 0xCD, "task", 1_785_000_000_000_000_000, 1_785_000_001_000_000_000,
                    attributes={"orchestrator.task.id": "T-stop"})


class InterruptedSink:
    def write(self, diary: Diary) -> str:
        raise KeyboardInterrupt

    def close(self) -> None:
        pass


def test_ctrl_c_in_a_sink_on_the_main_thread_still_stops_the_program() -> None:
    """On the main thread (replay), a KeyboardInterrupt from a sink is not swallowed."""
    pipeline = Pipeline(ORCHESTRATOR, [InterruptedSink()])
    with pytest.raises(KeyboardInterrupt):
        pipeline.handle((RECORD, ChildSummary()))


def test_ctrl_c_in_a_sink_in_a_worker_is_counted_not_fatal() -> None:
    """In a worker thread the same sink counts as a failed write and the call returns."""
    pipeline = Pipeline(ORCHESTRATOR, [InterruptedSink()])
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(
        pipeline.handle((RECORD, ChildSummary()))))
    worker.start()
    worker.join(30)
    assert len(done) == 1 and isinstance(done[0], Diary)
    assert pipeline.stats.sink_errors == 1
