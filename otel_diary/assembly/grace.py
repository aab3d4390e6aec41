"""Trace assembly across requests: task spans and contributions in, root tasks out.

Spans of a trace arrive in any order, split over requests, sometimes twice. Decoding
keeps only task spans and spans that contribute to a task (tokens, models, tool calls,
errors); every other span is counted and dropped on the spot, so its parent link is not
kept either. A task span is decided a grace period after it arrived: it is a root task
when its parent is not a task span of the trace, and goes to the pipeline with what the
trace's contributions add up to.

Trade-offs: without the parent links of plain spans, a contribution cannot be traced up
to its task. Within a trace it goes to the root task that ends next after it, else to
the one that ends last -- as in-process, where a local root task span takes what ended
before it. With one root task per trace (the common case) that is every contribution; a
task nested in another task counts for the outer one; two root tasks running at the same
time in one trace may take some of each other's contributions. Copies of plain spans are
not told apart (nothing of them is held): only duplicates of held spans are counted.

Memory is bounded in traces, held spans (task spans and contributions) and estimated
bytes; receivers ask :meth:`Collector.offer` and shed load when it answers anything but
``ACCEPTED``.
"""

from __future__ import annotations

import enum
import gc
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from otel_diary.assembly.batch import Batch, Contribution, weight
from otel_diary.assembly.inprocess import Ready
from otel_diary.conventions import Conventions
from otel_diary.pipeline.classify import ChildSummary
from otel_diary.pipeline.core import Pipeline
from otel_diary.record import SpanRecord
from otel_diary.runner import suppressed

logger = logging.getLogger("otel_diary")


@dataclass(slots=True)
class _Trace:
    last_seen: float
    ids: list[bytes] | set[bytes]
    """Span ids of every task span and contribution taken (deduplication): a list while
    they came in one part (decoding leaves no copies within a part), a set once another
    part came."""
    contributions: list[Contribution]
    """Contributions not yet handed to a task."""
    size: int
    tasks: dict[int, tuple[SpanRecord, int]] = field(default_factory=dict)
    """Task spans not decided yet, by span id, with their estimated bytes."""
    task_spans: dict[int, tuple[int | None, int]] = field(default_factory=dict)
    """Every task span seen, decided or not: span id -> (parent span id, end time)."""


