"""One attach per ``TracerProvider``, whichever mechanisms ask for it.

``install()``, the ``opentelemetry-instrument`` hook, the ``diary`` instrumentor and the
``diary`` span exporter all go through this registry, so every span reaches one diary
engine once: a provider that already feeds a ``diary`` exporter gets no processor, and an
exporter on a provider that already has the processor stops feeding what it also sees.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from otel_diary.sources.processor import DiarySpanProcessor

logger = logging.getLogger("otel_diary")


class DiaryFeed(Protocol):
    """A span exporter that feeds a diary engine (see ``DiarySpanExporter``)."""

    engine: DiarySpanProcessor


@dataclass(frozen=True)
class _Attachment:
    engine: DiarySpanProcessor
    via_exporter: bool
    """True when the provider's spans reach ``engine`` through a ``diary`` exporter."""
    since_ns: int
    """When the processor was added: spans that ended earlier only the exporter saw."""


class _Registry:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.attachments: weakref.WeakKeyDictionary[Any, _Attachment] = \
            weakref.WeakKeyDictionary()
        self.exporters: weakref.WeakSet[Any] = weakref.WeakSet()
        self.engines: weakref.WeakSet[DiarySpanProcessor] = weakref.WeakSet()
        self.generation = 0
        """Bumped on every change an exporter must re-check its overlap against."""


_registry = _Registry()


def attach(provider: Any, **overrides: Any) -> DiarySpanProcessor | None:
    """The diary engine fed by ``provider``'s spans, attaching a processor only if none is.

    ``overrides`` go to :class:`DiarySpanProcessor` when one is created. Returns ``None``
    (and logs) when ``provider`` cannot take span processors.
    """
    engine, _ = attach_once(provider, **overrides)
    return engine


def attach_once(provider: Any, **overrides: Any) -> tuple[DiarySpanProcessor | None, bool]:
    """Like :func:`attach`; also says whether this call added the processor."""
    if not hasattr(provider, "add_span_processor"):
        logger.warning("otel-diary: %s cannot take span processors; set up the SDK's "
                       "TracerProvider first", type(provider).__name__)
        return None, False
    with _registry.lock:
        existing = _registry.attachments.get(provider)
        if existing is not None:
            return existing.engine, False
        feeds = _feeds_on(provider)
        if feeds is None and provider is trace.get_tracer_provider():
            # The SDK's internals moved: assume the global provider holds every exporter.
            feeds = list(_registry.exporters)
        if feeds:
            engine = feeds[0].engine
            _registry.attachments[provider] = _Attachment(engine, True, time.time_ns())
            logger.debug("otel-diary: %s already feeds the diary exporter", provider)
            return engine, False
        processor = DiarySpanProcessor(tracer_provider=provider, **overrides)
        provider.add_span_processor(processor)
        # Taken after adding: a span ending in between reaches both feeds (a harmless
        # rewrite of the same diary) rather than neither.
        _registry.attachments[provider] = _Attachment(processor, False, time.time_ns())
        _registry.engines.add(processor)
        _registry.generation += 1
        return processor, True


def detach(provider: Any, engine: DiarySpanProcessor) -> None:
    """Stop ``engine`` and forget it as ``provider``'s diary processor (SDK providers cannot
    remove a processor: a stopped one ignores every span)."""
    with _registry.lock:
        current = _registry.attachments.get(provider)
        if current is not None and current.engine is engine and not current.via_exporter:
            del _registry.attachments[provider]
            _registry.generation += 1
    engine.shutdown()


def register_exporter(exporter: DiaryFeed) -> None:
    """Record a new ``diary`` exporter so processors are not attached beside it."""
    with _registry.lock:
        _registry.exporters.add(exporter)
        _registry.engines.add(exporter.engine)
        _registry.generation += 1


def generation() -> int:
    return _registry.generation


def exporter_cutoff(exporter: DiaryFeed) -> int | None:
    """Spans ended at or after the returned time (ns) reach a diary engine another way.

    ``None``: the exporter is the only feed of its provider. ``0``: another ``diary``
    exporter on the same provider feeds every span.
    """
    with _registry.lock:
        providers = list(_registry.attachments.keys())
        global_provider = trace.get_tracer_provider()
        if global_provider not in providers:
            providers.append(global_provider)
        for provider in providers:
            feeds = _feeds_on(provider) or ()
            if not any(feed is exporter for feed in feeds):
                continue
            attachment = _registry.attachments.get(provider)
            if attachment is not None and not attachment.via_exporter:
                return attachment.since_ns
            if feeds[0] is not exporter:
                return 0
        return None


def engines() -> list[DiarySpanProcessor]:
    """Every diary engine alive in this process (processors and exporters' engines)."""
    with _registry.lock:
        return list(_registry.engines)


def _feeds_on(provider: Any) -> Sequence[DiaryFeed] | None:
    """The ``diary`` exporters among ``provider``'s processors; ``None`` if unknowable."""
    active = getattr(provider, "_active_span_processor", None)
    processors = getattr(active, "_span_processors", None)
    if not isinstance(processors, tuple):
        return None
    feeds = []
    for processor in processors:
        exporter = getattr(processor, "span_exporter", None)
        if exporter is not None and exporter in _registry.exporters:
            feeds.append(exporter)
    return feeds


def install(tracer_provider: TracerProvider | None = None, **overrides: Any) -> \
        DiarySpanProcessor | None:
    """Attach a :class:`DiarySpanProcessor` to ``tracer_provider`` (default: the global one).

    Attaching twice to one provider returns the first processor; so does a provider whose
    spans already reach a ``diary`` exporter (its engine is returned). Returns ``None`` when
    the provider cannot take span processors (the global one before any SDK is configured).
    """
    provider: Any = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    return attach(provider, **overrides)
