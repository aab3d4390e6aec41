"""The write-ahead journal: what a collector held comes back after the process ended."""

from __future__ import annotations

import contextlib
import logging
import marshal
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_diary import ORCHESTRATOR, Diary, Settings
from otel_diary.assembly.batch import Batch
from otel_diary.assembly.grace import TraceStore
from otel_diary.assembly.journal import Journal, JournalError, decode, encode
from otel_diary.receiver.admission import Admission, Collector
from otel_diary.receiver.decode import PROTOBUF
from otel_diary.receiver.decode import decode as decode_request
from otel_diary.testing import InMemorySink
from otel_diary.wiring import build_pipeline
from tests.support.kb import Broken
from tests.support.otlp_build import new_span_id, new_trace_id, protobuf_body, span, task_trace


def batch_of(spans: Sequence[Span]) -> Batch:
    return decode_request(protobuf_body(spans), PROTOBUF, ORCHESTRATOR)


def collector(sink: InMemorySink, journal: Journal, *, grace: float,
              start: bool = True, retry_s: float = 1.0) -> Collector:
    pipeline = build_pipeline(Settings(index=False), ORCHESTRATOR, sinks=[sink])
    return Collector(TraceStore(ORCHESTRATOR, grace=grace, trace_timeout=60), pipeline,
                     journal=journal, start=start, retry_s=retry_s)


def journaled(service: Collector, spans: Sequence[Span]) -> None:
    """Offer ``spans`` and wait until they are durable, as a request answered 200 does."""
    _, durable = service.offer(batch_of(spans))
    assert durable is not None
    durable.result(10)


def replayed(path: Path, count: int, *, grace: float = 0.05) -> list[Diary]:
    """The first ``count`` diaries a new collector writes from the journal at ``path``
    (closed again after them)."""
    sink = InMemorySink()
    service = collector(sink, Journal(path), grace=grace)
    try:
        return sink.wait_for(count, timeout=10)
    finally:
        assert service.close(10)


def rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])


def test_a_part_reads_back_as_it_was_written() -> None:
    """Encoding then decoding a request's parts gives the same task records and
    contributions."""
    batch = batch_of(task_trace("T-rt", chats=3) + task_trace("T-rt2", chats=1))
    again = [decode(trace_id, body) for trace_id, body in encode(batch.parts, batch.links)]
    assert [part for part, _ in again] == batch.parts
    assert [(part.trace_id, run) for part, runs in again for run in runs] == batch.links


def test_offered_spans_are_durable_when_the_future_is_done(tmp_path: Path) -> None:
    """The future an accepted batch comes with is done once its rows are committed; once
    the diary is written the rows are compacted away."""
    path = tmp_path / "journal.sqlite3"
    sink = InMemorySink()
    service = collector(sink, Journal(path), grace=3600)
    try:
        admission, durable = service.offer(batch_of(task_trace("T-dur")))
        assert admission is Admission.ACCEPTED and durable is not None
        durable.result(10)
        assert rows(path) == 1
    finally:
        assert service.close(10)
    assert [d.task_id for d in sink.diaries] == ["T-dur"]
    assert rows(path) == 0


def test_a_new_collector_takes_back_what_the_last_one_held(tmp_path: Path) -> None:
    """Task spans still in their grace period when the journal was left (no shutdown)
    are replayed by the next collector and written."""
    path = tmp_path / "journal.sqlite3"
    first = collector(InMemorySink(), Journal(path), grace=3600)
    for n in range(3):
        journaled(first, task_trace(f"T-back-{n}", chats=2))
    assert first.journal is not None
    first.journal.close()  # as if the process had been killed: nothing decided
    diaries = replayed(path, 3)
    assert sorted(d.task_id for d in diaries) == ["T-back-0", "T-back-1", "T-back-2"]
    assert all("Tokens: 240" in d.body for d in diaries)
    assert rows(path) == 0


