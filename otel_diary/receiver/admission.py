"""Admission: what the receivers ask before and while they take a request in.

:class:`Collector` is the receivers' side of assembly: a locked
:class:`~otel_diary.assembly.grace.TraceStore` that request handlers add batches to
(:meth:`Collector.offer`, which answers with an :class:`Admission`), a timer runner that
decides task spans whose grace period is over, and a pipeline runner that writes their
diaries. Decided tasks waiting for the pipeline count against the store's bounds, so a
slow sink or model sheds load (503) instead of growing memory.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from otel_diary.assembly.batch import Batch, weight
from otel_diary.assembly.grace import TraceStore
from otel_diary.counters import Counters
from otel_diary.pipeline.core import Pipeline
from otel_diary.record import Ready
from otel_diary.runner import Runner

logger = logging.getLogger("otel_diary")


class Admission(enum.Enum):
    """A collector's answer to an offered batch."""

    ACCEPTED = "accepted"
    BUSY = "busy"
    """Requests being read and decoded hold all the memory allowed for that: retry soon
    (HTTP 429, gRPC RESOURCE_EXHAUSTED). Receivers decide this themselves."""
    STORE_FULL = "store_full"
    """Assembly memory is at its bound: retry later (HTTP 503, gRPC UNAVAILABLE)."""
    CLOSED = "shutting_down"
    """The service is stopping (HTTP 503, gRPC UNAVAILABLE)."""
    TOO_LARGE = "too_large"
    """The batch alone exceeds what the collector can ever hold (HTTP 413)."""


DECIDE_AT_ONCE = 256
"""Task spans the timer thread decides per hold of the lock receivers assemble under."""


