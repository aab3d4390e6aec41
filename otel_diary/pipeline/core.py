"""The pipeline after assembly: classify -> redact -> reflect -> render -> sinks.

Plain data in (``SpanRecord`` + ``ChildSummary``), diaries out. Shared by every source.
Nothing raises out of :meth:`Pipeline.handle`: failures are logged once and counted.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from otel_diary.assembly.summary import Ready
from otel_diary.conventions import Conventions
from otel_diary.counters import LogOnce
from otel_diary.errors import FolderUnwritable
from otel_diary.pipeline.classify import Recovery, TaskRun, classify
from otel_diary.pipeline.redact import SecretRedactor
from otel_diary.pipeline.reflect import MAX_LEARNED, Reflector, StubReflector
from otel_diary.pipeline.render import Diary, render
from otel_diary.pipeline.stats import Stats
from otel_diary.sinks.base import Sink
from otel_diary.sinks.folder import log_unwritable
from otel_diary.text import check_trace_url_template, cut

logger = logging.getLogger("otel_diary")

MAX_RELATED = 5
"""Most related diaries a finder adds to a diary (the ids its span names are all kept)."""

Redactor = Callable[[str], str]
"""Returns its text with secrets replaced by ``[REDACTED:<kind>]``."""
RelatedFinder = Callable[[TaskRun], Sequence[str]]
"""Returns ids of earlier diaries related to a run (beyond those the span names)."""
DiaryListener = Callable[[Diary, TaskRun, Sequence[str]], None]
"""Called after a diary was delivered, with the locations the sinks returned. A listener
may also have ``hold()`` and ``release()``: between them (on one thread, inside
:meth:`Pipeline.batch`) it may keep its writes and make them at ``release``."""

MAX_BATCH = 64
"""Most diaries a listener holds in one batch (the lessons: one write each per batch)."""
MAX_BATCH_S = 0.25
"""Longest a batch stays open: what a listener holds is written at least this often."""


STOPS = (SystemExit, KeyboardInterrupt)
"""What stops a program: obeyed on the main thread, logged and ignored in a worker."""


def _nothing() -> None:
    pass


def on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class Pipeline:
    """Turns ready task spans into diaries delivered to every sink."""

    def __init__(
        self,
        conventions: Conventions,
        sinks: Sequence[Sink],
        *,
        reflector: Reflector | None = None,
        redactor: Redactor | None = None,
        trace_url_template: str | None = None,
        related_finder: RelatedFinder | None = None,
        listeners: Sequence[DiaryListener] = (),
        stats: Stats | None = None,
    ) -> None:
        self.conventions = conventions
        self.sinks = tuple(sinks)
        self.reflector = reflector or StubReflector()
        self.redactor = redactor if redactor is not None else SecretRedactor()
        self.trace_url_template = (check_trace_url_template(trace_url_template)
                                   if trace_url_template else None)
        self.related_finder = related_finder
        self._cut = False
        self.listeners = tuple(listeners)
        self.stats = stats or Stats()
        self._stub = StubReflector()
        self._log_once = LogOnce()
        self._batch = threading.local()
        self._holders = [listener for listener in self.listeners
                         if callable(getattr(listener, "hold", None))]

    @contextlib.contextmanager
    def batch(self, on_release: Callable[[], None] | None = None) -> Iterator[None]:
        """Diaries handled inside, on this thread, are indexed and counted into their
        lessons together: for up to :data:`MAX_BATCH` diaries or :data:`MAX_BATCH_S`
        seconds the listeners hold their writes (the index commits more often, see
        ``DiaryIndex.hold``), far cheaper than one each. The files are written as they
        come. ``on_release`` is called each time what was held is written (after each
        diary when nothing is held), so a caller can wait for that before it forgets a
        task: a crash before it loses the index and lesson updates, not the diaries, and
        ``otel-diary reindex`` redoes them. Runs with a reflection model are not batched:
        each costs a model call anyway. Inside another batch of this thread, the outer
        one goes on (and its ``on_release`` is the one called)."""
        if getattr(self._batch, "on_release", None) is not None:
            yield  # already inside a batch on this thread
            return
        batching = bool(self._holders) and isinstance(self.reflector, StubReflector)
        self._batch.on_release = on_release or _nothing
        if batching:
            self._hold()
        try:
            yield
        finally:
            try:
                if batching:
                    self._release()
            finally:
                self._batch.on_release = None

    def _hold(self) -> None:
        self._batch.count = 0
        self._batch.until = time.monotonic() + MAX_BATCH_S
        for listener in self._holders:
            try:
                listener.hold()  # type: ignore[attr-defined]
            except Exception:
                self._log_once("hold", "otel-diary diary listener could not start a batch")

    def _release(self) -> None:
        """Write what the listeners hold, then tell the batch's caller."""
        self._batch.count = None
        for listener in self._holders:
            try:
                listener.release()  # type: ignore[attr-defined]
            except Exception:
                self._log_once("release", "otel-diary diary listener could not end a batch")
        self._batch.on_release()

    def _handled(self) -> None:
        """One more task handled on this thread: inside a batch, written out when full."""
        count = getattr(self._batch, "count", None)
        if count is None:
            on_release = getattr(self._batch, "on_release", None)
            if on_release is not None:
                on_release()
        elif count + 1 >= MAX_BATCH or time.monotonic() >= self._batch.until:
            try:
                self._release()
            finally:
                self._hold()
        else:
            self._batch.count = count + 1

    def handle(self, ready: Ready, *,
               unwritten: Callable[[], None] | None = None) -> Diary | None:
        """Classify, render and deliver one root task span; ``None`` when nothing is written.
        ``unwritten`` is called (before a batch this closes is released) when a diary was
        made but no sink could write it (a full disk, a folder made read-only): the
        caller may keep the run to try again."""
        try:
            try:
                return self._handle(ready, unwritten)
            finally:
                self._handled()
        except Exception:
            self.stats.add("pipeline_errors")
            self._log_once("pipeline", "otel-diary could not turn a task span into a diary")
            return None
        except STOPS:
            if on_main_thread():
                raise  # Ctrl-C and sys.exit() in replay stop the command
            self.stats.add("pipeline_errors")
            self._log_once("pipeline", "otel-diary could not turn a task span into a diary")
            return None

    def _handle(self, ready: Ready, unwritten: Callable[[], None] | None) -> Diary | None:
        record, summary = ready
        self.stats.add("tasks")
        run = classify(record, summary, self.conventions, self.redactor)
        if run is None:
            self.stats.add("failed_runs")
            return None
        run = redact_children(run, self.redactor)
        learned = self.redactor(self._reflect(run))
        trace_url = None
        if self.trace_url_template:
            trace_url = self.trace_url_template.format(trace_id=run.trace_id_hex,
                                                       span_id=run.span_id_hex)
        related = list(run.related)
        if self.related_finder is not None and not self._cut:
            try:
                found = [ident for ident in self.related_finder(run) if ident not in related]
                related.extend(found[:MAX_RELATED])  # the span's own ids are always kept
            except Exception:
                self._log_once("related", "otel-diary could not look up related diaries")
        diary = render(run, learned, related, trace_url)
        locations: list[str] = []
        for sink in self.sinks:
            try:
                locations.append(sink.write(diary))
            except FolderUnwritable as exc:
                self.stats.add("sink_errors")
                log_unwritable(exc)
            except Exception:
                self.stats.add("sink_errors")
                self._log_once(f"sink:{type(sink).__name__}",
                               "otel-diary sink %s failed to write diary %s",
                               type(sink).__name__, diary.id)
            except STOPS:
                if on_main_thread():
                    raise
                # A sink's sys.exit() must not end the worker thread: every later task
                # would then be dropped without a word.
                self.stats.add("sink_errors")
                self._log_once(f"sink:{type(sink).__name__}",
                               "otel-diary sink %s raised %s writing diary %s; ignored",
                               type(sink).__name__, "SystemExit or KeyboardInterrupt",
                               diary.id)
        if not locations and self.sinks and unwritten is not None:
            unwritten()
        if locations or not self.sinks:
            self.stats.add("diaries")
            for listener in self.listeners:
                try:
                    listener(diary, run, locations)
                except Exception:
                    self._log_once("listener", "otel-diary diary listener failed")
        return diary

    def _reflect(self, run: TaskRun) -> str:
        if not isinstance(self.reflector, StubReflector):
            try:
                text = cut(self.redactor(self.reflector.reflect(run).strip()), MAX_LEARNED)
                if text:
                    return text
            except Exception:
                self._log_once("reflection", "otel-diary reflection failed; using the stub")
            self.stats.add("reflection_fallbacks")
        return self._stub.reflect(run)

    def cut_short(self) -> None:
        """Model calls under way end now and no more are made, nor Related lookups (a
        store may be slow to answer): the runs still to write are written with the stub
        reflection (a shutdown near its end)."""
        self._cut = True
        for part in (self.reflector, self.related_finder):  # one under way ends too
            cut = getattr(part, "cut_short", None)
            if cut is not None:
                cut()

    def close(self, timeout_s: float | None = None) -> None:
        """Close the sinks, the reflector and the listeners. With ``timeout_s``, sinks that
        deliver on (``close_within``) share what is left of it, one after the other, instead
        of each waiting its own shutdown timeout; what they could not deliver waits in
        their spools for the next start."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for sink in self.sinks:
            try:
                within = getattr(sink, "close_within", None)
                if deadline is not None and within is not None:
                    within(max(deadline - time.monotonic(), 0.0))
                else:
                    sink.close()
            except Exception:
                self._log_once(f"close:{type(sink).__name__}", "otel-diary sink close failed")
        try:
            getattr(self.reflector, "close", lambda: None)()
        except Exception:
            self._log_once("close:reflector", "otel-diary reflector close failed")
        for listener in self.listeners:
            try:
                getattr(listener, "close", lambda: None)()
            except Exception:
                self._log_once("close:listener", "otel-diary listener close failed")


def redact_children(run: TaskRun, redactor: Redactor) -> TaskRun:
    """``run`` with what its child spans told (models, error types) passed through
    ``redactor``; the span's own facts were redacted whole by ``classify``. The same
    ``run`` when nothing changes (the usual case: no secret in a model's name)."""
    model = None if run.model is None else redactor(run.model)
    models = tuple(redactor(item) for item in run.models)
    child_error_types = tuple(redactor(item) for item in run.child_error_types)
    tools = tuple((redactor(tool), count) for tool, count in run.tools)
    recoveries = redact_recoveries(run.recoveries, redactor)
    if (model, models, child_error_types, tools, recoveries) == (
            run.model, run.models, run.child_error_types, run.tools, run.recoveries):
        return run
    return replace(run, model=model, models=models, child_error_types=child_error_types,
                   tools=tools, recoveries=recoveries)


def redact_recoveries(recoveries: tuple[Recovery, ...],
                      redactor: Redactor) -> tuple[Recovery, ...]:
    """The tools' and models' names in ``recoveries`` passed through ``redactor``."""
    return tuple(item._replace(name=redactor(item.name), instead=None if item.instead is None
                               else redactor(item.instead)) for item in recoveries)


def redact_run(run: TaskRun, redactor: Redactor) -> TaskRun:
    """``run`` with every free-text fact passed through ``redactor`` (for a run classified
    without one; facts already cut may hold fragments no redactor can recognise)."""
    def scrub(value: str | None) -> str | None:
        return None if value is None else redactor(value)

    return replace(
        run,
        title=redactor(run.title),
        task_id=redactor(run.task_id),
        agent=redactor(run.agent),
        trigger=scrub(run.trigger),
        workflow=scrub(run.workflow),
        route=scrub(run.route),
        model=scrub(run.model),
        models=tuple(redactor(item) for item in run.models),
        stderr_tail=scrub(run.stderr_tail),
        child_error=scrub(run.child_error),
        answer=scrub(run.answer),
        tools=tuple((redactor(tool), count) for tool, count in run.tools),
        recoveries=redact_recoveries(run.recoveries, redactor),
        related=tuple(redactor(item) for item in run.related),
        child_error_types=tuple(redactor(item) for item in run.child_error_types),
    )
