"""Trace assembly across requests: task spans and contributions in, root tasks out.

Spans of a trace arrive in any order, split over requests, sometimes twice. Decoding
keeps only task spans and spans that contribute to a task (tokens, models, tool calls,
errors); of every other span only its parent link (16 bytes) is kept, while its trace is
open. A task span is decided a grace period after it arrived: it is a root task when no
task span of the trace is among its ancestors (followed through the parent links of the
plain spans in between), and goes to the pipeline with what the trace's contributions
add up to. The links of traces nothing is held of are kept a while too, the oldest
forgotten past :data:`MAX_STRAY_BYTES` (most such traces never hold a task span): an
ancestor reached only through a forgotten one is not seen.

Trade-offs: contributions are not traced up to their task. Within a trace one goes to
the root task that ends next after it, else to the one that ends last -- as in-process,
where a local root task span takes what ended before it. With one root task per trace
(the common case) that is every contribution; a task nested in another task counts for
the outer one; two root tasks running at the same time in one trace may take some of
each other's contributions. Copies of plain spans are not told apart (only their links
are held): only duplicates of held spans are counted.

Memory is bounded in traces, held spans (task spans and contributions) and estimated
bytes; the receiver's admission (:mod:`otel_diary.receiver.admission`) sheds load at them.
A trace holding contributions but no task span takes no place a task needs: at a bound,
those traces are evicted first (oldest first, counted), and admission counts what they
hold as room.
"""

from __future__ import annotations

import gc
import logging
from bisect import bisect_left
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from otel_diary.assembly.batch import Batch, Contribution
from otel_diary.assembly.covered import covered
from otel_diary.assembly.summary import ChildSummary, Ready
from otel_diary.assembly.table import LINK_BYTES, LINKS_OVERHEAD, Ancestry, TraceTable
from otel_diary.conventions import Conventions
from otel_diary.record import SpanRecord, error_details

logger = logging.getLogger("otel_diary")


@dataclass(slots=True)
class _Trace:
    last_seen: float
    ids: list[bytes] | set[bytes]
    """Span ids of every task span and contribution taken (deduplication): while they came
    in one part (decoding leaves no copies within a part), the list of its contributions'
    (``contribution_ids``), a set of them all once another part came."""
    contributions: list[Contribution]
    """Contributions not yet handed to a task."""
    contribution_ids: list[bytes]
    """The span id of each contribution, in the same order (to find those above others)."""
    size: int
    tasks: dict[int, tuple[SpanRecord, int]] = field(default_factory=dict)
    """Task spans not decided yet, by span id, with their estimated bytes."""
    task_spans: dict[int, tuple[int | None, int]] = field(default_factory=dict)
    """Every task span seen, decided or not: span id -> (parent span id, end time)."""
    links: list[bytes] = field(default_factory=list)
    """Parent links of the trace's spans (see :class:`~otel_diary.assembly.table.Ancestry`)."""
    link_count: int = 0
    starts: dict[bytes, int] | None = None
    """When each nested task span taken in as a contribution started, by span id (its
    agent ranks by it: see ``ChildSummary.agents``); within the contribution's size."""


MAX_LINKS = 2**17
"""Parent links a trace holds at most (2 MiB): past them a plain span's link is dropped
(counted), and a task span reached only through it is taken for a root."""


STRAY_TRACE_BYTES = 250
"""Estimated memory of a trace's entry among the links kept aside, besides its links."""
MAX_STRAY_BYTES = 4 * 2**20
"""Parent links of traces nothing is held of, kept in case a task span of theirs comes
later (the oldest forgotten first, as the ordinary fate of traces that have none): a plain
span between two task spans that comes first (another service's, exported sooner) still
tells that the inner one is nested."""


def _stray_size(runs: list[bytes]) -> int:
    """The estimated memory of a trace's links kept aside (see :data:`STRAY_TRACE_BYTES`)."""
    return STRAY_TRACE_BYTES + sum(LINKS_OVERHEAD + len(links) for links in runs)


