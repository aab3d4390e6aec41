"""The in-process source: a ``SpanProcessor`` that turns task spans into diaries.

``on_end`` does O(1) work: it appends the span to a bounded queue (or counts a drop).
A daemon worker turns queued spans into plain data, assembles traces and runs the
pipeline. Both queues, of ended spans and of decided task runs, are bounded in count and
together in bytes (their attributes, estimated): past either bound a span or task run is
dropped, counted and logged. Nothing raises out of ``on_start``, ``on_end``,
``force_flush`` or ``shutdown``.
"""

from __future__ import annotations

import itertools
import logging
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_diary.assembly.batch import estimate
from otel_diary.assembly.summary import Ready
from otel_diary.conventions import EVERY_TASK_MARKER, Conventions, conventions_for
from otel_diary.pipeline.stats import Stats
from otel_diary.record import error_details
from otel_diary.runner import CUT_SHORT_S, RetrySchedule, Runner, renew_after_fork
from otel_diary.sources.spans import (
    ERROR,
    Queued,
    exception_event,
    hint_profile,
    read,
    to_record,
    weigh,
)
from otel_diary.switch import enabled_in_environment

if TYPE_CHECKING:  # a façade's argument types; settings are read by the composition root
    from otel_diary.pipeline.core import Pipeline
    from otel_diary.pipeline.reflect import Reflector
    from otel_diary.settings import Settings
    from otel_diary.sinks.base import Sink

logger = logging.getLogger("otel_diary")

_EXPIRE_EVERY_S = 1.0
_FORK_WAIT_S = 30.0
"""How long a fork waits for a pipeline being built (see ``_before_fork``): a build takes
well under a second, but on a starved machine more than 5 s, and a child forked midway
hangs. Only a build that never ends (one waiting on the forking thread) makes a fork wait
this long."""
_WAKE_BATCH = 512
"""Spans queued before the worker is woken early (else it wakes every schedule delay)."""


def _flush_at_mp_exit(processor: DiarySpanProcessor) -> None:
    """In a process multiprocessing forked: its diaries are written before it ends. Such
    a process ends with ``os._exit``, which runs no ``atexit`` hook, after multiprocessing's
    own finalizers (registered here once it has cleared those it inherited)."""
    from multiprocessing import util

    util.Finalize(None, processor.shutdown, exitpriority=10)


def _ended(parent_span_id: int) -> bool:
    """Whether the span current where a span ends is its parent, ended already: a task
    started in the background by a request that has answered. (A span ends after its
    context is left, so the current span is its parent's when it was started in it.)"""
    current = trace.get_current_span()
    return (current.get_span_context().span_id == parent_span_id
            and getattr(current, "end_time", None) is not None)