class TraceStore:
    """Open traces, deduplicated by span, until their task spans are decided.

    Not thread-safe: one owner (the collector's worker, or replay) calls it. ``clock`` is
    any non-decreasing number: seconds for the receiver, spans read for replay.
    """

    def __init__(
        self,
        conventions: Conventions,
        *,
        grace: float = 10.0,
        trace_timeout: float = 300.0,
        max_traces: int = 50_000,
        max_spans: int = 500_000,
        max_bytes: int = 256 * 2**20,
        remember_traces: int = 65_536,
    ) -> None:
        self.conventions = conventions
        self.grace = grace
        self.trace_timeout = trace_timeout
        self.max_traces = max_traces
        self.max_spans = max_spans
        self.max_bytes = max_bytes
        self._traces: OrderedDict[bytes, _Trace] = OrderedDict()
        self._deadlines: deque[tuple[float, bytes, int]] = deque()
        self._done: OrderedDict[bytes, set[int]] = OrderedDict()
        """Recently decided traces: trace id -> decided task span ids (idempotence)."""
        self._remember = remember_traces
        self.spans = 0
        """Spans held now (task spans and contributions)."""
        self.bytes = 0
        """Estimated bytes held now."""
        self.accepted = 0
        """Valid spans taken in; duplicates of held spans excluded."""
        self.duplicates = 0
        self.late = 0
        """Contributions no task took: they came after their task was decided."""
        self.root_tasks = 0
        self.nested_tasks = 0
        self.rootless_expired = 0
        """Traces forgotten because no task span arrived in time."""
        self.evicted = 0
        """Traces decided or dropped early because a memory bound was reached."""

    def __len__(self) -> int:
        return len(self._traces)

    # -- input ----------------------------------------------------------------------------

    def add(self, batch: Batch, now: float) -> list[Ready]:
        """Take in one request's spans; returns what eviction decided early (usually none).

        The store keeps the batch's lists as they are: the batch is not used afterwards.
        Some of them are out of garbage collection; what goes into them afterwards follows
        the rule of :class:`~otel_diary.assembly.batch.Part` (span ids, and contributions
        only into a list that is tracked when they are).
        """
        traces = self._traces
        duplicates = batch.duplicates  # copies within a part, which decoding left out
        held = size = 0
        for trace_id, span_ids, contributions, tasks, part_size in batch.parts:
            entry = traces.get(trace_id)
            if entry is None:  # the usual case: a trace's kept spans come in one part
                entry = traces[trace_id] = _Trace(now, span_ids, contributions, part_size)
                taken, taken_size = len(span_ids), part_size
            else:
                entry.last_seen = now
                traces.move_to_end(trace_id)
                taken, taken_size = self._merge(entry, span_ids, contributions, part_size)
            held += taken
            size += taken_size
            duplicates += len(span_ids) - taken
            ids = entry.ids
            for span_id, record, task_size in tasks:
                task_id = record.span_id
                decided = self._done.get(trace_id)
                # A list holds the ids of this part only, which has no copies.
                if (decided is not None and task_id in decided) or (
                        isinstance(ids, set) and span_id in ids):
                    duplicates += 1
                    continue
                if isinstance(ids, set):
                    ids.add(span_id)
                else:
                    ids.append(span_id)
                entry.tasks[task_id] = (record, task_size)
                entry.task_spans[task_id] = (record.parent_span_id, record.end_ns)
                self._deadlines.append((now + self.grace, trace_id, task_id))
                held += 1
                entry.size += task_size
                size += task_size
        self.bytes += size
        self.spans += held
        self.duplicates += duplicates
        self.accepted += batch.valid - duplicates
        return self._relieve()

    @staticmethod
    def _merge(entry: _Trace, span_ids: list[bytes], contributions: list[Contribution],
               part_size: int) -> tuple[int, int]:
        """Takes the contributions of another part of a known trace but the copies of
        spans taken before; returns how many it took and their estimated bytes.

        A list the reader left out of garbage collection must only ever hold objects that
        are too (see :class:`~otel_diary.assembly.batch.Part`): before it takes
        contributions from a list that is tracked, it becomes a new, tracked list.
        ``tests/assembly/test_untracked.py`` holds assembly to this."""
        if gc.is_tracked(contributions) and not gc.is_tracked(entry.contributions):
            entry.contributions = list(entry.contributions)
        seen = entry.ids
        if not isinstance(seen, set):
            seen = entry.ids = set(seen)
        fresh = set(span_ids)
        if len(fresh) == len(span_ids) and seen.isdisjoint(fresh):  # no copies: at once
            seen |= fresh
            entry.contributions.extend(contributions)
            entry.size += part_size
            return len(span_ids), part_size
        taken = taken_size = 0
        for span_id, contribution in zip(span_ids, contributions, strict=True):
            if span_id not in seen:
                seen.add(span_id)
                entry.contributions.append(contribution)
                taken += 1
                taken_size += contribution.size
        entry.size += taken_size
        return taken, taken_size

    def _relieve(self) -> list[Ready]:
        """Decide or drop the least recently active traces while over a bound."""
        ready: list[Ready] = []
        traces = self._traces
        while traces and (len(traces) > self.max_traces or self.spans > self.max_spans
                          or self.bytes > self.max_bytes):
            trace_id = next(iter(traces))
            entry = traces[trace_id]
            self.evicted += 1
            for task_id in list(entry.tasks):
                ready.extend(self._decide(trace_id, entry, task_id))
            if trace_id in traces:
                self._close(trace_id, entry)
        return ready

    # -- decisions ------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        return self._deadlines[0][0] if self._deadlines else None

    def due(self, now: float, limit: int | None = None) -> list[Ready]:
        """Decide every task span whose grace period is over (at most ``limit`` of them;
        :meth:`is_due` tells whether more are)."""
        ready: list[Ready] = []
        deadlines = self._deadlines
        left = len(deadlines) if limit is None else limit
        while deadlines and deadlines[0][0] <= now and left > 0:
            left -= 1
            _, trace_id, task_id = deadlines.popleft()
            entry = self._traces.get(trace_id)
            if entry is not None and task_id in entry.tasks:
                ready.extend(self._decide(trace_id, entry, task_id))
        return ready

    def is_due(self, now: float) -> bool:
        """Whether a task span's grace period is over."""
        return bool(self._deadlines) and self._deadlines[0][0] <= now

    def expire(self, now: float) -> None:
        """Forget traces idle for ``trace_timeout`` (their root task never came)."""
        traces = self._traces
        while traces:
            trace_id, entry = next(iter(traces.items()))
            if now - entry.last_seen < self.trace_timeout:
                return
            for task_id in list(entry.tasks):  # only while grace >= timeout; keep nothing
                self._decide(trace_id, entry, task_id)
            if trace_id in traces:
                self._close(trace_id, entry)

    def drain(self) -> list[Ready]:
        """Decide every waiting task span now and forget the rest (end of input, shutdown)."""
        ready: list[Ready] = []
        while self._deadlines:
            _, trace_id, task_id = self._deadlines.popleft()
            entry = self._traces.get(trace_id)
            if entry is not None and task_id in entry.tasks:
                ready.extend(self._decide(trace_id, entry, task_id))
        for trace_id, entry in list(self._traces.items()):
            self._close(trace_id, entry)
        return ready

    def _decide(self, trace_id: bytes, entry: _Trace, task_id: int) -> list[Ready]:
        record, size = entry.tasks.pop(task_id)
        self.spans -= 1
        self._release(entry, size)
        done = self._done.get(trace_id)
        if done is None:
            done = self._done[trace_id] = set()
            if len(self._done) > self._remember:
                self._done.popitem(last=False)
        done.add(task_id)
        ready: list[Ready] = []
        if self._is_nested(record.parent_span_id, entry, done):
            self.nested_tasks += 1  # its parent task's diary covers it
        else:
            self.root_tasks += 1
            ready.append((record, self._summary(entry, task_id, done)))
        if not entry.tasks:
            self._close(trace_id, entry)
        return ready

    @staticmethod
    def _is_nested(parent: int | None, entry: _Trace, done: set[int]) -> bool:
        return parent is not None and (parent in entry.task_spans or parent in done)

    def _summary(self, entry: _Trace, task_id: int, done: set[int]) -> ChildSummary:
        """What the trace's contributions add to root task ``task_id``; they are handed
        over and forgotten, as are those of root tasks decided before."""
        summary = ChildSummary()
        ends = sorted((end, span_id) for span_id, (parent, end) in entry.task_spans.items()
                      if not self._is_nested(parent, entry, done))
        last = ends[-1][1]
        kept: list[Contribution] = []
        for contribution in entry.contributions:
            owner = last
            if len(ends) > 1:
                owner = next((span_id for end, span_id in ends if contribution.end_ns <= end),
                             last)
            if owner == task_id:
                summary.add(contribution.attributes, contribution.is_error, self.conventions)
            elif owner in entry.tasks:
                kept.append(contribution)
                continue
            else:
                self.late += 1  # its task was decided before it came
            self.spans -= 1
            self._release(entry, contribution.size)
        entry.contributions = kept
        return summary

    def _release(self, entry: _Trace, size: int) -> None:
        entry.size -= size
        self.bytes -= size

    def _close(self, trace_id: bytes, entry: _Trace) -> None:
        """Forget a trace (decided, expired or evicted), counting what is lost."""
        del self._traces[trace_id]
        self.spans -= len(entry.tasks) + len(entry.contributions)
        self.bytes -= entry.size
        if trace_id in self._done:
            self.late += len(entry.contributions)  # arrived after the trace was decided
        elif not entry.task_spans:
            self.rootless_expired += 1


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


