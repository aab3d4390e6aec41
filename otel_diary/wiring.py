"""The composition root: :class:`~otel_diary.settings.Settings` in, components out.

Every component owns a small configuration (its constructor's keyword arguments); this
module is the one place that reads settings and hands each component its part, so no
module below it imports ``Settings``. Every source builds its pipeline here, whole:
sinks, reflector, redactor, index listener and related-diary finder are constructor
arguments, never attached afterwards.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

from otel_diary.assembly.inprocess import TraceAssembler
from otel_diary.conventions import Conventions, conventions_for, load_conventions
from otel_diary.pipeline.stats import Stats
from otel_diary.settings import Settings
from otel_diary.sinks.base import Sink
from otel_diary.sinks.folder import FolderSink

if TYPE_CHECKING:  # the pipeline's own modules load when a pipeline is built
    from otel_diary.assembly.grace import TraceStore
    from otel_diary.pipeline.core import DiaryListener, Pipeline
    from otel_diary.pipeline.redact import SecretRedactor
    from otel_diary.pipeline.reflect import Reflector
    from otel_diary.pipeline.render import Diary

logger = logging.getLogger("otel_diary")

__all__ = [
    "ProcessorConfig",
    "ProcessorParts",
    "build_pipeline",
    "default_sinks",
    "processor_parts",
    "reflector_from",
    "settings_from",
    "settings_redactor",
    "store_sink",
    "trace_store",
]


def settings_from(settings: Settings | None, overrides: Mapping[str, Any]) -> Settings:
    """``settings`` with ``overrides`` applied (the environment when ``settings`` is None);
    a bad override raises ``ValueError``."""
    if settings is None:
        return Settings(**overrides)
    if overrides:
        return settings.replace(**overrides)
    return settings


def settings_redactor(settings: Settings, *, prepare: bool = False) -> SecretRedactor:
    """The redactor ``settings`` describe: the built-in families, the configured extra
    patterns, and the literal values of the configured keys and tokens; every rule
    compiled now when ``prepare`` (``serve``'s, before it listens), else each on first
    use (most texts hold no needle of most rules)."""
    from otel_diary.pipeline.redact import SecretRedactor

    secrets = (settings.hub_api_key, settings.reflection_api_key, settings.serve_token)
    redactor = SecretRedactor(settings.redact_patterns,
                              literals=[s.get_secret_value() for s in secrets if s is not None])
    return redactor.prepare() if prepare else redactor


def reflector_from(settings: Settings,
                   redactor: Callable[[str], str] | None = None) -> Reflector | None:
    """The model reflector ``settings`` describe, ``None`` when no endpoint is set."""
    if not settings.reflection_url:
        return None
    from otel_diary.pipeline.llm import LLMReflector  # httpx: only when a model is set

    key = settings.reflection_api_key
    return LLMReflector(
        settings.reflection_url,
        model=settings.reflection_model,
        api_key=key.get_secret_value() if key is not None else None,
        timeout_s=settings.reflection_timeout_s,
        max_tokens=settings.reflection_max_tokens,
        concurrency=settings.reflection_concurrency,
        calls_per_minute=settings.reflection_calls_per_minute,
        redactor=redactor,
    )


def default_sinks(settings: Settings) -> list[Sink]:
    """The sinks ``settings`` describe: the folder, the hub, or both.

    With no hub URL and no store URL the folder serves; with a hub or a store URL they
    do, and the folder too when ``OTEL_DIARY_DIR`` is set explicitly.
    """
    if not settings.hub_url and settings.store_url is None:
        return [FolderSink(settings.root)]
    sinks: list[Sink] = []
    folder: FolderSink | None = None
    if settings.dir is not None:
        folder = FolderSink(settings.root)
        sinks.append(folder)
    if settings.store_url is not None:
        try:
            sinks.append(store_sink(settings, folder))
        except ImportError as exc:  # psycopg absent or broken: as a bad URL, the default
            logger.error('otel-diary: OTEL_DIARY_STORE_URL needs the pg extra (%s): pip '
                         'install "otel-diary[pg]"; diaries go to %s instead', exc,
                         settings.root)
            if folder is None:
                folder = FolderSink(settings.root)
                sinks.append(folder)
    if not settings.hub_url:
        return sinks
    from otel_diary.sinks.hub.sink import HubSink  # httpx: only when a hub is set

    sinks.append(HubSink(
        settings.hub_url,
        redactor=settings_redactor(settings),
        spool_dir=settings.spool_root,
        api_key=settings.hub_api_key.get_secret_value() if settings.hub_api_key else None,
        timeout_s=settings.hub_timeout_s,
        **_delivery(settings, folder),
    ))
    return sinks


def describe_sinks(sinks: Sequence[Sink]) -> str:
    """Where ``sinks`` put diaries, for a log line: a folder's root, the address of a hub
    or a store (never a password), else the sink's class."""
    named: list[str] = []
    for sink in sinks:
        if isinstance(sink, FolderSink):
            named.append(str(sink.root))
            continue
        label, url = getattr(sink, "label", None), getattr(sink, "url", None)
        if isinstance(label, str) and isinstance(url, str):
            from otel_diary.pipeline.redact import display_url

            named.append(f"{label} at {display_url(url)}")
        else:
            named.append(type(sink).__name__)
    return " and ".join(named) or "nowhere"


def store_sink(settings: Settings, folder: FolderSink | None = None) -> Sink:
    """The sink delivering to the store at ``OTEL_DIARY_STORE_URL`` through its spool."""
    from otel_diary.index.postgres import PostgresStore  # psycopg: the pg extra
    from otel_diary.sinks.store import StoreSink

    assert settings.store_url is not None
    store = PostgresStore(settings.store_url.get_secret_value(),
                          timeout_s=settings.store_timeout_s)
    return StoreSink(
        store,
        spool_dir=settings.store_spool,
        timeout_s=settings.store_timeout_s,
        **_delivery(settings, folder),
    )


def _delivery(settings: Settings, folder: FolderSink | None) -> dict[str, Any]:
    """The spool and retry options the hub and the store deliver with."""
    return {
        "initial_backoff_s": settings.retry_initial_backoff_s,
        "max_backoff_s": settings.retry_max_backoff_s,
        "max_entries": settings.spool_max_entries,
        "max_bytes": settings.spool_max_bytes,
        "shutdown_timeout_s": settings.shutdown_timeout_ms / 1000,
        "path_of": _folder_path(folder) if folder is not None else None,
    }


def _folder_path(folder: FolderSink) -> Callable[[Diary], str]:
    """The path a diary has in ``folder`` (its alternate path when another run took the
    usual one), so the hub and the folder name every diary alike."""
    base = folder.root.resolve()

    def path_of(diary: Diary) -> str:
        return folder.target(diary).relative_to(base).as_posix()

    return path_of


def build_pipeline(
    settings: Settings,
    conventions: Conventions,
    *,
    sinks: Sequence[Sink] | None = None,
    reflector: Reflector | None = None,
    stats: Stats | None = None,
    listeners: Sequence[DiaryListener] = (),
    prepare: bool = False,
) -> Pipeline:
    """The pipeline ``settings`` describe; explicit ``sinks``/``reflector`` replace them.

    Every source (in-process processor, OTLP receiver, replay) builds its pipeline here.
    With the index on and a folder sink present, the index beside the folder is kept
    current by a listener and fills "Related" (it is opened by the worker on the first
    diary, not here); a second listener counts each diary into its error's lesson (its
    rules revised by the reflection model when one is configured, the lesson sent to the
    hub when there is one), and "Related" lists that lesson first; ``listeners`` run after
    them. With a store sink (``OTEL_DIARY_STORE_URL``) the store indexes each diary and
    grows its lesson as it is delivered, and "Related" comes from the store. ``prepare``
    compiles every redaction rule now rather than each on first use.
    """
    from otel_diary.index.lessons import LessonBook, LessonListener, Reviser
    from otel_diary.index.stages import IndexListener, IndexRelatedFinder, LessonFirstFinder
    from otel_diary.index.store import DiaryIndex
    from otel_diary.pipeline.core import Pipeline, RelatedFinder

    stats = stats if stats is not None else Stats()
    redactor = settings_redactor(settings, prepare=prepare)  # also hides the configured keys
    if sinks is None:
        sinks = default_sinks(settings)  # folder, hub, or both
    if reflector is None:
        reflector = reflector_from(settings, redactor)
    related: RelatedFinder | None = None
    every_listener: list[DiaryListener] = []
    folder = next((sink for sink in sinks if isinstance(sink, FolderSink)), None)
    store_sinks = sys.modules.get("otel_diary.sinks.store")  # not loaded: no store sink
    shared = next((sink for sink in sinks if store_sinks is not None
                   and isinstance(sink, store_sinks.StoreSink)), None)
    if settings.index and shared is not None:
        # The store keeps the index and the lessons as it takes each diary from the spool.
        store = shared.store
        related = LessonFirstFinder(store, IndexRelatedFinder(store, stats))
    elif settings.index and folder is not None:
        index = DiaryIndex(folder.root)
        every_listener.append(IndexListener(index, folder, stats))
        book = LessonBook(folder.root)
        reviser: Reviser | None = None
        llm = sys.modules.get("otel_diary.pipeline.llm")  # not loaded: no model reflector
        if llm is not None and isinstance(reflector, llm.LLMReflector):
            from otel_diary.pipeline.revise import LessonReviser

            reviser = LessonReviser(reflector)
        hub_sink = sys.modules.get("otel_diary.sinks.hub.sink")  # not loaded: no hub sink
        hub = next((sink for sink in sinks if hub_sink is not None
                    and isinstance(sink, hub_sink.HubSink)), None)
        every_listener.append(LessonListener(
            book, reviser=reviser, publisher=hub.write_lesson if hub is not None else None,
            stats=stats))
        related = LessonFirstFinder(book, IndexRelatedFinder(index, stats))
    every_listener.extend(listeners)
    return Pipeline(conventions, sinks, reflector=reflector, redactor=redactor, stats=stats,
                    trace_url_template=settings.trace_url, related_finder=related,
                    listeners=every_listener)


@dataclass(frozen=True)
class ProcessorConfig:
    """The in-process processor's own knobs."""

    enabled: bool
    queue_size: int
    queue_max_bytes: int
    schedule_delay_s: float
    shutdown_timeout_s: float


@dataclass(frozen=True)
class ProcessorParts:
    """What an in-process :class:`~otel_diary.DiarySpanProcessor` is made of."""

    settings: Settings
    config: ProcessorConfig
    conventions: Conventions
    sinks: Sequence[Sink]
    """Built at once: a hub or a store starts delivering what an earlier run left."""
    new_pipeline: Callable[[], Pipeline] | None
    """Builds the rest of the pipeline around ``sinks``, which the first diary does (so an
    app pays for redaction, rendering, the index and the lessons only once it has a
    diary); ``None`` while diaries are disabled: nothing is built, nothing runs."""
    new_assembler: Callable[[], TraceAssembler]


def processor_parts(
    settings: Settings | None,
    overrides: Mapping[str, Any],
    *,
    stats: Stats,
    sinks: Sequence[Sink] | None = None,
    reflector: Reflector | None = None,
    conventions: Conventions | str | None = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> ProcessorParts:
    """The parts of an in-process processor: its settings, conventions, sinks, pipeline
    factory (with a ``diary.write`` span per diary when the provider is known) and
    assembler factory."""
    settings = settings_from(settings, overrides)
    chosen = conventions_for(conventions, settings.conventions)
    built: Sequence[Sink] = ()
    new_pipeline = None
    if settings.enabled:
        built = list(sinks) if sinks is not None else default_sinks(settings)

        def new_pipeline() -> Pipeline:
            from otel_diary.sources.diary_span import DiaryWriteSpans

            listeners = [DiaryWriteSpans(tracer_provider)] if tracer_provider is not None else []
            return build_pipeline(settings, chosen, sinks=built, reflector=reflector,
                                  stats=stats, listeners=listeners)

    def new_assembler() -> TraceAssembler:
        return TraceAssembler(chosen, max_traces=settings.max_traces,
                              max_bytes=settings.queue_max_bytes,
                              trace_ttl_s=settings.trace_ttl_s,
                              pending_timeout_s=settings.pending_timeout_s)

    config = ProcessorConfig(enabled=settings.enabled, queue_size=settings.queue_size,
                             queue_max_bytes=settings.queue_max_bytes,
                             schedule_delay_s=settings.schedule_delay_ms / 1000,
                             shutdown_timeout_s=settings.shutdown_timeout_ms / 1000)
    return ProcessorParts(settings, config, chosen, built, new_pipeline, new_assembler)


def trace_store(settings: Settings, conventions: Conventions | None = None, *,
                grace: float | None = None, trace_timeout: float | None = None) -> TraceStore:
    """The by-grace assembler ``settings`` describe (``serve``; replay counts spans)."""
    from otel_diary.assembly.grace import TraceStore

    return TraceStore(
        conventions if conventions is not None else load_conventions(settings.conventions),
        grace=settings.serve_grace_s if grace is None else grace,
        trace_timeout=settings.serve_trace_timeout_s if trace_timeout is None
        else trace_timeout,
        max_traces=settings.serve_max_traces,
        max_spans=settings.serve_max_spans,
        max_bytes=settings.serve_max_bytes,
    )