class DiarySpanProcessor(SpanProcessor):
    """Writes a diary for every root task span that ends successfully.

    Usage::

        provider = TracerProvider()
        provider.add_span_processor(DiarySpanProcessor())  # honours KB_DIARIES_ENABLED

    Keyword arguments override the environment (see :class:`otel_diary.Settings`).
    With diaries disabled the processor does nothing: no thread, no file. Given the
    ``tracer_provider`` it is attached to (:func:`install` passes it), each diary written
    also emits a ``diary.write`` span there, linked to the task span.
    """

    def __init__(
        self,
        *,
        settings: Settings | None = None,
        sinks: Sequence[Sink] | None = None,
        reflector: Reflector | None = None,
        conventions: Conventions | str | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        **overrides: Any,
    ) -> None:
        self.stats = Stats()
        self._settings = settings
        self._conventions_arg = conventions
        self._conventions: Conventions | None = None
        if settings is None and not overrides and not enabled_in_environment():
            # Off, and nothing in code turns it on: no settings, no pipeline, no thread
            # (the composition root is not even imported).
            self._off(conventions)
            return
        from otel_diary import wiring

        parts = wiring.processor_parts(settings, overrides, stats=self.stats, sinks=sinks,
                                       reflector=reflector, conventions=conventions,
                                       tracer_provider=tracer_provider)
        config = parts.config
        self._settings = parts.settings
        self.enabled = config.enabled
        self._config = config
        self._queue: deque[Queued] = deque()
        """Spans for the worker, each with its weight (estimated bytes), or the fields the
        worker reads of a span that marks no task and did not fail (see ``on_end``)."""
        self._capacity = config.queue_size if self.enabled else 0
        self._wake_at = min(_WAKE_BATCH, config.queue_size // 2)
        self._awaited: OrderedDict[int, None] = OrderedDict()
        """Span ids of in-process parents something waits for: an ended task span (is it a
        root?) or an ended contribution (it goes up through them to its task). At most
        ``queue_size``, the oldest forgotten first: a parent that ends before its child, is
        dropped or lives in another provider never leaves it otherwise."""
        self._accepting = self.enabled
        """False once shut down: later spans are ignored rather than counted as drops."""
        self._drops = itertools.count(1)
        self._drops_logged = 0
        self._shutdown = False
        self._ready: deque[tuple[Ready, int]] = deque()
        """Task runs waiting for the delivery runner, each with its weight."""
        self._ready_capacity = max(64, config.queue_size // 16)
        self._max_bytes = config.queue_max_bytes
        self._queued_bytes = 0
        """Estimated bytes of the spans queued. Added to by the app's threads without a
        lock, so a rare lost update makes it a little off: the worker sets it to 0 each
        time it empties the queue."""
        self._ready_bytes = 0
        """Estimated bytes of the task runs decided and not yet delivered."""
        self._ready_lock = threading.Lock()
        self._unwritten: list[tuple[Ready, int]] = []
        """Task runs whose diary no sink could write, with their weights (still counted in
        ``_ready_bytes``), waiting to be tried again as ``_retries`` says."""
        self._retries = RetrySchedule()
        self._last_try = False
        """Whether the unwritten runs had their last try, at shutdown."""
        self._intake: Runner | None = None
        self._delivery: Runner | None = None
        self._next_expiry = 0.0
        self._conventions = parts.conventions
        self._unremarkable = (parts.conventions.child_keys
                              | parts.conventions.task_markers).isdisjoint
        self._untasked = parts.conventions.task_markers.isdisjoint
        self._unhinted = True
        """No trace's root span said yet that runs need another profile (said once)."""
        self._parent_ended: OrderedDict[int, bool] = OrderedDict()
        """Span ids of task spans whose in-process parent had ended before them (work
        started in the background by a request that has answered): nothing is left to
        wait for. At most ``queue_size``."""
        self._pipeline: Pipeline | None = None
        self._new_pipeline = parts.new_pipeline
        self._sinks = parts.sinks
        self._reflector = reflector
        self._pipeline_lock = threading.Lock()
        self._builder: int | None = None
        """The thread building the pipeline, while it does."""
        self._abandoned = False
        """Set when shutdown stopped waiting for a build: the pipeline, once built, is
        closed at once."""
        self._forking = threading.local()
        self._new_assembler = parts.new_assembler
        if self._new_pipeline is None:
            return
        self._assembler = self._new_assembler()
        self._intake = Runner("otel-diary", self._assemble,
                              interval_s=config.schedule_delay_s,
                              on_error=self._count_error)
        self._delivery = Runner("otel-diary-deliver", self._deliver,
                                on_error=self._count_error)
        self._delivery.start()
        self._intake.start()
        renew_after_fork(self)  # a forked child gets fresh queues and threads

    def _off(self, conventions: Conventions | str | None) -> None:
        """The state of a processor whose diaries are off: it takes no span."""
        self.enabled = self._accepting = self._shutdown = False
        if conventions is not None:  # an argument in code is checked (ValueError) at once
            self._conventions = conventions_for(conventions, "orchestrator")
        self._pipeline = self._new_pipeline = self._reflector = None
        self._sinks = ()
        self._queue = deque()
        self._capacity = 0
        self._ready = deque()
        self._intake = self._delivery = None

    @property
    def pipeline(self) -> Pipeline | None:
        """Its diary pipeline, built by the first diary (or by this call); ``None`` while
        diaries are off, after a shutdown that came first, or when building it failed
        (logged once and counted: task runs are then dropped)."""
        if self._pipeline is None and self._new_pipeline is not None:
            with self._pipeline_lock:
                if self._pipeline is None and self._new_pipeline is not None:
                    self._builder = threading.get_ident()
                    try:
                        self._pipeline = self._new_pipeline()
                    except Exception:
                        self._new_pipeline = None
                        self.stats.pipeline_errors += 1
                        logger.exception("otel-diary could not build its pipeline; no "
                                         "diary will be written")
                    finally:
                        self._builder = None
                    if self._abandoned and self._pipeline is not None:
                        self._pipeline.close()  # shutdown did not wait for it
                        self._pipeline = self._new_pipeline = None
        return self._pipeline

    @property
    def sinks(self) -> tuple[Sink, ...]:
        """Where its diaries go (made at once, before the first diary); empty while
        diaries are off."""
        return tuple(self._sinks)

    @property
    def conventions(self) -> Conventions:
        """The attribute names it reads (those of the settings, when it was off)."""
        if self._conventions is None:
            self._conventions = conventions_for(self._conventions_arg,
                                                self.settings.conventions)
        return self._conventions

    @property
    def settings(self) -> Settings:
        """The settings it was made with (read from the environment when it was off)."""
        if self._settings is None:
            from otel_diary import wiring

            self._settings = wiring.settings_from(None, {})
        return self._settings

    # -- hot path ---------------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        """Queue the span if a diary may need it; most spans are dismissed in a few lookups.

        A diary needs task spans, spans with something for the summary (usage, model,
        operation, error), local roots (they close a trace) and the parents of those, which
        something below them waits on (each marks its parent). SDK spans are read through
        their private fields, since a property or a ``MappingProxyType`` per read would cost
        more than the whole check; any other span type is queued and read through the
        public API by the worker.
        """
        try:
            if not self._accepting:
                return
            item: Queued | None = None
            try:
                attributes = span._attributes._dict  # type: ignore[union-attr]
                context = span._context
                parent = waits_on = span._parent
                failed = span._status._status_code is ERROR
                # Past this span, what waited on it (or what it contributed) waits on its
                # parent: a task span waits to learn whether it is a root, a contribution
                # goes up through plain spans to its task (task > step > task is one run).
                # [2] is the parent's is_remote: a span without a local parent is a local
                # root, which closes its trace.
                if (context[1] not in self._awaited  # type: ignore[index]
                        and self._unremarkable(attributes)  # nothing to summarize
                        and not failed):
                    if parent is not None and not parent[2]:
                        return  # the common case: dismissed
                    waits_on = None  # a local root: queued, waits on nothing
                untasked = self._untasked(attributes)
                if waits_on is not None and not waits_on[2]:
                    if not untasked and _ended(waits_on[1]):
                        ended = self._parent_ended
                        ended[context[1]] = True  # type: ignore[index]
                        if len(ended) > self._capacity:
                            ended.popitem(last=False)
                    else:
                        awaited = self._awaited
                        awaited[waits_on[1]] = None
                        if len(awaited) > self._capacity:
                            awaited.popitem(last=False)
                if untasked and not failed:
                    # A span that neither marks a task nor failed is read for these fields
                    # alone: the span itself is let go now, not kept until the worker runs
                    # (queued spans outlive the garbage collector's young generations, and
                    # every full collection then walks them).
                    item = (None, estimate(attributes), attributes,
                            context[0], context[1],  # type: ignore[index]
                            parent[1] if parent is not None else None,
                            parent is not None and parent[2], False, span._end_time or 0)
            except (AttributeError, TypeError, IndexError):
                pass
            queue = self._queue
            size = len(queue)
            if size < self._capacity:
                if item is None:
                    item = (span, weigh(span))
                held = item[1]
                if self._queued_bytes + self._ready_bytes + held > self._max_bytes:
                    self._drop(held)
                    return
                self._queued_bytes += held
                queue.append(item)
                if size == self._wake_at:  # a batch is waiting: wake the worker once
                    self._intake.wake()  # type: ignore[union-attr]
            else:
                self._drop()
        except Exception:  # never reach the app's `with` block
            logger.debug("otel-diary on_end failed", exc_info=True)

    def _drop(self, weight: int = 0) -> None:
        dropped = next(self._drops)
        self.stats.dropped_spans = dropped
        if dropped == 1:
            if weight:
                logger.warning("otel-diary queues hold %d bytes of spans and task runs: "
                               "dropping spans; see OTEL_DIARY_QUEUE_MAX_BYTES",
                               self._queued_bytes + self._ready_bytes)
            else:
                logger.warning("otel-diary queue is full (%d spans): dropping spans; see "
                               "OTEL_DIARY_QUEUE_SIZE", self._capacity)

    # -- lifecycle --------------------------------------------------------------------

    @property
    def _thread(self) -> threading.Thread | None:
        """The worker that assembles traces (``None`` while diaries are disabled)."""
        return self._intake.thread if self._intake is not None else None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Process every span ended so far and deliver its diaries; False on timeout."""
        try:
            intake, delivery = self._intake, self._delivery
            if intake is None or delivery is None or not intake.alive or intake.stopping:
                return True
            deadline = time.monotonic() + max(timeout_millis, 0) / 1000
            return intake.flush(deadline - time.monotonic()) and delivery.flush(
                deadline - time.monotonic()) and not self._unwritten
        except Exception:
            logger.debug("otel-diary force_flush failed", exc_info=True)
            return False

    def shutdown(self) -> None:
        """Deliver what is queued (within ``shutdown_timeout_ms``) and stop; idempotent."""
        try:
            if self._shutdown:
                return
            self._shutdown = True
            self._accepting = False
            self._capacity = 0
            if self._intake is None or self._delivery is None:  # off: nothing was started
                return
            budget = self._config.shutdown_timeout_s
            deadline = time.monotonic() + budget
            self._intake.stop(deadline - time.monotonic())
            # The last part of the budget writes what is left with the stub reflection:
            # a slow model would otherwise leave those runs unwritten.
            last = min(CUT_SHORT_S, budget / 4)
            if not self._delivery.stop(deadline - last - time.monotonic()):
                pipeline = self._pipeline
                if pipeline is not None:
                    pipeline.cut_short()
                self._delivery.join(deadline - time.monotonic())
            waiting = len(self._queue) + len(self._ready)
            if waiting:
                logger.warning("otel-diary shutdown timed out: %d spans and task runs "
                               "not turned into diaries", waiting)
            # A pipeline being built is closed once it is, and none is built from here on;
            # the build is waited for no longer than the shutdown timeout.
            if not self._pipeline_lock.acquire(timeout=max(deadline - time.monotonic(), 0)):
                self._abandoned = True  # the build closes what it made
                logger.warning("otel-diary shutdown timed out while its pipeline was built")
                return
            try:
                self._new_pipeline = None
                if self._pipeline is not None:
                    self._pipeline.close(max(deadline - time.monotonic(), 0.0))
                    return
            finally:
                self._pipeline_lock.release()
            for part in (*self._sinks, self._reflector):  # no diary yet: only these exist
                try:
                    getattr(part, "close", lambda: None)()
                except Exception:
                    logger.debug("otel-diary could not close %r", part, exc_info=True)
        except Exception:
            logger.debug("otel-diary shutdown failed", exc_info=True)

    # -- worker -----------------------------------------------------------------------

    def _before_fork(self) -> None:
        """Wait, ``_FORK_WAIT_S`` at most, for a pipeline being built: a child forked while
        the worker imports its modules inherits their import locks held, and would hang
        building its own. (Not when the build itself forks.)"""
        if self._builder != threading.get_ident():
            self._forking.held = self._pipeline_lock.acquire(timeout=_FORK_WAIT_S)

    def _after_fork_in_parent(self) -> None:
        if getattr(self._forking, "held", False):  # this thread's fork took the lock
            self._forking.held = False
            self._pipeline_lock.release()

    def _after_fork_in_child(self) -> None:
        """A forked child starts with fresh queues and threads (the parent's are gone)."""
        self._forking = threading.local()
        self._builder = None
        mp_util = sys.modules.get("multiprocessing.util")
        if mp_util is not None:  # maybe a multiprocessing worker: see _flush_at_mp_exit
            mp_util.register_after_fork(self, _flush_at_mp_exit)
        self._queue = deque()
        self._ready = deque()
        self._unwritten = []  # the parent's to write, not this child's
        self._retries = RetrySchedule()
        self._queued_bytes = self._ready_bytes = 0
        self._ready_lock = threading.Lock()
        self._pipeline_lock = threading.Lock()  # a parent's thread may have held it
        self._awaited = OrderedDict()
        self._parent_ended = OrderedDict()
        self._assembler = self._new_assembler()
        for runner in (self._delivery, self._intake):
            if runner is not None:
                runner.after_fork()

    def _count_error(self) -> None:
        self.stats.pipeline_errors += 1

    def _assemble(self, stopping: bool) -> None:
        """One round of the worker: fold queued spans into traces, hand ready task runs to
        the delivery runner; when stopping, release every waiting task span too."""
        self._drain_queue()
        if not self._queue:
            self._queued_bytes = 0  # see its docstring
        now = time.monotonic()
        if now >= self._next_expiry:
            self._next_expiry = now + _EXPIRE_EVERY_S
            self._hand_over(self._assembler.expire())
        elif self._assembler.has_released:  # evicted traces' waiting tasks
            self._hand_over(self._assembler.take_released())
        if stopping:
            self._hand_over(self._assembler.drain())

    def _hand_over(self, ready: list[Ready]) -> None:
        for item in ready:
            record = item[0]
            if record.parent_span_id is not None:
                self._awaited.pop(record.parent_span_id, None)
            weight = estimate(record.attributes)
            with self._ready_lock:
                taken = (len(self._ready) + len(self._unwritten) < self._ready_capacity
                         and self._queued_bytes + self._ready_bytes + weight <= self._max_bytes)
                if taken:
                    self._ready.append((item, weight))
                    self._ready_bytes += weight
            if not taken:
                self.stats.dropped_tasks += 1
                if self.stats.dropped_tasks == 1:
                    logger.warning("otel-diary is %d task runs or %d bytes behind (reflection "
                                   "or a sink is slow): dropping task runs; see "
                                   "OTEL_DIARY_QUEUE_MAX_BYTES", len(self._ready),
                                   self._ready_bytes)
        if ready and self._delivery is not None:
            self._delivery.wake()
        if self._assembler.evicted != self.stats.traces_evicted:
            if not self.stats.traces_evicted:
                logger.warning("otel-diary evicted an open trace (past OTEL_DIARY_MAX_TRACES "
                               "open traces or the OTEL_DIARY_QUEUE_MAX_BYTES they keep): "
                               "its waiting task runs are written without their parent's "
                               "verdict; more may follow, see traces_evicted")
            self.stats.traces_evicted = self._assembler.evicted
        self.stats.traces_expired = self._assembler.expired
        if self.stats.dropped_spans > self._drops_logged:
            if self._drops_logged:
                logger.warning("otel-diary dropped %d spans so far (queue full)",
                               self.stats.dropped_spans)
            self._drops_logged = self.stats.dropped_spans

    def _deliver(self, stopping: bool) -> float | None:
        """Turn ready task runs into diaries (reflection and sinks may be slow). A run
        whose diary no sink could write (a full disk, a folder made read-only) waits, its
        bytes still counted, and is tried again as ``_retries`` says, and once more when
        stopping; what is still unwritten then is logged and lost."""
        ready, unwritten, retries = self._ready, self._unwritten, self._retries
        if unwritten and (time.monotonic() >= retries.at or (stopping and not self._last_try)):
            self._last_try = stopping
            with self._ready_lock:
                ready.extendleft(reversed(unwritten))
                unwritten.clear()
        if not ready:
            return self._next_try(stopping)
        pipeline = self.pipeline
        if pipeline is None:  # it could not be built, or shutdown came first
            with self._ready_lock:
                self.stats.dropped_tasks += len(ready)
                ready.clear()
                self._ready_bytes = 0
            return None
        failed: list[bool] = []
        wrote = False
        with pipeline.batch():
            while ready:
                item, weight = ready[0]  # counted until delivered: its diary is being made
                before = len(failed)
                diary = pipeline.handle(item, unwritten=lambda: failed.append(True))
                lost = len(failed) > before
                wrote = wrote or (diary is not None and not lost)
                with self._ready_lock:
                    ready.popleft()
                    if lost:
                        unwritten.append((item, weight))
                    else:
                        self._ready_bytes -= weight
        if failed:
            retries.failed(time.monotonic())
        elif wrote:
            retries.wrote()
        return self._next_try(stopping)

    def _next_try(self, stopping: bool) -> float | None:
        """When the delivery runner's next round is due for the runs waiting to be tried
        again (``None``: none wait, or they had their last try)."""
        unwritten = self._unwritten
        if not unwritten:
            return None
        if stopping and self._last_try:
            logger.warning("otel-diary stopped with %d diaries no sink could write (a full "
                           "disk, a folder made read-only?): they are lost", len(unwritten))
            return None
        return 0.0 if stopping else max(self._retries.at - time.monotonic(), 0.0)

    def _drain_queue(self) -> None:
        """Fold every queued span into the assembler; deliver the task spans it releases."""
        queue = self._queue
        popleft = queue.popleft
        conv = self.conventions
        assembler = self._assembler
        awaited = self._awaited
        child_keys = conv.child_keys
        no_marker = EVERY_TASK_MARKER.isdisjoint  # a plain trace's root: no hint to give
        while queue:
            item = popleft()
            self._queued_bytes -= item[1]
            try:
                if item[0] is None:  # a span that marks no task and did not fail, as read
                    _, weight, attributes, trace_id, span_id, parent_id, remote, is_error, \
                        end_ns = item
                    span = None
                else:
                    span, weight = item
                    attributes, trace_id, span_id, parent_id, remote, is_error, end_ns = \
                        read(span)
                awaited.pop(span_id, None)
                if span is not None and conv.is_task(attributes):
                    record = to_record(span)
                    late = assembler.late_nested
                    parent_ended = self._parent_ended.pop(span_id, False)
                    self._hand_over(assembler.task_ended(record, parent_ended=parent_ended,
                                                         weight=weight))
                    if assembler.late_nested != late and record.parent_span_id is not None:
                        awaited.pop(record.parent_span_id, None)  # that parent ended already
                    continue
                # Conventions.contributes, inline: a call per span costs the worker 0.1 %
                contributes = is_error or not child_keys.isdisjoint(attributes)
                if contributes:
                    contributed: Mapping[str, object] = attributes
                    if is_error and span is not None:  # how instrumentations record
                        # failures besides error.type
                        contributed = {**attributes, **error_details(
                            exception_event(span), span.status.description or "")}
                    assembler.contribute(trace_id, contributed, is_error, parent_id,
                                         end_ns, span_id)
                local_root = parent_id is None or remote
                if local_root and self._unhinted and not no_marker(attributes):
                    self._unhinted = hint_profile(attributes, conv)
                if contributes or trace_id in assembler:
                    released = assembler.span_ended(trace_id, span_id, local_root,
                                                    None if local_root else parent_id)
                    if released:
                        self._hand_over(released)
            except Exception:
                self.stats.pipeline_errors += 1
                logger.debug("otel-diary could not read a span", exc_info=True)
        self._hand_over([])  # counters and the drop log, once a round