class Counters:
    """Labelled counters, safe to bump from any thread."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def add(self, name: str, label: str = "", amount: int = 1) -> None:
        with self._lock:
            key = (name, label)
            self._values[key] = self._values.get(key, 0) + amount

    def get(self, name: str, label: str = "") -> int:
        with self._lock:
            return self._values.get((name, label), 0)

    def items(self) -> list[tuple[tuple[str, str], int]]:
        with self._lock:
            return sorted(self._values.items())


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
        self._wake = threading.Event()
        self._ready_wake = threading.Event()
        self._idle = threading.Condition(self._lock)
        self._timer = threading.Thread(target=self._decide_due, name="otel-diary-assemble",
                                       daemon=True)
        self._delivery = threading.Thread(target=self._deliver, name="otel-diary-pipeline",
                                          daemon=True)
        self._timer_done = threading.Event()
        if start:
            self.start()

    def start(self) -> None:
        self._timer.start()
        self._delivery.start()

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
        """Spans and estimated bytes the store's bounds leave (none at the trace bound)."""
        store = self.store
        if len(store) >= store.max_traces:
            return 0, 0
        return (store.max_spans - store.spans - self._ready_count,
                store.max_bytes - store.bytes - self._ready_bytes)

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
                    self._wake.set()  # the timer thread may be asleep for longer
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
        if already and not self._timer.is_alive() and not self._delivery.is_alive():
            return True
        self._wake.set()
        deadline = time.monotonic() + timeout
        finished = True
        for thread in (self._timer, self._delivery):
            if thread.is_alive():
                thread.join(max(deadline - time.monotonic(), 0))
                finished = finished and not thread.is_alive()
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

    def _decide_due(self) -> None:
        store = self.store
        next_expiry = 0.0
        try:
            while True:
                deadline = store.next_deadline()
                wait = 0.5 if deadline is None else min(max(deadline - self._clock(), 0), 0.5)
                self._wake.wait(wait)
                self._wake.clear()
                now = self._clock()
                while store.is_due(now) and not self._closed:
                    with self._lock:  # a few at a time: receivers wait on this lock
                        try:
                            self._hand_over(store.due(now, DECIDE_AT_ONCE))
                        except Exception:
                            self._assembly_failed()
                            break
                with self._lock:
                    try:
                        if now >= next_expiry:
                            next_expiry = now + 1.0
                            store.expire(now)
                        if self._closed:
                            self._hand_over(store.drain())
                            return
                    except Exception:
                        self._assembly_failed()
        finally:
            self._timer_done.set()
            self._ready_wake.set()

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
        self._ready_wake.set()

    def _deliver(self) -> None:
        with suppressed():  # the pipeline's own HTTP calls (hub, model) make no spans
            self._deliver_ready()

    def _deliver_ready(self) -> None:
        while True:
            self._ready_wake.wait(0.5)
            self._ready_wake.clear()
            while True:
                with self._lock:
                    if not self._ready:
                        break
                    item, size = self._ready.popleft()
                self.pipeline.handle(item)  # never raises
                with self._idle:
                    self._ready_count -= 1
                    self._ready_bytes -= size
                    self._idle.notify_all()
            if self._timer_done.is_set() and not self._ready:
                return


