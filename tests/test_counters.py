"""Counters: declared and labelled, safe from threads; LogOnce logs a kind's first failure."""

from __future__ import annotations

import logging
import threading

import pytest

from otel_diary.counters import Counters, LogOnce


class Example(Counters):
    sent: int
    delay_s: float


def test_declared_counters_start_at_zero_and_add_up_across_threads() -> None:
    """Each declared counter starts at its type's zero; add() from many threads loses none."""
    stats = Example()
    assert stats.as_dict() == {"sent": 0, "delay_s": 0.0}
    assert isinstance(stats.delay_s, float)

    def bump() -> None:
        for _ in range(1000):
            stats.add("sent")

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert stats.sent == 8000 and stats.get("sent") == 8000


def test_labelled_counters_are_listed_sorted_and_undeclared_names_refused() -> None:
    """A label makes a separate counter; initial values must name declared counters."""
    stats = Example(sent=2)
    stats.add("rejected_total:reason", "too_large", 3)
    stats.add("rejected_total:reason", "busy")
    assert stats.items() == [(("rejected_total:reason", "busy"), 1),
                             (("rejected_total:reason", "too_large"), 3)]
    assert stats.get("rejected_total:reason", "too_large") == 3
    assert stats.sent == 2
    with pytest.raises(TypeError):
        Example(unknown=1)


def test_log_once_logs_the_first_of_each_kind_with_its_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    """The first failure of a kind is an error with a traceback, later ones debug lines."""
    log_once = LogOnce()
    with caplog.at_level(logging.DEBUG, logger="otel_diary"):
        for kind in ("sink", "sink", "index"):
            try:
                raise OSError("disk full")
            except OSError:
                log_once(kind, "could not write %s", "x")
    levels = [(record.levelno, record.exc_info is not None) for record in caplog.records]
    assert levels == [(logging.ERROR, True), (logging.DEBUG, True), (logging.ERROR, True)]


def test_log_once_takes_an_exception_caught_earlier(caplog: pytest.LogCaptureFixture) -> None:
    """Outside an ``except`` block, the failure given as ``exc`` is the one logged."""
    log_once = LogOnce()
    with caplog.at_level(logging.DEBUG, logger="otel_diary"):
        log_once("batch", "%d failed", 2, exc=ValueError("the first"))
    [record] = caplog.records
    assert record.levelno == logging.ERROR and record.getMessage().startswith("2 failed")
    assert record.exc_info is not None and str(record.exc_info[1]) == "the first"
