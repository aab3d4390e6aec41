"""Admission: what the receivers ask before and while they take a request in.

:class:`Collector` is the receivers' side of assembly: a locked
:class:`~otel_diary.assembly.grace.TraceStore` that request handlers add batches to
(:meth:`Collector.offer`, which answers with an :class:`Admission` and, with a journal,
the future a handler waits for before it acknowledges), a timer runner that decides task
spans whose grace period is over, and pipeline runners that write their diaries, several
at once. Decided tasks waiting for the pipeline count against the store's bounds, so a
slow sink or model sheds load (503) instead of growing memory. With a
:class:`~otel_diary.assembly.journal.Journal`, what the store holds is journaled before
it is acknowledged, replayed on start, and compacted once a trace is closed and its
diaries are written.
"""

from __future__ import annotations

import enum
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

from otel_diary.assembly.batch import Batch, Part, weight
from otel_diary.assembly.grace import TraceStore
from otel_diary.assembly.journal import Journal, Mark, encode
from otel_diary.assembly.summary import Ready
from otel_diary.counters import Counters, LogOnce
from otel_diary.pipeline.core import Pipeline
from otel_diary.runner import RETRY_FIRST_S, RetrySchedule, Runner

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
    JOURNAL_FULL = "journal_full"
    """The journal is at its bound: retry later (HTTP 503, gRPC UNAVAILABLE)."""
    BEHIND = "pipeline_behind"
    """As many decided tasks wait for the pipeline as it may fall behind by: retry later
    (HTTP 503, gRPC UNAVAILABLE)."""


Offered = tuple[Admission, "Future[None] | None"]
"""An admission, and for an accepted batch with journaled rows the future that is done
once they are durable: a receiver acknowledges the request only then (an exception in
it: answer as :attr:`Admission.JOURNAL_FULL`, to be retried)."""


DECIDE_AT_ONCE = 256
"""Task spans the timer thread decides per hold of the lock receivers assemble under."""
DECIDE_BUDGET = 2**17
"""Parent links, task spans and contributions of the traces decided per hold of that
lock, at most (and one trace, whatever its size): a trace of the most parent links
assembly keeps (:data:`~otel_diary.assembly.grace.MAX_LINKS`)."""
LONG_HOLD_S = 0.02
"""A hold of that lock longer than this is followed by twice as long without it: however
large the traces decided, the receivers have it at least two thirds of the time."""


def pause_after(held: float) -> float:
    """How long the timer leaves the lock alone after holding it ``held`` seconds: twice
    as long after a hold of :data:`LONG_HOLD_S` or more (at most a second), else not."""
    return min(2 * held, 1.0) if held >= LONG_HOLD_S else 0.0