class Collector:
    """The receivers' side of assembly: a locked :class:`TraceStore`, a timer thread and a
    pipeline thread.

    :meth:`offer` is all a request handler calls: it adds the batch to the store at once,
    under the lock, and never waits on I/O. Assembling on the receiving thread costs less
    than handing each batch to another thread, where two threads running Python would
    take the interpreter lock from each other on every socket call. The timer thread
    decides task spans whose grace period is over and forgets expired traces; the
    pipeline thread renders and delivers, so a slow sink or model never stalls receiving
    (its backlog counts against the bounds).
    """

    def __init__(
        self,
        store: TraceStore,
        pipeline: Pipeline,
        *,
        clock: Callable[[], float] = time.monotonic,
        start: bool = True,
    ) -> None:
        self.store = store
        self.pipeline = pipeline
        self.counters = Counters()
        self._clock = clock
        self._lock = threading.Lock()
        self._ready: deque[tuple[Ready, int]] = deque()
        self._ready_count = 0
        self._ready_bytes = 0
        self._closed = False
        self._idle = threading.Condition(self._lock)
        self._next_expiry = 0.0
        self._timer = Runner("otel-diary-assemble", self._decide_due, interval_s=0.5,
                             on_error=self._assembly_failed)
        self._delivery = Runner("otel-diary-pipeline", self._deliver, interval_s=0.5,
                                on_error=self._assembly_failed)
        if start:
            self.start()

    def start(self) -> None:
        self._delivery.start()
        self._timer.start()

    # -- hot path -------------------------------------------------------------------------

    def saturation(self) -> Admission:
        """Whether a request is worth reading at all (cheap, no lock)."""
        if self._closed:
            return Admission.CLOSED
        spans_left, bytes_left = self._room()
        if spans_left <= 0 or bytes_left <= 0:
            return Admission.STORE_FULL
        return Admission.ACCEPTED

    def _room(self) -> tuple[int, int]:
        """Spans and estimated bytes the store's bounds leave (none at the trace bound).

        What traces without a task span hold counts as room: the store drops them first
        to take a batch in, so they never keep a task out.
        """
        store = self.store
        if len(store) - store.taskless_traces >= store.max_traces:
            return 0, 0
        return (store.max_spans - (store.spans - store.taskless_spans) - self._ready_count,
                store.max_bytes - (store.bytes - store.taskless_bytes) - self._ready_bytes)

    def offer(self, batch: Batch) -> Admission:
        """Assemble ``batch``, or say why not. Never waits on I/O or on the pipeline."""
        held = batch.held
        size = batch.size
        store = self.store
        with self._lock:
            if self._closed:
                return Admission.CLOSED
            if held > store.max_spans or size > store.max_bytes:
                return Admission.TOO_LARGE
            if held:
                spans_left, bytes_left = self._room()
                if held > spans_left or size > bytes_left:
                    return Admission.STORE_FULL
            if batch.valid:
                waiting = store.next_deadline() is not None
                try:
                    self._hand_over(store.add(batch, self._clock()))
                except Exception:
                    self._assembly_failed()
                if not waiting and store.next_deadline() is not None:
                    self._timer.wake()  # the timer thread may be asleep for longer
        return Admission.ACCEPTED

    # -- lifecycle ------------------------------------------------------------------------

    def flush(self, timeout: float = 10.0) -> bool:
        """Decide every task span whose grace period is over and wait until each one
        decided is delivered."""
        deadline = time.monotonic() + timeout
        with self._idle:
            self._hand_over(self.store.due(self._clock()))
            return self._idle.wait_for(lambda: not self._ready_count,
                                       max(deadline - time.monotonic(), 0))

    def close(self, timeout: float = 10.0) -> bool:
        """Stop taking batches, decide every waiting task now and deliver it; idempotent.

        Returns False when ``timeout`` passed before the pipeline was drained.
        """
        with self._lock:
            already = self._closed
            self._closed = True
        deadline = time.monotonic() + timeout
        finished = self._timer.stop(timeout)
        finished = self._delivery.stop(deadline - time.monotonic()) and finished
        if not already:
            self.pipeline.close()
        if not finished:
            logger.warning("otel-diary stopped with work left", extra={"fields": {
                "pending_diaries": self._ready_count}})
        return finished

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending_diaries(self) -> int:
        return self._ready_count

    # -- workers --------------------------------------------------------------------------

    def _decide_due(self, stopping: bool) -> float | None:
        """One round of the timer: decide due task spans a few at a time (receivers wait on
        the lock), forget expired traces; once closed, decide everything left."""
        store = self.store
        now = self._clock()
        while store.is_due(now) and not self._closed:
            with self._lock:
                try:
                    self._hand_over(store.due(now, DECIDE_AT_ONCE))
                except Exception:
                    self._assembly_failed()
                    break
        with self._lock:
            try:
                if now >= self._next_expiry:
                    self._next_expiry = now + 1.0
                    store.expire(now)
                if self._closed:
                    self._hand_over(store.drain())
                    return None
            except Exception:
                self._assembly_failed()
        if stopping:
            return None
        deadline = store.next_deadline()
        return 0.5 if deadline is None else min(max(deadline - self._clock(), 0), 0.5)

    def _assembly_failed(self) -> None:
        """Count and log the exception being handled; assembly goes on."""
        self.counters.add("worker_errors")
        logger.exception("otel-diary assembly failed; continuing")

    def _hand_over(self, ready: list[Ready]) -> None:
        """Queue decided tasks for the pipeline thread; the caller holds the lock."""
        if not ready:
            return
        for item in ready:
            size = weight(item[0])
            self._ready.append((item, size))
            self._ready_count += 1
            self._ready_bytes += size
        self._delivery.wake()

    def _deliver(self, stopping: bool) -> None:
        """One round of the pipeline runner: every decided task, in order."""
        while True:
            with self._lock:
                if not self._ready:
                    return
                item, size = self._ready.popleft()
            self.pipeline.handle(item)  # never raises
            with self._idle:
                self._ready_count -= 1
                self._ready_bytes -= size
                self._idle.notify_all()