@dataclass(slots=True)
class _View:
    """What the decisions of one call read of a trace, which takes in nothing meanwhile:
    its ancestry (each span walked once however many tasks are decided), and its root
    task spans by end time (``None`` until a root task needs them)."""

    entry: _Trace
    ancestry: Ancestry
    ends: list[tuple[int, int]] | None = None
    groups: dict[int, list[int]] | None = None
    """Root task -> where in ``items`` the contributions it takes are (``None`` until a
    root task is decided): each contribution's owner is found once, not at every task."""
    items: list[tuple[bytes, Contribution]] = field(default_factory=list)
    """The trace's contributions grouped so far (span id, contribution), in their order."""
    seen: int = 0
    """How many of the trace's contributions are in ``items``; the trace's lists keep
    those taken until :meth:`TraceStore._settle`."""
    absorbed: bool = False
    """Whether the nested task spans not decided yet were taken in (before a root task)."""


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
        self._traces: TraceTable[bytes, _Trace] = TraceTable()
        self._deadlines: deque[tuple[float, bytes, int]] = deque()
        self._done: OrderedDict[bytes, set[int]] = OrderedDict()
        """Recently decided traces: trace id -> decided task span ids (idempotence)."""
        self._remember = remember_traces
        self._taskless: OrderedDict[bytes, None] = OrderedDict()
        """Traces holding no task span (contributions only), least recently active first."""
        self.taskless_spans = 0
        """Contributions held in traces without a task span: room for a task if needed."""
        self.taskless_bytes = 0
        """Estimated bytes of those traces."""
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
        """Traces with task spans decided early because a memory bound was reached."""
        self.evicted_taskless = 0
        """Traces without a task span dropped to make room at a bound."""
        self.taskless_dropped = 0
        """Contributions dropped with them."""
        self.links_dropped = 0
        """Parent links dropped: their trace held ``MAX_LINKS`` already."""
        self._strays: OrderedDict[bytes, list[bytes]] = OrderedDict()
        """Parent links of traces nothing is held of, least recently come first."""
        self._stray_bytes = 0
        self._views: dict[bytes, _View] = {}
        """The views of the traces decided in the call under way (emptied after it)."""
        self._read = 0
        """Parent links, task spans and contributions of the traces those views read."""
        self.on_close: Callable[[bytes], None] | None = None
        """Told the id of every trace the store forgets (decided, expired or evicted): the
        collector compacts the trace's journal rows once its diaries are written."""

    def __len__(self) -> int:
        return len(self._traces)

    def holds(self, trace_id: bytes) -> bool:
        """Whether anything of the trace is held."""
        return trace_id in self._traces

    @property
    def taskless_traces(self) -> int:
        """Open traces holding no task span: the first to go at a bound."""
        return len(self._taskless)

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
        fresh: list[tuple[bytes, _Trace]] = []
        for trace_id, span_ids, contributions, tasks, part_size in batch.parts:
            entry = traces.get(trace_id)
            if entry is None:  # the usual case: a trace's kept spans come in one part
                entry = traces[trace_id] = _Trace(now, span_ids, contributions, span_ids,
                                                  part_size)
                taken, taken_size = len(span_ids), part_size
                if self._strays:
                    fresh.append((trace_id, entry))
            else:
                traces.touch(trace_id, entry, now)
                self._not_taskless(trace_id, entry)  # counted again below if still so
                taken, taken_size = self._merge(entry, span_ids, contributions, part_size)
            held += taken
            size += taken_size
            duplicates += len(span_ids) - taken
            ids = entry.ids
            for span_id, record, task_size in tasks:
                task_id = record.span_id
                decided = self._done.get(trace_id)
                # A list holds the ids of this part only, which has no copies; a task span
                # of another part is found in the set made of them all (see _merge).
                if (decided is not None and task_id in decided) or (
                        isinstance(ids, set) and span_id in ids):
                    duplicates += 1
                    continue
                if isinstance(ids, set):
                    ids.add(span_id)
                entry.tasks[task_id] = (record, task_size)
                entry.task_spans[task_id] = (record.parent_span_id,
                                             record.end_ns or record.start_ns)
                self._deadlines.append((now + self.grace, trace_id, task_id))
                held += 1
                entry.size += task_size
                size += task_size
            if not entry.tasks:
                self._taskless[trace_id] = None  # the youngest of them
                self.taskless_spans += len(entry.contributions)
                self.taskless_bytes += entry.size
        for trace_id, entry in fresh:  # the links that came before anything it holds
            runs = self._strays.pop(trace_id, None)
            if runs is not None:
                self._stray_bytes -= _stray_size(runs)
                for links in runs:
                    size += self._link(trace_id, entry, links)
        for trace_id, links in batch.links:
            entry = traces.get(trace_id)
            if entry is not None:
                size += self._link(trace_id, entry, links)
            else:  # of a trace nothing is held of: kept a while, in case
                self._stray(trace_id, links)
        self.bytes += size
        self.spans += held
        self.duplicates += duplicates
        self.accepted += batch.valid - duplicates
        try:
            return self._relieve()
        finally:
            self._end_views()

    def _link(self, trace_id: bytes, entry: _Trace, links: bytes) -> int:
        """Keep ``links`` of a held trace, as far as ``MAX_LINKS`` allows; returns the
        estimated bytes taken."""
        count = len(links) // LINK_BYTES
        if entry.link_count + count > MAX_LINKS:
            room = max(MAX_LINKS - entry.link_count, 0)
            self.links_dropped += count - room
            count, links = room, links[:room * LINK_BYTES]
            if not count:
                return 0
        entry.link_count += count
        entry.links.append(links)
        link_size = LINKS_OVERHEAD + len(links)
        entry.size += link_size
        if trace_id in self._taskless:
            self.taskless_bytes += link_size
        return link_size

    def _stray(self, trace_id: bytes, links: bytes) -> None:
        """Keep the links of a trace nothing is held of, the oldest forgotten past
        :data:`MAX_STRAY_BYTES` (estimated memory, not only the links' bytes)."""
        strays = self._strays
        runs = strays.get(trace_id)
        if runs is None:
            runs = strays[trace_id] = []
            self._stray_bytes += STRAY_TRACE_BYTES
        else:
            strays.move_to_end(trace_id)
        runs.append(links)
        self._stray_bytes += LINKS_OVERHEAD + len(links)
        while self._stray_bytes > MAX_STRAY_BYTES:
            _, forgotten = strays.popitem(last=False)
            self._stray_bytes -= _stray_size(forgotten)

    def strays(self, trace_ids: Iterable[bytes]) -> list[tuple[bytes, bytes]]:
        """The links kept aside of ``trace_ids`` (traces nothing is held of yet), which a
        request holding spans of them is about to take: journaled with it, so that a
        restart replays them too."""
        strays = self._strays
        if not strays:
            return []
        return [(trace_id, links) for trace_id in trace_ids
                for links in strays.get(trace_id, ())]

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
        if not isinstance(seen, set):  # the first part's contributions, and its task spans
            seen = entry.ids = set(seen)
            seen.update(task_id.to_bytes(8, "big") for task_id in entry.task_spans)
        fresh = set(span_ids)
        if len(fresh) == len(span_ids) and seen.isdisjoint(fresh):  # no copies: at once
            seen |= fresh
            entry.contributions.extend(contributions)
            entry.contribution_ids.extend(span_ids)
            entry.size += part_size
            return len(span_ids), part_size
        taken = taken_size = 0
        for span_id, contribution in zip(span_ids, contributions, strict=True):
            if span_id not in seen:
                seen.add(span_id)
                entry.contributions.append(contribution)
                entry.contribution_ids.append(span_id)
                taken += 1
                taken_size += contribution.size
        entry.size += taken_size
        return taken, taken_size

    def _not_taskless(self, trace_id: bytes, entry: _Trace) -> None:
        """Stop counting ``entry`` among the traces without a task span (if it was)."""
        if self._taskless.pop(trace_id, 0) is None:
            self.taskless_spans -= len(entry.contributions)
            self.taskless_bytes -= entry.size

    def _relieve(self) -> list[Ready]:
        """While over a bound, drop the least recently active trace without a task span,
        else decide or drop the least recently active trace."""
        ready: list[Ready] = []
        traces = self._traces
        while traces and (len(traces) > self.max_traces or self.spans > self.max_spans
                          or self.bytes > self.max_bytes):
            if self._taskless:
                trace_id = next(iter(self._taskless))
                entry = traces[trace_id]
                self.evicted_taskless += 1
                self.taskless_dropped += len(entry.contributions)
                self._close(trace_id, entry, expired=False)
                continue
            trace_id, entry = traces.oldest()
            self.evicted += 1
            while entry.tasks:  # deciding the root task takes in the tasks nested in it
                ready.extend(self._decide(trace_id, entry, next(iter(entry.tasks))))
            if trace_id in traces:
                self._close(trace_id, entry)
        return ready

    # -- decisions ------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        return self._deadlines[0][0] if self._deadlines else None

    def due(self, now: float, limit: int | None = None,
            budget: int | None = None) -> list[Ready]:
        """Decide every task span whose grace period is over (at most ``limit`` of them;
        :meth:`is_due` tells whether more are).

        A decision reads its whole trace (parent links, task spans, contributions) once
        per call, whatever the number of its tasks decided in the call. With ``budget``,
        no trace is read anew once the traces read in the call held that many: the tasks
        of the others wait for the next call, so no call takes long (traces of a hundred
        thousand spans cost tens of milliseconds each)."""
        ready: list[Ready] = []
        deadlines = self._deadlines
        left = len(deadlines) if limit is None else limit
        self._read = 0
        try:
            while deadlines and deadlines[0][0] <= now and left > 0:
                trace_id = deadlines[0][1]
                if budget is not None and self._read >= budget and \
                        trace_id not in self._views:
                    break
                left -= 1
                _, trace_id, task_id = deadlines.popleft()
                entry = self._traces.get(trace_id)
                if entry is not None and task_id in entry.tasks:
                    ready.extend(self._decide(trace_id, entry, task_id))
        finally:
            self._end_views()
        return ready

    def is_due(self, now: float) -> bool:
        """Whether a task span's grace period is over."""
        return bool(self._deadlines) and self._deadlines[0][0] <= now

    def expire(self, now: float) -> None:
        """Forget traces idle for ``trace_timeout`` (their root task never came). A trace
        with a task span waiting for its grace period (a grace longer than the timeout)
        is kept: its task is decided when the grace ends, as any other."""
        traces = self._traces
        while traces.idle(now, self.trace_timeout):
            trace_id, entry = traces.oldest()
            if entry.tasks:
                traces.touch(trace_id, entry, now)
            else:
                self._close(trace_id, entry)

    def drain(self, *, shutdown: bool = False) -> list[Ready]:
        """Decide every waiting task span now and forget the rest (end of input, shutdown).

        At ``shutdown`` the traces left (contributions whose task span has not come) are
        not reported to ``on_close``: what the journal holds of them stays for the next
        start, whose requests may bring their task spans."""
        ready: list[Ready] = []
        try:
            while self._deadlines:
                _, trace_id, task_id = self._deadlines.popleft()
                entry = self._traces.get(trace_id)
                if entry is not None and task_id in entry.tasks:
                    ready.extend(self._decide(trace_id, entry, task_id))
        finally:
            self._end_views()
        for trace_id, entry in list(self._traces.items()):
            self._close(trace_id, entry, notify=not shutdown)
        return ready

    def _take_task(self, entry: _Trace, task_id: int) -> SpanRecord:
        """The waiting task span ``task_id`` of ``entry``, no longer held."""
        record, size = entry.tasks.pop(task_id)
        self.spans -= 1
        self._release(entry, size)
        return record

    def _decide(self, trace_id: bytes, entry: _Trace, task_id: int) -> list[Ready]:
        record = self._take_task(entry, task_id)
        done = self._done.get(trace_id)
        if done is None:
            done = self._done[trace_id] = set()
            if len(self._done) > self._remember:
                self._done.popitem(last=False)
        done.add(task_id)
        ready: list[Ready] = []
        view = self._views.get(trace_id)
        if view is None:
            view = self._views[trace_id] = _View(entry, self._ancestry(entry, done))
            self._read += entry.link_count + len(entry.task_spans) + len(entry.contributions)
        nested = view.ancestry.nested
        if nested(record.parent_span_id):
            self._absorb(entry, record)
        else:
            if entry.tasks and not view.absorbed:
                # A nested task span that came after this one, within its grace, is part of
                # this run: it is taken in now, as if it had come first.
                view.absorbed = True
                for other in [other for other, (task, _) in entry.tasks.items()
                              if nested(task.parent_span_id)]:
                    done.add(other)
                    self._absorb(entry, self._take_task(entry, other))
            self.root_tasks += 1
            ready.append((record, self._summary(entry, task_id, view)))
        if not entry.tasks:
            self._settle(view)
            del self._views[trace_id]  # nothing more to decide: let it go
            self._close(trace_id, entry)
        return ready

    def _absorb(self, entry: _Trace, record: SpanRecord) -> None:
        """Take the nested task span ``record`` in as a contribution: its parent task's
        diary covers it, and takes its facts."""
        self.nested_tasks += 1
        keys = self.conventions.child_keys  # what a decoded contribution keeps too
        markers = self.conventions.task_markers  # it was a run of its own
        content = self.conventions.content_keys
        facts: dict[str, object] = {key: value for key, value in record.attributes.items()
                                    if key in keys or key in markers or key in content}
        if record.is_error:
            facts.update(error_details(None, record.status_message))
        nested = Contribution(facts, record.is_error, record.end_ns or record.start_ns)
        if not gc.is_tracked(entry.contributions):  # see Part: a new tuple is tracked
            entry.contributions = list(entry.contributions)
        entry.contributions.append(nested)
        span_id = record.span_id.to_bytes(8, "big")
        entry.contribution_ids.append(span_id)
        if entry.starts is None:
            entry.starts = {}
        entry.starts[span_id] = record.start_ns
        entry.size += nested.size
        self.bytes += nested.size
        self.spans += 1

    def _end_views(self) -> None:
        """The call's decisions are done: each trace's lists keep what is left of them."""
        for view in self._views.values():
            self._settle(view)
        self._views.clear()

    @staticmethod
    def _settle(view: _View) -> None:
        """Leave in the trace's lists only the contributions no root task took."""
        if view.groups is None:
            return
        entry, items = view.entry, view.items
        left = sorted(at for group in view.groups.values() for at in group)
        entry.contribution_ids = [items[at][0] for at in left] + \
            entry.contribution_ids[view.seen:]
        entry.contributions = [items[at][1] for at in left] + entry.contributions[view.seen:]
        view.groups, view.items, view.seen = None, [], 0

    @staticmethod
    def _ancestry(entry: _Trace, done: set[int]) -> Ancestry:
        task_spans = entry.task_spans
        return Ancestry(lambda span_id: span_id in task_spans or span_id in done,
                        entry.links)

    def _summary(self, entry: _Trace, task_id: int, view: _View) -> ChildSummary:
        """What the trace's contributions add to root task ``task_id``; they are handed
        over and forgotten, as are those of root tasks decided before."""
        summary = ChildSummary()
        ends = view.ends
        if ends is None:
            nested = view.ancestry.nested
            ends = view.ends = sorted(
                (end, span_id) for span_id, (parent, end) in entry.task_spans.items()
                if not nested(parent))
        if len(ends) == 1:  # the usual case: it takes every one
            owned = list(zip(entry.contribution_ids, entry.contributions, strict=True))
            entry.contribution_ids, entry.contributions = [], []
        else:
            if view.groups is None:
                view.groups = {}
            if view.seen < len(entry.contributions):
                self._group(entry, view, ends, task_id)
            items = view.items
            owned = [items[at] for at in view.groups.pop(task_id, ())]
        for _, contribution in owned:
            self.spans -= 1
            self._release(entry, contribution.size)
        below = covered(owned, view.ancestry, task_id, self.conventions)
        starts = entry.starts  # handed over with their contributions
        for span_id, contribution in owned:
            summary.add(contribution.attributes, contribution.is_error, self.conventions,
                        contribution.end_ns, below.get(span_id) if below else None,
                        starts.pop(span_id, None) if starts else None)
        return summary

    def _group(self, entry: _Trace, view: _View, ends: list[tuple[int, int]],
               task_id: int) -> None:
        """Group the trace's contributions not grouped yet by the root task that takes
        each: the first to end at or after it, else the last. One whose task was decided
        before it came is forgotten."""
        assert view.groups is not None
        groups, items, tasks = view.groups, view.items, entry.tasks
        last = ends[-1][1]
        for span_id, contribution in zip(entry.contribution_ids[view.seen:],
                                         entry.contributions[view.seen:], strict=True):
            owner = last
            if len(ends) > 1:
                at = bisect_left(ends, (contribution.end_ns,))
                if at < len(ends):
                    owner = ends[at][1]
            if owner == task_id or owner in tasks:
                groups.setdefault(owner, []).append(len(items))
                items.append((span_id, contribution))
            else:
                self.late += 1  # its task was decided before it came
                self.spans -= 1
                self._release(entry, contribution.size)
        view.seen = len(entry.contributions)

    def _release(self, entry: _Trace, size: int) -> None:
        entry.size -= size
        self.bytes -= size

    def _close(self, trace_id: bytes, entry: _Trace, *, expired: bool = True,
               notify: bool = True) -> None:
        """Forget a trace (decided, expired or evicted), counting what is lost."""
        self._not_taskless(trace_id, entry)
        del self._traces[trace_id]
        if self.on_close is not None and notify:
            self.on_close(trace_id)
        self.spans -= len(entry.tasks) + len(entry.contributions)
        self.bytes -= entry.size
        if not expired:
            return
        if trace_id in self._done:
            self.late += len(entry.contributions)  # arrived after the trace was decided
        elif not entry.task_spans:
            self.rootless_expired += 1