def test_links_kept_aside_are_journaled_with_the_trace_that_takes_them(
        tmp_path: Path) -> None:
    """A plain span between two task spans came first, alone (its link kept aside), then
    the tasks; the process was killed in their grace period: the next collector nests
    them as the first would have, one diary (the link was not journaled: two)."""
    path = tmp_path / "journal.sqlite3"
    trace_id = new_trace_id()
    outer = task_trace("OUTER", chats=1, trace_id=trace_id)
    call = span(trace_id, new_span_id(), outer[0].span_id, name="POST /agents/inner")
    inner = task_trace("INNER", chats=2, trace_id=trace_id, parent=call.span_id)
    first = collector(InMemorySink(), Journal(path), grace=3600)
    first.offer(batch_of([call]))  # nothing of it held: not journaled itself
    journaled(first, inner)
    journaled(first, outer)
    assert first.journal is not None
    first.journal.close()  # as if the process had been killed
    [diary] = replayed(path, 1)
    assert diary.task_id == "OUTER" and "Tokens: 360" in diary.body


def test_a_task_decided_before_the_end_is_written_at_once_on_replay(tmp_path: Path) -> None:
    """A task decided but not yet written when the process ended does not wait a second
    grace period after the restart."""
    path = tmp_path / "journal.sqlite3"
    first = collector(InMemorySink(), Journal(path), grace=0, start=False)
    first.journal.start()  # type: ignore[union-attr]
    journaled(first, task_trace("T-decided"))
    assert not first.flush(0.2)  # decided; no pipeline thread writes it
    first.journal.close()  # type: ignore[union-attr]
    assert [d.task_id for d in replayed(path, 1, grace=3600)] == ["T-decided"]


def test_past_its_bound_the_journal_refuses_batches(tmp_path: Path) -> None:
    """At the journal's byte bound a batch is refused as journal_full, not dropped."""
    service = collector(InMemorySink(), Journal(tmp_path / "j.sqlite3", max_bytes=1500),
                        grace=3600)
    try:
        answers = [service.offer(batch_of(task_trace(f"T-{n}")))[0] for n in range(5)]
    finally:
        service.close(10)
    assert answers[0] is Admission.ACCEPTED
    assert answers[-1] is Admission.JOURNAL_FULL


def test_one_journal_serves_one_process(tmp_path: Path) -> None:
    """A journal in use cannot be opened a second time."""
    journal = Journal(tmp_path / "journal.sqlite3")
    try:
        with pytest.raises(JournalError, match="in use"):
            Journal(tmp_path / "journal.sqlite3")
    finally:
        journal.close()
    Journal(tmp_path / "journal.sqlite3").close()  # free again


def test_the_journal_is_readable_by_its_owner_alone(tmp_path: Path) -> None:
    """The journal holds spans as they came, secrets and all: its database, write-ahead
    log and shared memory are the owner's alone, whatever the umask, also when an older
    journal's files were not; a journal file planted as a link is refused, not followed."""
    path = tmp_path / "journal.sqlite3"
    for suffix in ("", "-wal"):  # as an older version left them
        Path(f"{path}{suffix}").touch(mode=0o644)
    old = os.umask(0o002)
    try:
        service = collector(InMemorySink(), Journal(path), grace=3600)
        service.offer(batch_of(task_trace("T-private")))[1].result(10)  # type: ignore[union-attr]
        modes = {suffix: stat.S_IMODE(os.stat(f"{path}{suffix}").st_mode)
                 for suffix in ("", "-wal", "-shm")}
        assert service.close(10)
    finally:
        os.umask(old)
    assert modes == {"": 0o600, "-wal": 0o600, "-shm": 0o600}
    outside = tmp_path / "outside.sqlite3"
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "journal.sqlite3").symlink_to(outside)
    with pytest.raises(JournalError, match="cannot open"):
        Journal(tmp_path / "linked" / "journal.sqlite3")
    assert not outside.exists()


def test_a_lock_file_planted_as_a_link_is_refused(tmp_path: Path) -> None:
    """The journal's lock file is never opened through a link: nothing is created where a
    planted one leads."""
    outside = tmp_path / "outside" / "created-by-the-journal"
    outside.parent.mkdir()
    (tmp_path / "journal.sqlite3.lock").symlink_to(outside)
    with pytest.raises(JournalError, match="cannot open"):
        Journal(tmp_path / "journal.sqlite3")
    assert not outside.exists()


@pytest.mark.parametrize(("suffix", "planted"), [
    ("", "a link to a database"), ("", "a link to nothing"), ("-wal", "a file of its own")])
