"""Trace assembly: child spans are summarized for the task span they belong to.

Children end before their task, so every trace that has a contributing span (tokens,
models, errors, tool calls) keeps small :class:`ChildSummary` buckets, one per parent
span id, until its task spans are decided. When a plain span that has a bucket ends, its
bucket joins its parent's, so a task takes what every span below it contributed, whatever
plain spans sit between; a task alone in its trace also takes every other bucket.

A task span whose parent lives in this process waits for that parent: if the parent is
itself a task span the inner one is not a root and writes nothing, its facts counting for
the outer run. Bounded in traces and in bytes (the waiting task spans' attributes and the
text the buckets keep: captured messages, error messages and stack traces, and the names
of models, tools, agents and error types), the oldest
trace evicted past either bound, its waiting tasks released; in buckets per trace; and
in age (idle traces expire). All counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from otel_diary.assembly.batch import estimate
from otel_diary.assembly.summary import ChildSummary, Ready
from otel_diary.assembly.table import TraceTable
from otel_diary.conventions import Conventions
from otel_diary.record import SpanRecord, error_details

MAX_BUCKETS = 256
"""Distinct parents summarized per trace; beyond it contributions share one bucket."""


def _text_size(summary: ChildSummary) -> int:
    """Characters of text and names a summary keeps (its counts are not counted)."""
    return (len(summary.first_input or "") + len(summary.last_output or "")
            + len(summary.asked or "") + len(summary.answered or "")
            + len(summary.first_error or "") + len(summary.stacktrace or "") + summary.names)


def _facts(task: SpanRecord) -> Mapping[str, object]:
    """What a nested task span contributes to the run it is part of: its attributes and,
    when it failed, its status description (as ``serve`` reads it)."""
    if not task.is_error:
        return task.attributes
    return {**task.attributes, **error_details(None, task.status_message)}


@dataclass
class _Held:
    bytes: int = 0
    """What every open trace holds: its waiting task spans' and its buckets' text and names."""


@dataclass
class _Trace:
    last_seen: float
    total: _Held
    held: int = 0
    """This trace's part of ``total``."""
    buckets: dict[int | None, ChildSummary] = field(default_factory=dict)
    """Contributions by the contributing span's parent span id."""
    pending: dict[int, SpanRecord] = field(default_factory=dict)
    """Ended task spans waiting for their in-process parent to end, by span id."""
    weights: dict[int, int] = field(default_factory=dict)
    """The estimated bytes of each waiting task span, by span id."""
    waiting_on: dict[int, list[int]] = field(default_factory=dict)
    """Parent span id -> pending task span ids under it."""
    pending_since: float = 0.0

    def bucket(self, parent_span_id: int | None) -> ChildSummary:
        summary = self.buckets.get(parent_span_id)  # one lookup per contributing span
        if summary is None:
            if len(self.buckets) >= MAX_BUCKETS:
                parent_span_id = None  # past the bound, new parents share one bucket
            summary = self.buckets.setdefault(parent_span_id, ChildSummary())
        return summary

    def hold(self, size: int) -> None:
        self.held += size
        self.total.bytes += size

    def take(self, task_span_id: int, rest: bool) -> ChildSummary:
        """The summary of a task's direct children; with ``rest`` also every other bucket."""
        summary = self.buckets.pop(task_span_id, None) or ChildSummary()
        taken = _text_size(summary)
        if rest:
            for bucket in self.buckets.values():
                taken += _text_size(bucket)
                summary.merge(bucket)
            self.buckets.clear()
        self.hold(-taken)
        return summary

    def wait(self, record: SpanRecord, weight: int) -> None:
        """Keep an ended task span until its parent's verdict."""
        self.pending[record.span_id] = record
        self.hold(weight - self.weights.get(record.span_id, 0))  # a span id seen again
        self.weights[record.span_id] = weight

    def unwait(self, span_id: int) -> SpanRecord | None:
        """The waiting task span ``span_id``, no longer kept (None if not waiting)."""
        self.hold(-self.weights.pop(span_id, 0))
        return self.pending.pop(span_id, None)

    def unwait_all(self) -> list[SpanRecord]:
        """Every waiting task span, no longer kept."""
        tasks = list(self.pending.values())
        self.hold(-sum(self.weights.values()))
        self.pending.clear()
        self.weights.clear()
        self.waiting_on.clear()
        return tasks

    def release(self, tasks: list[SpanRecord]) -> list[Ready]:
        """Each task takes its own children; a lone task also takes the rest of the trace."""
        return [(task, self.take(task.span_id, rest=len(tasks) == 1)) for task in tasks]