_METRICS: tuple[tuple[str, str, str], ...] = (
    ("spans_received_total", "counter", "Spans in decoded OTLP requests, by protocol."),
    ("spans_accepted_total", "counter",
     "Spans taken into assembly (duplicates of held spans excluded)."),
    ("spans_rejected_total", "counter", "Spans refused, by reason."),
    ("requests_rejected_total", "counter", "Requests refused, by reason."),
    ("spans_dropped_total", "counter", "Spans accepted but not used, by reason."),
    ("tasks_total", "counter", "Task spans decided: root tasks go to the pipeline."),
    ("task_runs_failed_total", "counter", "Root task runs that failed (no diary)."),
    ("diaries_written_total", "counter", "Diaries delivered to the sinks."),
    ("traces_expired_total", "counter", "Traces forgotten before a root task span came."),
    ("traces_evicted_total", "counter", "Traces decided early because memory was full."),
    ("errors_total", "counter", "Internal errors, by stage."),
    ("open_traces", "gauge", "Traces being assembled."),
    ("held_spans", "gauge",
     "Task spans and contributions held for assembly or awaiting the pipeline."),
    ("held_bytes", "gauge", "Estimated bytes held for assembly."),
    ("pending_diaries", "gauge", "Root task spans waiting for the pipeline."),
)


def _samples(collector: Collector) -> dict[str, list[tuple[str, int]]]:
    store = collector.store
    stats = collector.pipeline.stats
    samples: dict[str, list[tuple[str, int]]] = {name: [] for name, _, _ in _METRICS}
    for (name, label), value in collector.counters.items():
        metric, _, key = name.partition(":")
        if metric in samples:
            samples[metric].append((f'{key}="{label}"' if key else "", value))
    samples["spans_accepted_total"].append(("", store.accepted))
    samples["spans_dropped_total"] += [('reason="duplicate"', store.duplicates),
                                       ('reason="late"', store.late)]
    samples["tasks_total"] += [('kind="root"', store.root_tasks),
                               ('kind="nested"', store.nested_tasks)]
    samples["task_runs_failed_total"].append(("", stats.failed_runs))
    samples["diaries_written_total"].append(("", stats.diaries))
    samples["traces_expired_total"].append(('reason="rootless"', store.rootless_expired))
    samples["traces_evicted_total"].append(("", store.evicted))
    samples["errors_total"] += [('stage="sink"', stats.sink_errors),
                                ('stage="pipeline"', stats.pipeline_errors),
                                ('stage="reflection"', stats.reflection_fallbacks),
                                ('stage="assembly"', collector.counters.get("worker_errors"))]
    samples["open_traces"].append(("", len(store)))
    samples["held_spans"].append(("", store.spans + collector.pending_diaries))
    samples["held_bytes"].append(("", max(store.bytes, 0)))
    samples["pending_diaries"].append(("", collector.pending_diaries))
    return samples


def metrics_text(collector: Collector, prefix: str = "otel_diary_") -> str:
    """The collector's counters and gauges in the Prometheus text exposition format."""
    samples = _samples(collector)
    lines: list[str] = []
    for name, kind, help_text in _METRICS:
        lines.append(f"# HELP {prefix}{name} {help_text}")
        lines.append(f"# TYPE {prefix}{name} {kind}")
        for labels, value in samples[name]:
            lines.append(f"{prefix}{name}{{{labels}}} {value}" if labels
                         else f"{prefix}{name} {value}")
    return "\n".join(lines) + "\n"


def metric_values(text: str) -> dict[str, float]:
    """``metrics_text`` parsed back: ``name{labels}`` -> value (for tests and tools)."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values
