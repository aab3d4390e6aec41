"""Writing to the index: held transactions, entries rolled back alone, writers in turn."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from otel_diary.index.documents import Entry, entry_from_document
from otel_diary.index.store import DiaryIndex
from otel_diary.index.writing import Writer
from tests.support.kb import kb_pipeline, task_record, write


def batch_entries(tmp_path: Path, count: int) -> list[Entry]:
    """Index entries of ``count`` diaries written by the real pipeline (not indexed)."""
    pipeline = kb_pipeline(tmp_path / "source", index=False)
    diaries = [write(pipeline, task_record(n, f"T-{n}")) for n in range(count)]
    pipeline.close()
    return [entry_from_document(diary.path, diary.content) for diary in diaries]


def test_an_entry_that_cannot_be_indexed_leaves_the_rest_of_its_batch(tmp_path: Path) -> None:
    """Held entries share a transaction; one that fails half-way is rolled back alone."""
    first, bad, last = batch_entries(tmp_path, 3)
    index = DiaryIndex(tmp_path)
    index.hold()
    index.add(first)
    with pytest.raises(UnicodeEncodeError):
        index.add(replace(bad, signatures=("code:\ud800",)))  # fails after its row
    index.add(last)
    index.release()
    other = DiaryIndex(tmp_path)
    assert {hit.id for hit in other.search("", limit=10).hits} == {first.id, last.id}
    other.close()
    index.close()


def test_a_writer_waiting_in_this_process_gets_in_between_held_entries(
        tmp_path: Path) -> None:
    """A thread holding its entries commits as soon as another thread waits to write, so
    that one is not kept out while the holder goes on writing."""
    entries = batch_entries(tmp_path, 40)
    index = DiaryIndex(tmp_path, busy_timeout_s=2.0)
    index.add(entries[0])  # the database exists before the threads start
    stop = threading.Event()
    errors: list[BaseException] = []

    def holder() -> None:
        index.hold()
        try:
            while not stop.is_set():
                for entry in entries[:20]:
                    index.add(entry)
        except BaseException as exc:
            errors.append(exc)
        finally:
            index.release()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        for entry in entries[20:]:
            index.add(entry)  # IndexUnavailable ("database is locked") if kept out
    finally:
        stop.set()
        thread.join(30)
    assert not errors
    assert index.count() == 40
    index.close()


def test_entries_that_cannot_be_written_again_are_counted_lost(tmp_path: Path) -> None:
    """When an entry fails, the ones before it in the held transaction are written again;
    if that fails too they are all rolled back and counted, and the writer's turn is free
    for the next entry."""
    conn = sqlite3.connect(tmp_path / "w.sqlite3", isolation_level=None,
                           check_same_thread=False)
    conn.execute("CREATE TABLE t (n INTEGER)")
    writer = Writer(busy_timeout_s=1.0)
    runs: list[int] = []

    def once_only(conn: sqlite3.Connection) -> None:
        runs.append(1)
        if len(runs) > 1:
            raise sqlite3.OperationalError("cannot be written again")
        conn.execute("INSERT INTO t VALUES (2)")

    def failing(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t VALUES (3)")
        raise sqlite3.IntegrityError("half-way")

    writer.hold()
    writer.write(conn, lambda conn: conn.execute("INSERT INTO t VALUES (1)"))
    writer.write(conn, once_only)
    with pytest.raises(sqlite3.IntegrityError):
        writer.write(conn, failing)
    writer.write(conn, lambda conn: conn.execute("INSERT INTO t VALUES (4)"))
    assert writer.release() == 2
    assert conn.execute("SELECT n FROM t").fetchall() == [(4,)]
    writer.write(conn, lambda conn: conn.execute("INSERT INTO t VALUES (5)"))  # turn is free
    assert conn.execute("SELECT n FROM t ORDER BY n").fetchall() == [(4,), (5,)]
    conn.close()
