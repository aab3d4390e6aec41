"""The pipeline: what stops a program, on the main thread and in a worker; batches."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from otel_diary import ORCHESTRATOR, Diary
from otel_diary.assembly.summary import ChildSummary
from otel_diary.index.store import INDEX_FILE, DiaryIndex
from otel_diary.pipeline import core
from otel_diary.pipeline.core import Pipeline
from otel_diary.record import SpanRecord
from otel_diary.testing import InMemorySink
from tests.support.kb import PY_STDERR, TS_STDERR, kb_pipeline, task_record

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


def mixed_records() -> list[SpanRecord]:
    """Runs sharing tasks (Related by task, a second file on one day) and errors (Related
    by signature, lessons), one delivered twice."""
    records = []
    for n in range(1, 31):
        stderr = (TS_STDERR.replace("(42,17)", f"({n},3)") if n % 3 == 0 else
                  PY_STDERR if n % 5 == 0 else None)
        extra = {"orchestrator.escalation_count": n % 3, "orchestrator.repair_no_files": n % 7 == 0}
        records.append(task_record(n, f"T-{n % 4}", stderr=stderr, trigger=f"issue-{n % 2}",
                                   extra=extra))
    return [*records, records[9]]


def knowledge_base(root: Path) -> dict[str, object]:
    """Every file's bytes (the index aside) and what the index holds."""
    files: dict[str, object] = {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*.md"))}
    with sqlite3.connect(root / INDEX_FILE) as conn:
        files["index rows"] = conn.execute(
            "SELECT id, path, title, agent, task, outcome, task_trigger, created "
            "FROM diaries ORDER BY id").fetchall()
        files["signatures"] = conn.execute(
            "SELECT s.signature, s.created, d.id FROM signatures AS s "
            "JOIN diaries AS d USING (doc) ORDER BY 1, 2, 3").fetchall()
    index = DiaryIndex(root)
    files["search"] = [hit.id for hit in index.search("TS2345 OR ValueError").hits]
    index.close()
    return files


def test_a_batch_writes_what_one_diary_at_a_time_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Diaries handled in a batch (written out every 7 here, so batches also end full)
    give the same files, lessons and index, byte for byte, as one at a time: Related and
    the lesson-first lookup see the diaries the batch holds."""
    monkeypatch.setattr(core, "MAX_BATCH", 7)
    alone, batched = tmp_path / "alone", tmp_path / "batched"
    pipeline = kb_pipeline(alone)
    for record in mixed_records():
        pipeline.handle((record, ChildSummary()))
    pipeline.close()
    pipeline = kb_pipeline(batched)
    with pipeline.batch():
        for record in mixed_records():
            pipeline.handle((record, ChildSummary()))
    pipeline.close()
    expected = knowledge_base(alone)
    assert any(path.startswith("diaries/lessons/") for path in expected)
    related = [text for path, text in expected.items() if path.startswith("diaries/agents/")
               and b"\n## Related\n- " in text]  # type: ignore[operator]
    assert len(related) > 20
    assert knowledge_base(batched) == expected


def test_a_batch_is_seen_by_other_readers_once_it_ends(tmp_path: Path) -> None:
    """Until a batch ends, another connection to the index sees none of its diaries; the
    files are there at once."""
    pipeline = kb_pipeline(tmp_path)
    records = mixed_records()[:5]
    pipeline.handle((records[0], ChildSummary()))
    reader = DiaryIndex(tmp_path)
    with pipeline.batch():
        for record in records[1:]:
            pipeline.handle((record, ChildSummary()))
        assert len(list((tmp_path / "diaries" / "agents").rglob("*.md"))) == 5
        assert reader.count() == 1
    assert reader.count() == 5
    reader.close()
    pipeline.close()


def test_the_caller_of_a_batch_hears_once_its_diaries_are_indexed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``on_release`` comes when a batch is written (full, then at the end): by then
    another reader of the index sees every diary handled so far. (A batch is also written
    after MAX_BATCH_S; a busy machine must not reach it here.)"""
    monkeypatch.setattr(core, "MAX_BATCH", 3)
    monkeypatch.setattr(core, "MAX_BATCH_S", 3600.0)
    pipeline = kb_pipeline(tmp_path)
    pipeline.handle((mixed_records()[0], ChildSummary()))
    reader = DiaryIndex(tmp_path)
    seen: list[int] = []
    with pipeline.batch(on_release=lambda: seen.append(reader.count())):
        for record in mixed_records()[1:8]:
            pipeline.handle((record, ChildSummary()))
    assert seen == [4, 7, 8]
    reader.close()
    pipeline.close()


class DeliveringSink:
    """A sink that delivers on at close, as the hub and store sinks do: it takes what is
    left of the shutdown and uses a tenth of a second of it."""

    def __init__(self) -> None:
        self.given: list[float] = []

    def write(self, diary: Diary) -> str:
        return "delivering"

    def close(self) -> None:
        self.close_within(10.0)

    def close_within(self, timeout_s: float) -> None:
        self.given.append(timeout_s)
        time.sleep(0.1)


class PlainSink:
    def __init__(self) -> None:
        self.closed = False

    def write(self, diary: Diary) -> str:
        return "plain"

    def close(self) -> None:
        self.closed = True


def test_sinks_share_what_is_left_of_the_shutdown() -> None:
    """With a timeout, each delivering sink is given what the ones before it left of it,
    not a timeout of its own; other sinks are closed as they are; without one, each
    sink takes its own."""
    first, second, plain = DeliveringSink(), DeliveringSink(), PlainSink()
    Pipeline(ORCHESTRATOR, [first, plain, second]).close(0.5)
    assert first.given[0] <= 0.5
    assert second.given[0] <= first.given[0] - 0.1
    assert plain.closed
    alone = DeliveringSink()
    Pipeline(ORCHESTRATOR, [alone]).close()
    assert alone.given == [10.0]


def test_once_cut_short_runs_are_written_without_related_lookups() -> None:
    """Near the end of a shutdown, a run is written at once: no Related lookup (a store
    that does not answer held the last runs past the budget)."""
    asked: list[str] = []

    def finder(run: object) -> list[str]:
        asked.append("lookup")
        return []

    sink = InMemorySink()
    pipeline = Pipeline(ORCHESTRATOR, [sink], related_finder=finder)
    pipeline.handle((task_record(1, "T-1", stderr=TS_STDERR), ChildSummary()))
    pipeline.cut_short()
    pipeline.handle((task_record(2, "T-2", stderr=TS_STDERR), ChildSummary()))
    assert asked == ["lookup"]
    assert len(sink.diaries) == 2
