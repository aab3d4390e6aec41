"""Trace assembly: child spans are summarized under the trace of their task span.

Children end before their task, so every trace that has a contributing span (tokens,
models, errors, tool calls) keeps a small :class:`ChildSummary` until its task span or its
local root ends. A task span whose parent lives in this process waits for that parent:
if the parent is itself a task span the inner one is not a root and writes nothing.
Bounded in traces (oldest evicted) and in age (idle traces expire); all counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ._classify import ChildSummary
from ._conventions import Conventions
from ._record import SpanRecord

Ready = tuple[SpanRecord, ChildSummary]
"""A root task span with the summary of its children, ready to classify."""


@dataclass
class _Trace:
    touched: float
    summary: ChildSummary = field(default_factory=ChildSummary)
    pending: dict[int, SpanRecord] = field(default_factory=dict)
    """Ended task spans waiting for their in-process parent to end, by span id."""
    waiting_on: dict[int, list[int]] = field(default_factory=dict)
    """Parent span id -> pending task span ids under it."""
    pending_since: float = 0.0

    def take_summary(self) -> ChildSummary:
        summary, self.summary = self.summary, ChildSummary()
        return summary


class TraceAssembler:
    """Groups what a task's child spans contributed until the root task span is decided.

    Not thread-safe: one worker owns it.
    """

    def __init__(
        self,
        conventions: Conventions,
        *,
        max_traces: int = 4096,
        trace_ttl_s: float = 3600.0,
        pending_timeout_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._conventions = conventions
        self._traces: dict[int, _Trace] = {}
        self._max_traces = max_traces
        self._ttl = trace_ttl_s
        self._pending_timeout = pending_timeout_s
        self._clock = clock
        self._released: list[Ready] = []
        self.evicted = 0
        """Traces dropped because ``max_traces`` were open (their tasks' summaries are lost)."""
        self.expired = 0
        """Traces forgotten after ``trace_ttl_s`` without activity."""

    def __len__(self) -> int:
        return len(self._traces)

    def __contains__(self, trace_id: int) -> bool:
        return trace_id in self._traces

    def _touch(self, trace_id: int) -> _Trace:
        """The trace's entry, moved to the young end (created if new, evicting the oldest)."""
        traces = self._traces
        entry = traces.pop(trace_id, None)
        now = self._clock()
        if entry is None:
            if len(traces) >= self._max_traces:
                oldest = traces.pop(next(iter(traces)))
                self.evicted += 1
                # Its waiting task spans are released (without their parent's verdict),
                # not lost: the next expire() hands them out.
                self._released.extend((task, oldest.take_summary())
                                      for task in oldest.pending.values())
            entry = _Trace(touched=now)
        entry.touched = now
        traces[trace_id] = entry
        return entry

    def contribute(self, trace_id: int, attributes: Mapping[str, object], is_error: bool) -> None:
        """Fold a non-task span into its trace's summary."""
        self._touch(trace_id).summary.add(attributes, is_error, self._conventions)

    def task_ended(self, record: SpanRecord) -> list[Ready]:
        """A task span ended: ready at once when it is a local root, else it waits."""
        entry = self._touch(record.trace_id)
        ready: list[Ready] = []
        # Task spans that waited on this one are nested: the outer run owns them.
        for nested in entry.waiting_on.pop(record.span_id, ()):
            entry.pending.pop(nested, None)
        if record.is_local_root:
            ready.append((record, entry.take_summary()))
            ready.extend((task, ChildSummary()) for task in entry.pending.values())
            del self._traces[record.trace_id]
            return ready
        entry.pending[record.span_id] = record
        if not entry.pending_since:
            entry.pending_since = entry.touched
        assert record.parent_span_id is not None
        entry.waiting_on.setdefault(record.parent_span_id, []).append(record.span_id)
        return ready

    def span_ended(self, trace_id: int, span_id: int, is_local_root: bool) -> list[Ready]:
        """A non-task span of a known trace ended: release tasks that waited on it."""
        entry = self._traces.get(trace_id)
        if entry is None:
            return []
        ready: list[Ready] = []
        for task_span_id in entry.waiting_on.pop(span_id, ()):
            task = entry.pending.pop(task_span_id, None)
            if task is not None:
                ready.append((task, entry.take_summary()))
        if is_local_root:
            ready.extend((task, entry.take_summary()) for task in entry.pending.values())
            del self._traces[trace_id]
        elif not entry.pending:
            entry.pending_since = 0.0
        return ready

    def expire(self) -> list[Ready]:
        """Forget idle traces; release task spans that waited past the pending timeout.

        O(open traces): the worker calls it about once a second.
        """
        now = self._clock()
        ready, self._released = self._released, []
        traces = self._traces
        for trace_id in list(traces):
            entry = traces[trace_id]
            idle = now - entry.touched >= self._ttl
            if entry.pending and (idle or now - entry.pending_since >= self._pending_timeout):
                ready.extend((task, entry.take_summary()) for task in entry.pending.values())
                entry.pending.clear()
                entry.waiting_on.clear()
                entry.pending_since = 0.0
            if idle:
                del traces[trace_id]
                self.expired += 1
        return ready

    def drain(self) -> list[Ready]:
        """Release every waiting task span (used at shutdown: nothing is lost)."""
        ready, self._released = self._released, []
        for entry in self._traces.values():
            ready.extend((task, entry.take_summary()) for task in entry.pending.values())
        self._traces.clear()
        return ready