class TraceAssembler:
    """Groups what a task's child spans contributed until the root task span is decided.

    Not thread-safe: one worker owns it.
    """

    def __init__(
        self,
        conventions: Conventions,
        *,
        max_traces: int = 4096,
        max_bytes: int = 64 * 1024 * 1024,
        trace_ttl_s: float = 3600.0,
        pending_timeout_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._conventions = conventions
        self._traces: TraceTable[int, _Trace] = TraceTable()
        self._max_traces = max_traces
        self._max_bytes = max_bytes
        self._held = _Held()
        self._texts = bool(conventions.input_messages or conventions.output_messages)
        """Whether contributions may keep captured messages (else only failures keep
        text)."""
        self._ttl = trace_ttl_s
        self._pending_timeout = pending_timeout_s
        self._clock = clock
        self._released: list[Ready] = []
        self._ended_tasks: dict[tuple[int, int | None], None] = {}
        """Recently ended task spans (bounded), to recognize a late nested one."""
        self.late_nested = 0
        """Nested task spans that ended after their parent task span: nothing written."""
        self.evicted = 0
        """Traces dropped because ``max_traces`` were open or they held more than
        ``max_bytes`` (their tasks' summaries are lost, their waiting tasks released)."""
        self.expired = 0
        """Traces forgotten after ``trace_ttl_s`` without activity."""

    def __len__(self) -> int:
        return len(self._traces)

    def __contains__(self, trace_id: int) -> bool:
        return trace_id in self._traces

    @property
    def held_bytes(self) -> int:
        """Estimated bytes the open traces hold (waiting task spans, buckets' text)."""
        return self._held.bytes

    @property
    def has_released(self) -> bool:
        """Whether evicted traces left task spans for :meth:`take_released`."""
        return bool(self._released)

    def take_released(self) -> list[Ready]:
        """The task spans evicted traces released (:meth:`expire` hands them out too)."""
        ready, self._released = self._released, []
        return ready

    def _forget(self, trace_id: int) -> None:
        """Close a trace: what it holds no longer counts (nor what it later gives up)."""
        entry = self._traces.pop(trace_id)
        self._held.bytes -= entry.held
        entry.held, entry.total = 0, _Held()

    def _evict_oldest(self) -> None:
        """Drop the trace seen longest ago; its waiting task spans are released (without
        their parent's verdict), not lost: :meth:`take_released` hands them out."""
        trace_id, oldest = next(iter(self._traces.items()))
        self._forget(trace_id)
        self.evicted += 1
        self._released.extend(oldest.release(oldest.unwait_all()))

    def _within_bytes(self) -> None:
        while self._held.bytes > self._max_bytes and self._traces:
            self._evict_oldest()

    def _touch(self, trace_id: int) -> _Trace:
        """The trace's entry, made the youngest (created if new, evicting the oldest)."""
        traces = self._traces
        now = self._clock()
        entry = traces.get(trace_id)
        if entry is not None:
            traces.touch(trace_id, entry, now)
            return entry
        if len(traces) >= self._max_traces:
            self._evict_oldest()
        entry = traces[trace_id] = _Trace(last_seen=now, total=self._held)
        return entry

    def contribute(self, trace_id: int, attributes: Mapping[str, object], is_error: bool,
                   parent_span_id: int | None = None, end_ns: int = 0,
                   span_id: int | None = None) -> None:
        """Fold a non-task span into its trace, under its parent, with what the spans
        under it (``span_id``) contributed as ``below`` (see :meth:`ChildSummary.add`)."""
        entry = self._touch(trace_id)
        summary = entry.bucket(parent_span_id)
        below = entry.buckets.get(span_id) if span_id is not None else None
        if span_id is not None and entry.waiting_on:
            waiting = entry.waiting_on.get(span_id)
            if waiting:  # task spans under it, kept apart until their run's task ends
                below = self._with_tasks(entry, below, waiting)
        if not (is_error or self._texts):  # the common case: no text kept, a name at most
            names = summary.names
            summary.add(attributes, is_error, self._conventions, end_ns, below)
            if summary.names != names:
                entry.hold(summary.names - names)
                self._within_bytes()
            return
        before = _text_size(summary)
        summary.add(attributes, is_error, self._conventions, end_ns, below)
        grown = _text_size(summary) - before
        if grown:
            entry.hold(grown)
            self._within_bytes()

    def _with_tasks(self, entry: _Trace, below: ChildSummary | None,
                    waiting: list[int]) -> ChildSummary:
        """What ``below`` and the waiting task spans ``waiting`` (their own usage and
        failure, and their children's) add up to, as ``serve`` counts what is under a
        span: only the counts :meth:`ChildSummary.add` reads of ``below``."""
        under = ChildSummary()
        for part in (below, *(entry.buckets.get(task_id) for task_id in waiting)):
            if part is not None:
                under.add_counts(part)
        for task_id in waiting:
            task = entry.pending.get(task_id)
            if task is not None:
                own = ChildSummary()
                own.add(_facts(task), task.is_error, self._conventions, task.end_ns,
                        entry.buckets.get(task_id))
                under.add_counts(own)
        return under

    def task_ended(self, record: SpanRecord, *, parent_ended: bool = False,
                   weight: int | None = None) -> list[Ready]:
        """A task span ended: ready at once when it is a local root, else it waits.

        A task span that ends after its parent task span (fire-and-forget work) is part
        of that run, whose diary is already written: it writes nothing and is counted.
        One whose parent is known to have ended (``parent_ended``: a plain span, say a
        request that started it in the background and answered) waits for nothing: it is
        ready at once with what its own children contributed. ``weight``: the record's
        estimated bytes, if known.
        """
        ended = self._ended_tasks
        ended[(record.trace_id, record.span_id)] = None
        if len(ended) > self._max_traces:
            del ended[next(iter(ended))]
        if (record.trace_id, record.parent_span_id) in ended:
            self.late_nested += 1
            return []
        entry = self._touch(record.trace_id)
        # Task spans that waited on this one are nested: the outer run owns them, their
        # own facts and their children's.
        for nested_id in entry.waiting_on.pop(record.span_id, ()):
            nested = entry.unwait(nested_id)
            if nested is not None:
                inner = entry.take(nested.span_id, rest=False)
                inner.add(_facts(nested), nested.is_error, self._conventions,
                          nested.end_ns, below=inner, started_ns=nested.start_ns)
                outer = entry.bucket(record.span_id)
                before = _text_size(outer)
                outer.merge(inner)
                entry.hold(_text_size(outer) - before)  # what it took was given up
        if record.is_local_root:
            ready = [(task, entry.take(task.span_id, rest=False))
                     for task in entry.unwait_all()]
            self._forget(record.trace_id)
            return [(record, entry.take(record.span_id, rest=True)), *ready]
        if parent_ended:
            ready = [(record, entry.take(record.span_id, rest=False))]
            if not (entry.buckets or entry.pending):
                self._forget(record.trace_id)
            return ready
        entry.wait(record, estimate(record.attributes) if weight is None else weight)
        if not entry.pending_since:
            entry.pending_since = entry.last_seen
        assert record.parent_span_id is not None
        entry.waiting_on.setdefault(record.parent_span_id, []).append(record.span_id)
        self._within_bytes()
        return []

    def span_ended(self, trace_id: int, span_id: int, is_local_root: bool,
                   parent_span_id: int | None = None) -> list[Ready]:
        """A non-task span of a known trace ended. What its children contributed, and task
        spans that waited on it, move to its parent (``parent_span_id``): a task span
        further up owns them, else the local root releases the tasks as roots. Without a
        parent to wait on, they are released."""
        entry = self._traces.get(trace_id)
        if entry is None:
            return []
        if parent_span_id is not None:  # what was contributed below it goes up a level
            below = entry.buckets.pop(span_id, None)
            if below is not None:
                above = entry.bucket(parent_span_id)
                if entry.held:  # some text is kept: the merge may keep less
                    before = _text_size(above) + _text_size(below)
                    above.merge(below)
                    entry.hold(_text_size(above) - before)
                else:
                    above.merge(below)
        if not (is_local_root or entry.waiting_on):  # the common case: nobody waits on it
            if not entry.pending:
                entry.pending_since = 0.0
            return []
        waiters = entry.waiting_on.pop(span_id, [])
        if waiters and parent_span_id is not None and not is_local_root:
            entry.waiting_on.setdefault(parent_span_id, []).extend(waiters)
            waiters = []
        released = [task for task in map(entry.unwait, waiters) if task is not None]
        if is_local_root:
            released.extend(entry.unwait_all())
            self._forget(trace_id)
        elif not entry.pending:
            entry.pending_since = 0.0
        return entry.release(released)

    def expire(self) -> list[Ready]:
        """Forget idle traces; release task spans that waited past the pending timeout.

        O(open traces): the worker calls it about once a second.
        """
        now = self._clock()
        ready = self.take_released()
        traces = self._traces
        for trace_id in list(traces):
            entry = traces[trace_id]
            idle = now - entry.last_seen >= self._ttl
            if entry.pending and (idle or now - entry.pending_since >= self._pending_timeout):
                ready.extend(entry.release(entry.unwait_all()))
                entry.pending_since = 0.0
            if idle:
                self._forget(trace_id)
                self.expired += 1
        return ready

    def drain(self) -> list[Ready]:
        """Release every waiting task span (used at shutdown: nothing is lost)."""
        ready = self.take_released()
        for entry in self._traces.values():
            ready.extend(entry.release(entry.unwait_all()))
        self._traces.clear()
        self._held.bytes = 0
        return ready
