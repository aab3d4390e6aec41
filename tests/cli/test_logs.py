"""The long-running commands' logs: JSON or text lines on stderr, written by a thread of
their own so that a stderr nobody reads stalls no one who logs."""

from __future__ import annotations

import gc
import io
import json
import logging
import threading
import weakref
from collections.abc import Iterator

import pytest

from otel_diary.cli.logs import MAX_QUEUED, MAX_QUEUED_CHARS, MAX_TEXT_CHARS, configure


class StalledStream(io.StringIO):
    """stderr as a pipe nobody reads: each write waits until ``drained`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = threading.Event()
        self.drained = threading.Event()

    def write(self, text: str) -> int:
        self.writing.set()
        self.drained.wait()
        return super().write(text)


@pytest.fixture
def root_logging() -> Iterator[None]:
    """The root logger's and otel_diary's handlers and levels, put back afterwards."""
    root, ours = logging.getLogger(), logging.getLogger("otel_diary")
    handlers, levels = list(root.handlers), (root.level, ours.level)
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(levels[0])
        ours.setLevel(levels[1])


def test_a_stderr_nobody_reads_stalls_no_one_who_logs(
        root_logging: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """While stderr is not read, logging returns at once; past MAX_QUEUED waiting lines,
    lines are dropped, and once stderr is read again a line says how many."""
    stream = StalledStream()
    monkeypatch.setattr("sys.stderr", stream)
    stop = configure("json", False)
    log = logging.getLogger("otel_diary")
    total = MAX_QUEUED + 50

    def log_lines() -> None:
        log.warning("line 0")
        stream.writing.wait()  # the writer holds line 0; the queue is empty
        for n in range(1, total):
            log.warning("line %d", n)

    logger_thread = threading.Thread(target=log_lines)
    logger_thread.start()
    logger_thread.join(30)
    stalled = logger_thread.is_alive()
    stream.drained.set()
    logger_thread.join()
    assert not stalled, "logging waited for a stderr nobody read"
    stop()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    dropped = total - 1 - MAX_QUEUED
    assert [line["msg"] for line in lines[:2]] == [
        "line 0", f"otel-diary: {dropped} log line(s) dropped while stderr was not read"]
    assert [line["msg"] for line in lines[2:]] == [f"line {n}" for n in range(1, MAX_QUEUED + 1)]


def test_waiting_lines_are_bounded_in_characters_and_each_is_cut(
        root_logging: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Long lines (an error quoting a whole request) wait in at most MAX_QUEUED_CHARS
    characters, not MAX_QUEUED of any length; each message and traceback keeps its start
    and end within MAX_TEXT_CHARS."""
    stream = StalledStream()
    monkeypatch.setattr("sys.stderr", stream)
    stop = configure("json", False)
    log = logging.getLogger("otel_diary")
    log.warning("first")
    assert stream.writing.wait(30)  # the writer holds it: the others wait
    total = 2 * MAX_QUEUED_CHARS // MAX_TEXT_CHARS
    for n in range(total):
        try:
            raise ValueError("x" * 100_000)
        except ValueError:
            log.exception("start %d %s end", n, "y" * 100_000)
    stream.drained.set()
    stop()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    kept = [line for line in lines if line["msg"].startswith("start ")]
    waiting = sum(len(line["msg"]) + len(line["error"]) for line in kept)
    assert waiting <= MAX_QUEUED_CHARS
    assert len(kept) >= MAX_QUEUED_CHARS // (2 * MAX_TEXT_CHARS + 200)  # no fewer than fit
    assert f"{total - len(kept)} log line(s) dropped" in lines[1]["msg"]
    for line in kept:
        assert line["msg"].endswith("y end") and "characters left out" in line["msg"]
        assert len(line["msg"]) < MAX_TEXT_CHARS + 100 and len(line["error"]) < MAX_TEXT_CHARS + 100
        assert line["error"].startswith("Traceback") and line["error"].endswith("xxx")


def test_json_lines_keep_the_message_as_logged_and_the_error(
        root_logging: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line is written as it read when logged (its arguments changed after do not
    show); an exception logged with it is under "error", with its traceback."""
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    stop = configure("json", False)
    state = ["before"]
    try:
        raise ValueError("broken")
    except ValueError:
        logging.getLogger("otel_diary").exception("state %s", state)
    state[0] = "after"
    stop()
    logging.getLogger("otel_diary").warning("after stop")  # written at once, not lost
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert (first["level"], first["msg"]) == ("error", "state ['before']")
    assert "Traceback" in first["error"] and "ValueError: broken" in first["error"]
    assert second["msg"] == "after stop"


def test_text_lines_keep_the_error_and_waiting_lines_hold_no_frames(
        root_logging: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --log-format text an error's traceback follows its line; while the line waits
    for stderr it keeps the traceback's text, not its frames (nor what they hold)."""
    stream = StalledStream()
    monkeypatch.setattr("sys.stderr", stream)
    stop = configure("text", False)
    logging.getLogger("otel_diary").warning("first")  # the writer waits on it
    assert stream.writing.wait(30)

    class Held:
        pass

    def fail(held: Held) -> None:
        raise ValueError("broken")

    held = Held()
    watch = weakref.ref(held)
    try:
        fail(held)
    except ValueError:
        logging.getLogger("otel_diary").exception("it failed")
    del held
    gc.collect()
    alive = watch() is not None
    stream.drained.set()
    stop()
    assert not alive, "a waiting line kept the failed call's frames"
    text = stream.getvalue()
    assert "ERROR otel_diary: it failed\nTraceback" in text
    assert text.rstrip().endswith("ValueError: broken")
