"""The ``diary`` span exporter: batches of ended spans -> the diary engine's queue.

For ``OTEL_TRACES_EXPORTER=otlp,diary`` and for declarative configuration
(``tracer_provider.processors[].batch.exporter.diary``), where the SDK wraps it in a
``BatchSpanProcessor``. ``export`` only hands spans to the engine (a
:class:`DiarySpanProcessor` not attached to any provider) and never waits for a diary.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_diary.pipeline.stats import Stats
from otel_diary.sources import attach as _attach
from otel_diary.sources.processor import DiarySpanProcessor

logger = logging.getLogger("otel_diary")


class DiarySpanExporter(SpanExporter):
    """Writes a diary for every root task span among the spans it exports.

    Usage::

        provider.add_span_processor(BatchSpanProcessor(DiarySpanExporter()))

    Keyword arguments are :class:`otel_diary.Settings` fields (plus ``conventions``,
    ``sinks`` and ``reflector``) and override the environment; a bad one is logged as an
    error, with its name, and turns diaries off: declarative configuration builds every
    exporter in one go, and an exception here would leave the app with no tracing at all.
    Spans of a provider that also has the diary processor are processed once, by the
    processor.
    """

    def __init__(self, **settings: Any) -> None:
        try:
            self.engine = DiarySpanProcessor(**settings)
        except (ValueError, TypeError) as exc:
            logger.error("otel-diary: the diary exporter's settings are not valid (%s): no "
                         "diaries; the other exporters are not affected", exc)
            self.engine = DiarySpanProcessor(enabled=False)
        self._checked_generation = -1
        self._cutoff_ns: int | None = None
        if not self.engine.enabled:
            logger.info("otel-diary: the diary exporter is configured but KB_DIARIES_ENABLED "
                        "is not set: no diaries")
        _attach.register_exporter(self)

    @property
    def stats(self) -> Stats:
        """The engine's counters (:class:`otel_diary.Stats`)."""
        return self.engine.stats

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            engine = self.engine
            if engine.enabled:
                current = _attach.generation()
                if current != self._checked_generation:
                    self._checked_generation = current
                    self._cutoff_ns = _attach.exporter_cutoff(self)
                cutoff = self._cutoff_ns
                if cutoff is None:
                    for span in spans:
                        engine.on_end(span)
                else:
                    for span in spans:
                        if (span.end_time or 0) < cutoff:
                            engine.on_end(span)
        except Exception:  # an exporter error must not reach the batch worker
            logger.debug("otel-diary export failed", exc_info=True)
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Turn every span exported so far into diaries; False on timeout."""
        return self.engine.force_flush(timeout_millis)

    def shutdown(self) -> None:
        """Deliver what is queued and stop; idempotent."""
        self.engine.shutdown()