def test_a_journal_file_swapped_while_opening_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str, planted: str) -> None:
    """SQLite opens the journal's files by name after they were made private: when one was
    swapped in between (for a link, or for a file someone else can read), the journal
    refuses to start before SQLite writes to it, and creates nothing where a link leads."""
    path = tmp_path / "journal.sqlite3"
    swapped = Path(f"{path}{suffix}")
    victim = tmp_path / "elsewhere.sqlite3"
    if planted == "a link to a database":
        with sqlite3.connect(victim) as conn:
            conn.execute("CREATE TABLE mine (x)")
    elif planted == "a file of its own":
        victim.touch(mode=0o644)
    before = victim.read_bytes() if victim.exists() else None
    connect = sqlite3.connect

    def swap_then_connect(database: str, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if database.startswith("file:") and not swapped.is_symlink():
            swapped.rename(tmp_path / "moved-away")
            if planted == "a file of its own":
                victim.rename(swapped)  # the attacker's file, where the log goes
            else:
                swapped.symlink_to(victim)
        conn: sqlite3.Connection = connect(database, *args, **kwargs)
        return conn

    monkeypatch.setattr(sqlite3, "connect", swap_then_connect)
    with pytest.raises(JournalError, match="replaced while the journal was opened"
                       if planted != "a link to nothing" else "cannot open the journal"):
        Journal(path)
    monkeypatch.undo()
    if planted == "a file of its own":  # nothing was logged in it (SQLite may delete it)
        assert not swapped.exists() or swapped.read_bytes() == before
    else:
        assert (victim.read_bytes() if victim.exists() else None) == before
        assert not Path(f"{victim}-wal").exists()


@pytest.mark.parametrize("damage", ["emptied", "not a database", "malformed", "cut"])
def test_a_damaged_journal_is_set_aside_and_an_empty_one_started(
        tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    """A journal whose files cannot be a journal (its database emptied beside its log,
    overwritten or cut short) is moved aside whole, said so, and the receiver starts with
    an empty one, instead of refusing to start until someone intervenes."""
    path = tmp_path / "journal.sqlite3"
    first = collector(InMemorySink(), Journal(path), grace=3600)
    journaled(first, task_trace("T-damaged"))
    log = Path(f"{path}-wal").read_bytes()  # the rows, not yet checkpointed
    assert first.journal is not None and log
    first.journal.close()
    data = bytearray(path.read_bytes())
    if damage == "emptied":
        Path(f"{path}-wal").write_bytes(log)
        data = bytearray()
    elif damage == "not a database":
        data[:100] = b"\xff" * 100
    elif damage == "malformed":
        data[4096:8192] = b"\xff" * 4096
    else:
        data = data[:len(data) // 2]
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.ERROR, logger="otel_diary"):
        second = Journal(path)
    try:
        assert second.replay() == []
        assert second.stats.damaged == 1
    finally:
        second.close()
    [aside] = [p for p in tmp_path.iterdir() if p.name.endswith(tuple("0123456789Z"))
               and ".damaged-" in p.name]
    assert aside.read_bytes() == bytes(data)
    assert aside.stat().st_mode & 0o777 == 0o600
    if damage == "emptied":
        assert Path(f"{aside}-wal").read_bytes() == log
    assert any(str(aside) in record.getMessage() for record in caplog.records)


def test_damage_found_only_by_the_replay_sets_the_journal_aside(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A damaged page in the middle of a journal is not read when it is opened; the
    replay meets it, sets the journal aside as when it is opened and replays nothing, and
    the journal goes on empty (serve exited with a traceback, on every restart)."""
    path = tmp_path / "journal.sqlite3"
    Journal(path).close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        body = marshal.dumps(([], [], [], 0, [])) + bytes(200)
        conn.executemany("INSERT INTO entries VALUES (?, ?, 0, ?)",
                         [(n, os.urandom(16), body) for n in range(1, 2001)])
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = path.stat().st_size // 4096
    with open(path, "r+b") as file:
        file.seek(pages // 2 * 4096)
        file.write(b"\xff" * 64)
    with caplog.at_level(logging.ERROR, logger="otel_diary"):
        journal = Journal(path)
        try:
            assert journal.stats.damaged == 0  # opened: its last pages are whole
            assert journal.replay() == []
            assert journal.stats.damaged == 1 and journal.bytes == 0
            journal.start()
            journal.append(encode(batch_of(task_trace("T-after")).parts)).result(10)
            assert journal.rows() == 1
        finally:
            journal.close()
    assert len(list(tmp_path.glob("journal.sqlite3.damaged-*"))) == 1
    assert any("damaged" in record.getMessage() for record in caplog.records)


def test_two_journals_damaged_in_one_second_are_both_kept(tmp_path: Path) -> None:
    """Set aside twice within a second, neither damaged journal overwrites the other."""
    path = tmp_path / "journal.sqlite3"
    for content in (b"FIRST-SPANS", b"SECOND-SPANS"):
        path.write_bytes(content * 100)
        Journal(path).close()
    kept = sorted(p.read_bytes()[:12] for p in tmp_path.glob("journal.sqlite3.damaged-*")
                  if not p.name.endswith("-wal"))
    assert kept == [b"FIRST-SPANSF", b"SECOND-SPANS"]


def test_a_nested_task_stays_nested_after_a_restart(tmp_path: Path) -> None:
    """The parent link of a plain span between two task spans, sent in a request of its
    own, is journaled too: after the restart the inner task still belongs to the outer."""
    trace_id = new_trace_id()
    outer = task_trace("OUTER", chats=1, trace_id=trace_id)
    step = span(trace_id, new_span_id(), outer[0].span_id, name="plan")
    inner = task_trace("INNER", chats=2, trace_id=trace_id, parent=step.span_id)
    path = tmp_path / "journal.sqlite3"
    first = collector(InMemorySink(), Journal(path), grace=3600)
    for spans in (inner, [step], outer):
        journaled(first, spans)
    assert first.journal is not None
    first.journal.close()  # as if the process had been killed: nothing decided
    sink = InMemorySink()
    second = collector(sink, Journal(path), grace=0.05)
    try:
        sink.wait_for(1, timeout=10)
        assert second.flush(10)
    finally:
        assert second.close(10)
    assert [d.task_id for d in sink.diaries] == ["OUTER"]


class HeldUntilAsked:
    """A listener that holds what it is given until the test lets its batch end."""

    def __init__(self) -> None:
        self.given = 0
        self.holding = threading.Event()
        self.go = threading.Event()

    def __call__(self, diary: object, run: object, locations: object) -> None:
        self.given += 1

    def hold(self) -> None:
        pass

    def release(self) -> None:
        if self.given:
            self.holding.set()
            self.go.wait(30)


def test_journal_rows_stay_until_the_batch_of_their_diary_is_written(tmp_path: Path) -> None:
    """A diary's file is written at once, but its task keeps its journal rows (and counts
    as waiting) until the index and lesson updates of its batch are written: a crash
    before that replays it."""
    path = tmp_path / "journal.sqlite3"
    sink = InMemorySink()
    listener = HeldUntilAsked()
    pipeline = build_pipeline(Settings(index=False), ORCHESTRATOR, sinks=[sink],
                              listeners=[listener])
    service = Collector(TraceStore(ORCHESTRATOR, grace=0, trace_timeout=60), pipeline,
                        journal=Journal(path))
    try:
        journaled(service, task_trace("T-held"))
        assert listener.holding.wait(10)  # written, its batch ending
        assert [d.task_id for d in sink.diaries] == ["T-held"]
        assert not service.flush(0.2)
        assert rows(path) > 0
        listener.go.set()
        assert service.flush(10)
    finally:
        listener.go.set()
        assert service.close(10)
    assert rows(path) == 0


def test_a_diary_no_sink_could_write_keeps_its_rows_for_the_next_start(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A task answered 200 whose diary could not be written is not lost: it keeps waiting,
    and its journal rows, through shutdown (tried once more, and said), and the next start
    writes its diary."""
    path = tmp_path / "journal.sqlite3"
    sink = Broken()
    first = collector(sink, Journal(path), grace=0, retry_s=3600)
    try:
        journaled(first, task_trace("T-unwritten"))
        assert not first.flush(0.5)
        assert first.pending_diaries == 1
    finally:
        with caplog.at_level(logging.INFO, logger="otel_diary"):
            first.close(10)
    assert sink.tries == 2
    assert "stopped with work left (diaries no sink could write)" in caplog.text
    assert sink.diaries == []
    assert rows(path) > 0
    assert [d.task_id for d in replayed(path, 1)] == ["T-unwritten"]
    assert rows(path) == 0


def test_a_diary_no_sink_could_write_is_written_once_the_sink_works_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A running ``serve`` tries again, waiting longer after each failed round, and
    writes the diary (its journal rows then go) as soon as the sink works: a full disk
    made room for, a folder made writable again, needs no restart."""
    path = tmp_path / "journal.sqlite3"
    sink = Broken()
    service = collector(sink, Journal(path), grace=0, retry_s=0.05)
    caplog.set_level(logging.INFO, logger="otel_diary")  # a round may be under way below
    try:
        journaled(service, task_trace("T-late"))
        deadline = time.monotonic() + 30
        while sink.tries < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sink.tries >= 3
        assert service.pending_diaries == 1
        sink.broken = False
        assert service.flush(10)
        assert "tries again to write 1 diaries" in caplog.text
    finally:
        assert service.close(10)
    assert [d.task_id for d in sink.diaries] == ["T-late"]
    assert rows(path) == 0


def test_a_diary_written_has_those_waiting_tried_again_at_once(tmp_path: Path) -> None:
    """When a diary is written while others wait to be tried again, they are tried at
    once: the sink works again."""
    sink = Broken()
    service = collector(sink, Journal(tmp_path / "journal.sqlite3"), grace=0,
                        retry_s=3600)
    try:
        journaled(service, task_trace("T-first"))
        deadline = time.monotonic() + 30
        while sink.tries < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sink.tries == 1  # the next try is an hour away
        sink.broken = False
        journaled(service, task_trace("T-second"))
        written = sink.wait_for(2, timeout=30)
        assert sorted(d.task_id for d in written) == ["T-first", "T-second"]
    finally:
        assert service.close(10)


def test_no_raw_span_stays_on_disk_once_the_journal_is_empty(tmp_path: Path) -> None:
    """The journal holds spans before redaction: once their rows are deleted and none are
    left, neither the database's free pages nor its log still hold their bytes (a quiet
    receiver would otherwise keep them until its next checkpoint)."""
    path = tmp_path / "journal.sqlite3"
    marker = "T-raw-span-5f0c1e9a7b"
    sink = InMemorySink()
    service = collector(sink, Journal(path), grace=0)
    try:
        journaled(service, task_trace(marker, chats=3))
        sink.wait_for(1, timeout=10)
        files = [path, Path(f"{path}-wal")]
        deadline = time.monotonic() + 10
        while any(marker.encode() in file.read_bytes() for file in files if file.exists()):
            assert time.monotonic() < deadline, "the deleted spans are still on disk"
            time.sleep(0.05)
        assert rows(path) == 0
    finally:
        assert service.close(10)


class Stalled(logging.Handler):
    """A log destination that blocks on lines containing ``text`` until ``go`` is set
    (a stderr pipe nobody reads)."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.INFO)
        self.text = text
        self.entered = threading.Event()
        self.go = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.entered.set()
            self.go.wait(600)


@contextlib.contextmanager
def stalled_log(text: str) -> Iterator[Stalled]:
    handler = Stalled(text)
    log = logging.getLogger("otel_diary")
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)  # the repeated journal-full warnings are debug lines
    try:
        yield handler
    finally:
        handler.go.set()
        log.removeHandler(handler)
        log.setLevel(level)


