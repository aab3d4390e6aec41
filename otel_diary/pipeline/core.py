"""The pipeline after assembly: classify -> redact -> reflect -> render -> sinks.

Plain data in (``SpanRecord`` + ``ChildSummary``), diaries out. Shared by every source.
Nothing raises out of :meth:`Pipeline.handle`: failures are logged once and counted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

from otel_diary.assembly.inprocess import Ready
from otel_diary.conventions import Conventions
from otel_diary.index.store import attach_index
from otel_diary.pipeline.classify import TaskRun, classify
from otel_diary.pipeline.llm import reflector_from
from otel_diary.pipeline.redact import SecretRedactor, settings_redactor
from otel_diary.pipeline.reflect import MAX_LEARNED, Reflector, StubReflector, cut
from otel_diary.pipeline.render import Diary, render
from otel_diary.settings import Settings
from otel_diary.sinks.folder import FolderUnwritable, Sink, log_unwritable
from otel_diary.sinks.hub.sink import default_sinks
from otel_diary.text import check_trace_url_template

logger = logging.getLogger("otel_diary")

MAX_RELATED = 5

Redactor = Callable[[str], str]
"""Returns its text with secrets replaced by ``[REDACTED:<kind>]``."""
RelatedFinder = Callable[[TaskRun], Sequence[str]]
"""Returns ids of earlier diaries related to a run (beyond those the span names)."""
DiaryListener = Callable[[Diary, TaskRun, Sequence[str]], None]
"""Called after a diary was delivered, with the locations the sinks returned."""


@dataclass
class Stats:
    """Counters of what the pipeline did; read them, never reset them."""

    tasks: int = 0
    diaries: int = 0
    failed_runs: int = 0
    dropped_spans: int = 0
    dropped_tasks: int = 0
    sink_errors: int = 0
    pipeline_errors: int = 0
    reflection_fallbacks: int = 0
    traces_evicted: int = 0
    traces_expired: int = 0
    index_errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class _LogOnce:
    """Logs the first failure of each kind with its traceback, later ones at debug level."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, kind: str, message: str, *args: object) -> None:
        with self._lock:
            first = kind not in self._seen
            self._seen.add(kind)
        if first:
            logger.exception(message + " (further errors of this kind are logged at debug)",
                             *args)
        else:
            logger.debug(message, *args, exc_info=True)


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
        self.listeners = list(listeners)
        self.stats = stats or Stats()
        self._stub = StubReflector()
        self._log_once = _LogOnce()

    def handle(self, ready: Ready) -> Diary | None:
        """Classify, render and deliver one root task span; ``None`` when nothing is written."""
        try:
            return self._handle(ready)
        except Exception:
            self.stats.pipeline_errors += 1
            self._log_once("pipeline", "otel-diary could not turn a task span into a diary")
            return None

    def _handle(self, ready: Ready) -> Diary | None:
        record, summary = ready
        self.stats.tasks += 1
        run = classify(record, summary, self.conventions)
        if run is None:
            self.stats.failed_runs += 1
            return None
        if self.redactor is not None:
            run = redact_run(run, self.redactor)
        learned = self._reflect(run)
        if self.redactor is not None:
            learned = self.redactor(learned)
        trace_url = None
        if self.trace_url_template:
            trace_url = self.trace_url_template.format(trace_id=run.trace_id_hex,
                                                       span_id=run.span_id_hex)
        related = list(run.related)
        if self.related_finder is not None:
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
                self.stats.sink_errors += 1
                log_unwritable(exc)
            except Exception:
                self.stats.sink_errors += 1
                self._log_once(f"sink:{type(sink).__name__}",
                               "otel-diary sink %s failed to write diary %s",
                               type(sink).__name__, diary.id)
        if locations or not self.sinks:
            self.stats.diaries += 1
            for listener in self.listeners:
                try:
                    listener(diary, run, locations)
                except Exception:
                    self._log_once("listener", "otel-diary diary listener failed")
        return diary

    def _reflect(self, run: TaskRun) -> str:
        if not isinstance(self.reflector, StubReflector):
            try:
                text = cut(self.reflector.reflect(run).strip(), MAX_LEARNED)
                if text:
                    return text
            except Exception:
                self._log_once("reflection", "otel-diary reflection failed; using the stub")
            self.stats.reflection_fallbacks += 1
        return self._stub.reflect(run)

    def close(self) -> None:
        for sink in self.sinks:
            try:
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


def build_pipeline(
    settings: Settings,
    conventions: Conventions,
    *,
    sinks: Sequence[Sink] | None = None,
    reflector: Reflector | None = None,
    stats: Stats | None = None,
) -> Pipeline:
    """The pipeline ``settings`` describe; explicit ``sinks``/``reflector`` replace them.

    Every source (in-process processor, OTLP receiver, replay) builds its pipeline here.
    """
    redactor = settings_redactor(settings)  # always on; also hides the configured keys
    if sinks is None:
        sinks = default_sinks(settings)  # folder, hub, or both
    if reflector is None:
        reflector = reflector_from(settings, redactor)
    pipeline = Pipeline(conventions, sinks, reflector=reflector, redactor=redactor, stats=stats,
                        trace_url_template=settings.trace_url)
    if settings.index:
        attach_index(pipeline)  # beside the folder sink, if there is one
    return pipeline


def redact_run(run: TaskRun, redactor: Redactor) -> TaskRun:
    """``run`` with every free-text fact passed through ``redactor``."""
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
        stderr_tail=scrub(run.stderr_tail),
        related=tuple(redactor(item) for item in run.related),
        child_error_types=tuple(redactor(item) for item in run.child_error_types),
    )