class Collector:
    """The receivers' side of assembly: a locked :class:`TraceStore`, a timer thread,
    ``workers`` pipeline threads and, optionally, a journal.

    :meth:`offer` is all a request handler calls: it adds the batch to the store at once,
    under the lock, and never waits on I/O (journaled rows are committed by the
    journal's own thread). Assembling on the receiving thread costs less than handing
    each batch to another thread, where two threads running Python would take the
    interpreter lock from each other on every socket call. The timer thread decides task
    spans whose grace period is over and forgets expired traces; the pipeline threads
    render and deliver, each one task at a time (model calls let the others run
    meanwhile), so a slow sink or model never stalls receiving (its backlog counts
    against the bounds). A task counts as waiting, and keeps its journal rows, until its
    diary and the index and lesson updates of its batch are written; one whose diary no
    sink could write is tried again (see :data:`~otel_diary.runner.RETRY_FIRST_S`).
    """

    def __init__(
        self,
        store: TraceStore,
        pipeline: Pipeline,
        *,
        journal: Journal | None = None,
        workers: int = 1,
        max_pending: int = 2000,
        retry_s: float = RETRY_FIRST_S,
        clock: Callable[[], float] = time.monotonic,
        start: bool = True,
    ) -> None:
        if workers < 1:
            raise ValueError("a collector needs at least one pipeline worker")
        self.store = store
        self.pipeline = pipeline
        self.journal = journal
        self.max_pending = max_pending
        """Decided tasks allowed to wait for the pipeline; past it requests are refused, so
        receiving never takes the time the pipeline needs to catch up."""
        self.counters = Counters()
        self._clock = clock
        self._lock = threading.Lock()
        self._ready: deque[tuple[Ready, int]] = deque()
        self._ready_count = 0
        self._ready_bytes = 0
        self._closed = False
        self._started = False
        self._idle = threading.Condition(self._lock)
        self._next_expiry = 0.0
        self._log_once = LogOnce()
        self._closing: list[bytes] = []
        """Traces the store closed during the current call (compacted once written)."""
        self._delivering: dict[bytes, int] = {}
        """Decided tasks of a trace not written yet, by trace id."""
        self._compact_later: dict[bytes, Mark] = {}
        """Journal rows of closed traces whose diaries are still being written."""
        self._unwritten: list[tuple[Ready, int]] = []
        """Decided tasks whose diary no sink could write: still waiting (and counted so,
        with their journal rows kept), tried again as ``_retries`` says."""
        self._retries = RetrySchedule(retry_s)
        self._diaries = 0
        """The pipeline's count of diaries written, when a batch was last released."""
        if journal is not None:
            store.on_close = self._closing.append
        self._timer = Runner("otel-diary-assemble", self._decide_due, interval_s=0.5,
                             on_error=self._assembly_failed)
        self._delivery = [Runner(f"otel-diary-pipeline-{n}", self._deliver, interval_s=0.5,
                                 on_error=self._assembly_failed) for n in range(workers)]
        if start:
            self.start()

    def start(self) -> None:
        """Replay the journal (once), then start the threads."""
        if not self._started:
            self._started = True
            if self.journal is not None:
                self._replay(self.journal)
                self.journal.start()
        for runner in self._delivery:
            runner.start()
        self._timer.start()

    def _replay(self, journal: Journal) -> None:
        """Take in what the journal holds: traces with a task decided before the process
        ended are due at once, the others wait their grace period again."""
        traces = journal.replay()
        if not traces:
            return
        grace = self.store.grace
        now = self._clock()
        decided = [trace for trace in traces if trace.decided]
        held = [trace for trace in traces if not trace.decided]
        spans = 0
        with self._lock:
            # Decided ones first, as if they had come a grace period ago: deadlines stay
            # in order.
            for group, at in ((decided, now - grace), (held, now)):
                batch = _batch([part for trace in group for part in trace.parts],
                               [(trace.trace_id, links) for trace in group
                                for links in trace.links])
                spans += batch.held
                try:
                    self._hand_over(self.store.add(batch, at))
                except Exception:
                    self._assembly_failed()
        logger.info("otel-diary took back %d spans of %d traces from the journal",
                    spans, len(traces), extra={"fields": {
                        "event": "journal.replayed", "spans": spans, "traces": len(traces),
                        "decided_traces": len(decided), "journal": str(journal.path)}})
        self._timer.wake()

    # -- hot path -------------------------------------------------------------------------

    def saturation(self) -> Admission:
        """Whether a request is worth reading at all (cheap, no lock)."""
        if self._closed:
            return Admission.CLOSED
        spans_left, bytes_left = self._room()
        if spans_left <= 0 or bytes_left <= 0:
            return Admission.STORE_FULL
        if self._ready_count >= self.max_pending:
            return Admission.BEHIND
        journal = self.journal
        if journal is not None and journal.bytes >= journal.max_bytes:
            return Admission.JOURNAL_FULL
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

    def offer(self, batch: Batch) -> Offered:
        """Assemble ``batch``, or say why not. Never waits on I/O or on the pipeline.

        With a journal, an accepted batch's kept spans are journaled first; the future
        returned is done once they are durable."""
        held = batch.held
        size = batch.size
        store = self.store
        journal = self.journal
        rows = encode(batch.parts, batch.links) if journal is not None and held else []
        durable: Future[None] | None = None
        full = False  # logged once out of the lock: a blocked stderr must not stall it
        with self._lock:
            if self._closed:
                return Admission.CLOSED, None
            if held > store.max_spans or size > store.max_bytes:
                return Admission.TOO_LARGE, None
            if held:
                spans_left, bytes_left = self._room()
                if held > spans_left or size > bytes_left:
                    return Admission.STORE_FULL, None
                if self._ready_count >= self.max_pending:
                    return Admission.BEHIND, None
            links = self._held_links(batch) if journal is not None else []
            if journal is not None and held:  # links kept aside that these parts take
                links += store.strays(part.trace_id for part in batch.parts)
            if rows or links:
                assert journal is not None
                full = not journal.room(rows + links)
                if not full:  # journaled before the store: it may close the trace
                    durable = journal.append(rows, links)
            if batch.valid and not full:
                waiting = store.next_deadline() is not None
                try:
                    self._hand_over(store.add(batch, self._clock()))
                except Exception:
                    self._assembly_failed()
                if not waiting and store.next_deadline() is not None:
                    self._timer.wake()  # the timer thread may be asleep for longer
        if full:
            assert journal is not None
            self._log_once.warning("journal-full", "otel-diary's journal %s holds its "
                                   "maximum of %d bytes; refusing spans (503) until "
                                   "diaries are written", journal.path, journal.max_bytes)
            return Admission.JOURNAL_FULL, None
        return Admission.ACCEPTED, durable

    def _held_links(self, batch: Batch) -> list[tuple[bytes, bytes]]:
        """The parent links of ``batch`` for traces held from earlier requests that it
        brings no kept spans of (the others go in their parts' rows). Under the lock."""
        if not batch.links:
            return []
        kept = {part.trace_id for part in batch.parts} if batch.parts else ()
        holds = self.store.holds
        return [(trace_id, links) for trace_id, links in batch.links
                if trace_id not in kept and holds(trace_id)]

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

        Returns False when ``timeout`` passed before the pipeline was drained; what was
        not written then stays in the journal, for the next start, and the pipeline is
        left open: a runner still writing a diary uses its index connection, and closing
        that under it crashed the process (SIGSEGV on SIGTERM with a backlog).
        """
        with self._lock:
            already = self._closed
            self._closed = True
        deadline = time.monotonic() + timeout
        finished = self._timer.stop(timeout)
        for runner in self._delivery:
            finished = runner.stop(deadline - time.monotonic()) and finished
        if not already:
            if finished:
                self.pipeline.close(max(deadline - time.monotonic(), 0.0))
            if self.journal is not None:
                self.journal.close(max(deadline - time.monotonic(), 1.0))
        if not finished or self._unwritten:
            logger.warning("otel-diary stopped with work left%s", " (diaries no sink could "
                           "write)" if finished else "", extra={"fields": {
                               "pending_diaries": self._ready_count,
                               "journaled": self.journal is not None}})
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
        the lock), and after a long hold leave the lock to them for twice as long; forget
        expired traces; once closed, decide everything left."""
        store = self.store
        now = self._clock()
        pause = 0.0
        while store.is_due(now) and not self._closed:
            with self._lock:
                started = time.perf_counter()
                try:
                    self._hand_over(store.due(now, DECIDE_AT_ONCE, DECIDE_BUDGET))
                except Exception:
                    self._assembly_failed()
                    break
                held = time.perf_counter() - started
            pause = pause_after(held)
            if pause:  # the receivers' turn; what is due waits meanwhile
                break
        retried = 0
        with self._lock:
            try:
                if now >= self._next_expiry:
                    self._next_expiry = now + 1.0
                    store.expire(now)
                    self._hand_over([])
                if self._unwritten and (now >= self._retries.at or self._closed):
                    retried = self._retry()
                drained = self._closed
                if drained:
                    self._hand_over(store.drain(shutdown=True))
            except Exception:
                drained = False
                self._assembly_failed()
        _log_retry(retried)
        if stopping or drained:
            return None
        if pause:
            return pause
        deadline = store.next_deadline()
        return 0.5 if deadline is None else min(max(deadline - self._clock(), 0), 0.5)

    def _assembly_failed(self) -> None:
        """Count and log the exception being handled; assembly goes on."""
        self.counters.add("worker_errors")
        logger.exception("otel-diary assembly failed; continuing")

    def _hand_over(self, ready: list[Ready]) -> None:
        """Queue decided tasks for the pipeline threads, then compact the journal rows of
        traces the store closed whose diaries are all written; the caller holds the lock."""
        journal = self.journal
        for item in ready:
            size = weight(item[0])
            self._ready.append((item, size))
            self._ready_count += 1
            self._ready_bytes += size
            if journal is not None:
                trace_id = item[0].trace_id.to_bytes(16, "big")
                self._delivering[trace_id] = self._delivering.get(trace_id, 0) + 1
                journal.decided(trace_id, item[0].span_id)
        if ready:
            for runner in self._delivery:
                runner.wake()
        if journal is not None and self._closing:
            closing, self._closing[:] = list(self._closing), []
            for trace_id in closing:
                mark = journal.close_trace(trace_id)
                if mark is None:
                    continue
                if trace_id in self._delivering:
                    later = self._compact_later.get(trace_id)
                    self._compact_later[trace_id] = mark if later is None else later + mark
                else:
                    journal.forget(mark)

    def _deliver(self, stopping: bool) -> None:
        """One round of a pipeline runner: decided tasks, in order, until none is left."""
        journal = self.journal
        handled: list[tuple[Ready, int]] = []
        unwritten: set[int] = set()
        """Places in ``handled`` of tasks with a diary no sink could write: they keep
        waiting, and their journal rows (what was answered 200 for is not lost)."""

        def written() -> None:
            """The diaries of ``handled`` and their index entries are written: they are
            no longer waiting, and their journal rows may go."""
            retried = 0
            with self._idle:
                for place, (item, size) in enumerate(handled):
                    if place in unwritten:
                        self._unwritten.append((item, size))
                        continue
                    self._ready_count -= 1
                    self._ready_bytes -= size
                    if journal is not None:
                        self._written(journal, item[0].trace_id.to_bytes(16, "big"))
                diaries, self._diaries = self._diaries, self.pipeline.stats.diaries
                if unwritten:
                    self._retries.failed(self._clock())
                elif self._diaries > diaries:  # the sinks write again: no need to wait
                    self._retries.wrote()
                    if self._unwritten:
                        retried = self._retry()
                handled.clear()
                unwritten.clear()
                self._idle.notify_all()
            _log_retry(retried)

        with self.pipeline.batch(on_release=written):
            while True:
                with self._lock:
                    if not self._ready:
                        return
                    item, size = self._ready.popleft()
                handled.append((item, size))
                self.pipeline.handle(
                    item, unwritten=functools.partial(unwritten.add, len(handled) - 1))

    def _retry(self) -> int:
        """Queue again the tasks whose diary no sink could write (the caller holds the
        lock) and say how many; they still count as waiting."""
        retried = len(self._unwritten)
        self._ready.extend(self._unwritten)
        self._unwritten.clear()
        for runner in self._delivery:
            runner.wake()
        return retried

    def _written(self, journal: Journal, trace_id: bytes) -> None:
        """A diary of ``trace_id`` is written: once all are and the trace is closed, its
        journal rows go (the caller holds the lock)."""
        left = self._delivering.get(trace_id, 1) - 1
        if left > 0:
            self._delivering[trace_id] = left
            return
        self._delivering.pop(trace_id, None)
        mark = self._compact_later.pop(trace_id, None)
        if mark is not None:
            journal.forget(mark)


def _log_retry(retried: int) -> None:
    """Say that ``retried`` diaries are tried again; out of the lock, where a blocked
    stderr stalls no request."""
    if retried:
        logger.info("otel-diary tries again to write %d diaries no sink could write",
                    retried)


def _batch(parts: list[Part], links: list[tuple[bytes, bytes]]) -> Batch:
    """A batch of parts and parent links read back from the journal."""
    held = sum(len(part.span_ids) + len(part.tasks) for part in parts)
    size = sum(part.size + sum(task[2] for task in part.tasks) for part in parts)
    return Batch(parts=parts, held=held, valid=held, size=size, links=links)