def offered_meanwhile(service: Collector, spans: Sequence[Span]) -> Admission | None:
    """The answer to ``spans`` offered from another thread, or None if the offer is
    still waiting after half a minute (the lock is held)."""
    answers: list[Admission] = []
    thread = threading.Thread(
        target=lambda: answers.append(service.offer(batch_of(spans))[0]), daemon=True)
    thread.start()
    thread.join(30)
    return answers[0] if answers else None


@pytest.mark.parametrize("line", ["journal-full", "retry"])
def test_a_stalled_log_stalls_no_request(tmp_path: Path, line: str) -> None:
    """The journal-full warning and the line saying diaries are tried again are logged
    out of the lock requests are assembled under: a blocked stderr stalls no request."""
    sink = Broken()
    full = line == "journal-full"
    service = collector(sink, Journal(tmp_path / "j.sqlite3",
                                      max_bytes=1500 if full else 1 << 20),
                        grace=3600 if full else 0, retry_s=0.05)
    try:
        with stalled_log("holds its maximum" if full else "tries again") as log:
            if full:
                filler = threading.Thread(target=lambda: [
                    service.offer(batch_of(task_trace(f"T-{n}"))) for n in range(5)],
                    daemon=True)
                filler.start()
            else:
                journaled(service, task_trace("T-unwritten"))
            assert log.entered.wait(60)
            assert offered_meanwhile(service, task_trace("T-meanwhile")) is not None
    finally:
        service.close(10)
