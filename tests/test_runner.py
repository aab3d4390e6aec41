"""The one worker engine: rounds on wake, flush, a stop deadline, errors, fork."""

from __future__ import annotations

import threading
import time

from opentelemetry import context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY

from otel_diary.runner import Runner, suppressed
from tests.support.forking import in_forked_child, needs_fork


class Recorder:
    """A work callable that records its rounds and can be told what to answer."""

    def __init__(self) -> None:
        self.rounds: list[bool] = []
        self.answers: list[float | None] = []
        self.suppressed: list[bool] = []
        self.fail_once = False
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def __call__(self, stopping: bool) -> float | None:
        self.entered.set()
        self.gate.wait(5)
        self.rounds.append(stopping)
        self.suppressed.append(bool(context.get_value(_SUPPRESS_INSTRUMENTATION_KEY)))
        if self.fail_once:
            self.fail_once = False
            raise RuntimeError("boom")
        return self.answers.pop(0) if self.answers else None


def test_a_round_runs_at_start_and_when_woken() -> None:
    """The first round runs at once; later ones when woken, not before the interval."""
    work = Recorder()
    runner = Runner("test-runner", work, interval_s=60.0)
    runner.start()
    assert runner.flush(5.0)
    first = len(work.rounds)
    assert first >= 1
    runner.wake()
    assert runner.flush(5.0)
    assert len(work.rounds) > first
    assert runner.stop(5.0)
    assert work.rounds[-1] is True  # the last round knows it is stopping
    assert all(work.suppressed)  # instrumentation is suppressed in every round


def test_flush_waits_for_a_round_that_began_after_it() -> None:
    """A round already running when flush is called does not count: the next one does."""
    work = Recorder()
    runner = Runner("test-runner", work, interval_s=60.0)
    runner.start()
    assert runner.flush(5.0)
    work.gate.clear()  # the next round blocks inside the work
    work.entered.clear()
    runner.wake()
    assert work.entered.wait(5)  # that round has begun
    done = len(work.rounds)
    flushed: list[bool] = []
    flusher = threading.Thread(target=lambda: flushed.append(runner.flush(5.0)))
    flusher.start()
    time.sleep(0.1)
    assert flushed == []  # still waiting: the round in progress began before the flush
    work.gate.set()
    flusher.join(5)
    assert flushed == [True]
    assert len(work.rounds) >= done + 2  # the round in progress, then one begun after
    runner.stop(5.0)


def test_stop_runs_rounds_until_the_work_is_finished_or_the_deadline() -> None:
    """Once stopping, a number asks for another round; None ends the thread; the deadline
    ends it too."""
    work = Recorder()
    runner = Runner("test-runner", work, interval_s=60.0)
    runner.start()
    assert runner.flush(5.0)
    work.answers = [0.0, 0.0, None]
    assert runner.stop(5.0)
    assert work.rounds[-3:] == [True, True, True]
    assert not runner.alive
    assert runner.stop(5.0)  # idempotent

    slow = Recorder()
    slow.answers = [None] + [0.05] * 1000  # always asks for another round
    stubborn = Runner("test-runner", slow, interval_s=60.0)
    stubborn.start()
    assert stubborn.flush(5.0)
    started = time.monotonic()
    assert stubborn.stop(0.3)
    assert time.monotonic() - started < 5  # the deadline ended it, not the work
    assert 1 < slow.rounds.count(True) < 1000


def test_what_stop_releases_waits_for_a_round_that_outlasts_it() -> None:
    """``then`` is called once the thread is done: by ``stop`` when it ended in time, by
    the thread as it ends when a round outlasted the timeout (what the round uses is not
    released under it), and once."""
    calls: list[str] = []
    idle = Runner("test-runner", Recorder(), interval_s=60.0)
    idle.start()
    assert idle.stop(5.0, then=lambda: calls.append(threading.current_thread().name))
    assert calls == [threading.current_thread().name]

    in_round, release, released = threading.Event(), threading.Event(), threading.Event()

    def busy(stopping: bool) -> float | None:
        in_round.set()
        release.wait(30)
        return None

    def then() -> None:
        calls.append(threading.current_thread().name)
        released.set()

    runner = Runner("test-busy", busy, interval_s=60.0)
    runner.start()
    assert in_round.wait(10)
    assert not runner.stop(0.0, then=then)  # the round goes on
    assert not released.is_set()
    release.set()
    assert released.wait(10)
    assert calls[1:] == ["test-busy"]  # by the runner's thread, once it was done
    assert runner.join(10) and calls[1:] == ["test-busy"]


def test_a_failing_round_is_counted_and_the_runner_goes_on() -> None:
    """An exception in the work is logged and counted; the next round runs as usual."""
    errors: list[int] = []
    work = Recorder()
    runner = Runner("test-runner", work, interval_s=60.0, on_error=lambda: errors.append(1))
    runner.start()
    assert runner.flush(5.0)
    work.fail_once = True
    runner.wake()
    assert runner.flush(5.0)
    runner.wake()
    assert runner.flush(5.0)
    assert errors == [1]
    assert runner.alive
    runner.stop(5.0)


def test_suppressed_marks_the_context_only_inside_the_block() -> None:
    """Inside `suppressed()` instrumentations see the suppression key; outside they do not."""
    with suppressed():
        assert context.get_value(_SUPPRESS_INSTRUMENTATION_KEY) is True
    assert not context.get_value(_SUPPRESS_INSTRUMENTATION_KEY)


@needs_fork
def test_a_forked_child_gets_its_own_thread() -> None:
    """After after_fork() in a child the runner has a new, live thread that runs rounds."""
    work = Recorder()
    runner = Runner("test-runner", work, interval_s=60.0)
    runner.start()
    assert runner.flush(5.0)

    def child() -> bool:
        before = runner.thread
        runner.after_fork()
        ok = runner.alive and runner.thread is not before and runner.flush(5.0)
        return bool(ok and runner.stop(5.0))

    assert in_forked_child(child) == 0
    runner.stop(5.0)
