"""Background work: the one runner every stage's worker thread is, fork safety,
instrumentation suppression for otel-diary's own I/O, and the schedule on which diaries no
sink could write are tried again.

A :class:`Runner` is a daemon thread that runs one ``work`` callable in rounds: when woken,
when the delay the last round asked for has passed, and, once stopped, until the work
says it is finished or the stop deadline passes. ``flush`` waits for a round that started
after it was called, ``stop`` drains within a timeout and is idempotent. The in-process
processor, the receiver's assembly and delivery, and the hub's delivery all run on it.

Contextvars do not cross into a new thread, so every round runs inside
:func:`suppressed`: instrumentations (httpx, requests, ...) make no spans of the
pipeline's own calls. Objects that own threads, locks, sockets or database handles renew
them in a forked child (:func:`renew_after_fork`), so a prefork server never shares them
with its parent.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Protocol

from opentelemetry import context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY

logger = logging.getLogger("otel_diary")

Work = Callable[[bool], "float | None"]
"""One round of a runner's work, told whether the runner is stopping. Returns how many
seconds until it wants its next round (``None``: the runner's interval). Once stopping,
``None`` means the work is finished; a number asks for another round after that delay."""


@contextlib.contextmanager
def suppressed() -> Iterator[None]:
    """Instrumentations (httpx, requests, ...) create no spans inside this block."""
    token = context.attach(context.set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        yield
    finally:
        context.detach(token)


CUT_SHORT_S = 1.0
"""The end of a shutdown's budget (at most a quarter of it) in which the diaries' model
calls are cut short and the runs left are written with the stub reflection."""


RETRY_FIRST_S = 1.0
"""How long a task whose diary no sink could write (a full disk, a folder made read-only)
waits before it is tried again; the wait doubles with each round that writes none of
them, up to :data:`RETRY_MAX_S`. A diary written meanwhile (the sinks work again) has them
tried at once."""
RETRY_MAX_S = 30.0


class RetrySchedule:
    """When the diaries no sink could write are tried again (see :data:`RETRY_FIRST_S`)."""

    def __init__(self, first_s: float = RETRY_FIRST_S) -> None:
        self.first_s = first_s
        self.delay = first_s
        self.at = 0.0
        """When they are tried next (the owner's clock)."""

    def failed(self, now: float) -> None:
        """A round wrote none of them: wait, longer each time."""
        self.at = now + self.delay
        self.delay = min(2 * self.delay, max(RETRY_MAX_S, self.first_s))

    def wrote(self) -> None:
        """A diary was written: the sinks work; those waiting are tried at once."""
        self.delay = self.first_s
        self.at = 0.0


class ForkAware(Protocol):
    def _after_fork_in_child(self) -> None: ...


def renew_after_fork(owner: ForkAware) -> None:
    """Call ``owner._after_fork_in_child()`` in every child forked from now on, and its
    ``_before_fork()`` and ``_after_fork_in_parent()`` around each fork when it has them.

    The hooks hold ``owner`` through a weak reference, so they never keep it alive. Does
    nothing where ``fork`` does not exist.
    """
    register = getattr(os, "register_at_fork", None)
    if register is None:  # pragma: no cover - not POSIX
        return
    ref = weakref.ref(owner)

    def hook(method: str) -> Callable[[], None]:
        def call() -> None:
            target = ref()
            if target is None:
                return
            try:
                getattr(target, method, lambda: None)()
            except Exception:  # a fork must never fail because of a diary
                logger.debug("otel-diary could not renew %s around a fork",
                             type(target).__name__, exc_info=True)
        return call

    register(before=hook("_before_fork"), after_in_parent=hook("_after_fork_in_parent"),
             after_in_child=hook("_after_fork_in_child"))


class Runner:
    """A daemon thread running ``work`` in rounds; never raises into its callers.

    Usage::

        runner = Runner("otel-diary-hub", deliver, interval_s=2.0, on_error=count)
        runner.start()
        runner.wake()            # a new item: run a round soon
        runner.flush(5.0)        # True once a round started after this call has ended
        runner.stop(10.0)        # last rounds until the work is finished or 10 s passed

    The thread is a daemon: the SDK's exit hook (or the owner) stops it, and a process
    never hangs at exit on it. An owner that renews itself after a fork calls
    :meth:`after_fork` once its own state is fresh.
    """

    def __init__(self, name: str, work: Work, *, interval_s: float = 1.0,
                 on_error: Callable[[], None] | None = None) -> None:
        self.name = name
        self._work = work
        self._interval_s = interval_s
        self._on_error = on_error
        self.deadline = float("inf")
        """When the runner stops for good (``time.monotonic()``); infinite until stopped."""
        self._thread: threading.Thread | None = None
        self._started = False
        self._stopped = False
        self._done = False
        """Whether the thread is past its last round (set with ``_ended_lock`` held)."""
        self._renew()

    def _renew(self) -> None:
        self._then: Callable[[], None] | None = None
        """What :meth:`stop` left for the thread to call as it ends."""
        self._ended_lock = threading.Lock()
        self._wake = threading.Event()
        self._rounds = threading.Condition()
        self._begun = 0
        self._ended = 0
        self.stopping = False

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the thread (once; again after :meth:`after_fork` with ``restart=False``)."""
        if self.alive or self._stopped:
            return
        self._started = True
        self._done = False
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def flush(self, timeout_s: float) -> bool:
        """Wait until a round that began after this call has ended; False on timeout."""
        if not self.alive:
            return True
        with self._rounds:
            target = self._begun + 1
            self._wake.set()
            return self._rounds.wait_for(lambda: self._ended >= target or not self.alive,
                                         max(timeout_s, 0.0))

    def stop(self, timeout_s: float, then: Callable[[], None] | None = None) -> bool:
        """Run the last rounds (until the work is finished or ``timeout_s`` passed) and end
        the thread; True when it ended in time. Idempotent. ``then`` is called once the
        thread has ended: here, or by the thread as it ends when it is still in a round
        (a call that outlasts the timeout), so what the work uses is released after it."""
        if not self._stopped:
            self._stopped = True
            self.deadline = time.monotonic() + max(timeout_s, 0.0)
            self.stopping = True
            self._wake.set()
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(max(self.deadline - time.monotonic(), 0.0) + 0.05)
        with self._ended_lock:
            ended = thread is None or self._done
            if not ended:
                self._then = then
        if ended and then is not None:
            then()
        return ended

    def join(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the thread of a stopped runner to end, past the
        deadline :meth:`stop` gave it; True when it ended."""
        thread = self._thread
        if thread is not None:
            thread.join(max(timeout_s, 0.0))
        return thread is None or not thread.is_alive()

    def after_fork(self, restart: bool = True) -> None:
        """In a forked child: fresh events and, with ``restart``, a new thread (the
        parent's does not exist here)."""
        was_started = self._started
        self._thread = None
        self._renew()
        if self._stopped:
            self.stopping = True
        elif restart and was_started:
            self.start()

    # -- thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._rounds_until_stopped()
        finally:
            with self._ended_lock:  # ended, for stop(): from here it calls ``then`` itself
                then, self._then = self._then, None
                self._done = True
            if then is not None:
                try:
                    with suppressed():
                        then()
                except Exception:
                    logger.debug("otel-diary %s: releasing after the last round failed",
                                 self.name, exc_info=True)

    def _rounds_until_stopped(self) -> None:
        with suppressed():
            delay: float | None = 0.0
            while True:
                stopping = self.stopping
                if not stopping:
                    self._wake.wait(self._interval_s if delay is None else max(delay, 0.0))
                    self._wake.clear()
                    stopping = self.stopping
                with self._rounds:
                    self._begun += 1
                try:
                    delay = self._work(stopping)
                except (Exception, SystemExit, KeyboardInterrupt):
                    # sys.exit() in a worker thread would end the thread alone, silently:
                    # the runner goes on (a KeyboardInterrupt never reaches a thread but
                    # the main one unless raised by hand).
                    delay = None if stopping else self._interval_s
                    if self._on_error is not None:
                        self._on_error()
                    logger.exception("otel-diary %s failed; continuing", self.name)
                finally:
                    with self._rounds:
                        self._ended += 1
                        self._rounds.notify_all()
                if stopping:
                    if delay is None:
                        return
                    left = self.deadline - time.monotonic()
                    if left <= 0 or delay > left:
                        return
                    time.sleep(delay)
