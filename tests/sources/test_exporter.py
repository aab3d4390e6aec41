"""The `diary` span exporter, the `diary` instrumentor and the one-attach registry on real
TracerProviders: whichever feeds a provider, each task span is processed once."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from opentelemetry.util.types import AnyValue

from otel_diary import DiarySpanExporter, install
from otel_diary.sources.autoinstrument import DiaryInstrumentor
from otel_diary.testing import InMemorySink
from tests.sources.test_processor import HOLD, WorkerHoldingConventions


def new_provider() -> TracerProvider:
    return TracerProvider(resource=Resource.create({"service.name": "svc"}),
                          shutdown_on_exit=False)


def run_task(provider: TracerProvider, task_id: str = "T-1") -> None:
    tracer = provider.get_tracer("tests")
    with tracer.start_as_current_span("task", attributes={"orchestrator.task.id": task_id}):
        with tracer.start_as_current_span("chat", attributes={
                "gen_ai.request.model": "m-1", "gen_ai.usage.input_tokens": 3}):
            pass


def flush(provider: TracerProvider, *exporters: DiarySpanExporter) -> None:
    assert provider.force_flush(10_000)
    for exporter in exporters:
        assert exporter.force_flush(10_000)


def ended_spans(count: int, attributes: dict[str, AnyValue] | None = None) -> list[ReadableSpan]:
    tracer = new_provider().get_tracer("tests")
    spans: list[ReadableSpan] = []
    for number in range(count):
        span = tracer.start_span(f"s{number}", attributes=attributes)
        span.end()
        assert isinstance(span, ReadableSpan)
        spans.append(span)
    return spans


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    provider = new_provider()
    yield provider
    provider.shutdown()


def test_exporter_writes_diaries(provider: TracerProvider) -> None:
    """Behind a BatchSpanProcessor the exporter turns task spans into diaries."""
    sink = InMemorySink()
    exporter = DiarySpanExporter(enabled=True, sinks=[sink])
    provider.add_span_processor(BatchSpanProcessor(exporter))
    run_task(provider)
    flush(provider, exporter)
    [diary] = sink.diaries
    assert diary.task_id == "T-1"
    assert "Tokens: 3." in diary.body
    assert exporter.stats.tasks == 1


def test_export_hands_over_without_waiting() -> None:
    """export() queues and returns at once, even while the worker is held; over the queue
    bound spans are dropped and counted."""
    conventions = WorkerHoldingConventions()
    exporter = DiarySpanExporter(enabled=True, sinks=[InMemorySink()], queue_size=10,
                                 schedule_delay_ms=10, conventions=conventions)
    try:
        held = ended_spans(1, HOLD)
        assert exporter.export(held) is SpanExportResult.SUCCESS
        assert conventions.entered.wait(10)  # nothing leaves the queue now
        assert exporter.export(ended_spans(25)) is SpanExportResult.SUCCESS
        assert exporter.stats.dropped_spans == 15
    finally:
        conventions.release.set()
        exporter.shutdown()
        exporter.shutdown()  # idempotent


def test_disabled_exporter_does_no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without KB_DIARIES_ENABLED the exporter starts no thread and exports nothing."""
    monkeypatch.delenv("KB_DIARIES_ENABLED", raising=False)
    exporter = DiarySpanExporter()
    assert not exporter.engine.enabled
    assert exporter.engine._thread is None
    assert exporter.export(ended_spans(3)) is SpanExportResult.SUCCESS
    assert exporter.stats.as_dict() == dict.fromkeys(exporter.stats.as_dict(), 0)
    assert exporter.force_flush()


def test_exporter_settings_are_keyword_arguments(tmp_path: Path) -> None:
    """Settings arrive as keyword arguments (as declarative configuration passes them)."""
    exporter = DiarySpanExporter(enabled=True, dir=str(tmp_path), conventions="genai",
                                 queue_size=64)
    try:
        assert exporter.engine.settings.dir == tmp_path
        assert exporter.engine.settings.queue_size == 64
        assert exporter.engine.conventions.task_marker == "gen_ai.operation.name"
    finally:
        exporter.shutdown()



def test_a_bad_exporter_setting_is_logged_and_turns_diaries_off(
        caplog: pytest.LogCaptureFixture) -> None:
    """A bad setting (declarative configuration passes them) is logged with its name and
    turns diaries off; it does not raise, which would leave the app no exporter at all."""
    with caplog.at_level(logging.ERROR, logger="otel_diary"):
        exporter = DiarySpanExporter(enabled=True, conventoins="genai")
        exporter.shutdown()
        bad = DiarySpanExporter(enabled=True, conventions="genia")
        bad.shutdown()
    assert not exporter.engine.enabled and not bad.engine.enabled
    assert "conventoins" in caplog.text and "genia" in caplog.text


def test_install_beside_the_exporter_attaches_nothing(provider: TracerProvider) -> None:
    """install() on a provider fed by the exporter returns the exporter's engine."""
    sink = InMemorySink()
    exporter = DiarySpanExporter(enabled=True, sinks=[sink])
    provider.add_span_processor(BatchSpanProcessor(exporter))
    engine = install(provider, enabled=True, sinks=[InMemorySink()])
    assert engine is exporter.engine
    assert install(provider) is engine
    run_task(provider)
    flush(provider, exporter)
    assert len(sink.diaries) == 1
    assert engine.stats.tasks == 1


def test_exporter_added_after_the_processor_stays_quiet(provider: TracerProvider) -> None:
    """An exporter added to a provider that has the processor leaves its spans to it."""
    processor_sink, exporter_sink = InMemorySink(), InMemorySink()
    processor = install(provider, enabled=True, sinks=[processor_sink])
    assert processor is not None
    exporter = DiarySpanExporter(enabled=True, sinks=[exporter_sink])
    provider.add_span_processor(BatchSpanProcessor(exporter))
    run_task(provider)
    flush(provider, exporter)
    assert len(processor_sink.diaries) == 1
    assert exporter_sink.diaries == []
    assert exporter.stats.tasks == 0


def test_second_exporter_on_a_known_provider_stays_quiet(provider: TracerProvider) -> None:
    """Of two diary exporters on one provider only the first feeds diaries."""
    first_sink, second_sink = InMemorySink(), InMemorySink()
    first = DiarySpanExporter(enabled=True, sinks=[first_sink])
    second = DiarySpanExporter(enabled=True, sinks=[second_sink])
    provider.add_span_processor(BatchSpanProcessor(first))
    provider.add_span_processor(BatchSpanProcessor(second))
    assert install(provider) is first.engine
    run_task(provider)
    flush(provider, first, second)
    assert len(first_sink.diaries) == 1
    assert second_sink.diaries == []


@pytest.fixture
def instrumentor() -> Iterator[DiaryInstrumentor]:
    instrumentor = DiaryInstrumentor()
    yield instrumentor
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


def test_instrumentor_attaches_once(provider: TracerProvider, tmp_path: Path,
                                    instrumentor: DiaryInstrumentor) -> None:
    """The instrumentor attaches one processor with its options; asking again adds nothing."""
    instrumentor.instrument(tracer_provider=provider, enabled=True, dir=str(tmp_path))
    engine = install(provider)
    assert engine is not None and engine.settings.dir == tmp_path
    instrumentor.instrument(tracer_provider=provider, enabled=True)
    assert install(provider) is engine
    run_task(provider)
    flush(provider)
    assert engine.stats.diaries == 1
    assert list((tmp_path / "diaries" / "agents").glob("*/*.md"))


def test_uninstrument_stops_what_the_instrumentor_attached(
        provider: TracerProvider, instrumentor: DiaryInstrumentor) -> None:
    """After uninstrument() the instrumentor's processor ignores spans; instrument() re-attaches."""
    sink = InMemorySink()
    instrumentor.instrument(tracer_provider=provider, enabled=True, dir="/nonexistent")
    first = install(provider)
    instrumentor.uninstrument()
    assert first is not None and first.enabled
    second = install(provider, enabled=True, sinks=[sink])
    assert second is not None and second is not first
    run_task(provider)
    flush(provider)
    assert first.stats.tasks == 0
    assert len(sink.diaries) == 1


def test_instrumentor_without_diaries_enabled_attaches_nothing(
        provider: TracerProvider, instrumentor: DiaryInstrumentor,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With KB_DIARIES_ENABLED unset the instrumentor leaves the provider alone."""
    monkeypatch.delenv("KB_DIARIES_ENABLED", raising=False)
    instrumentor.instrument(tracer_provider=provider)
    sink = InMemorySink()
    engine = install(provider, enabled=True, sinks=[sink])
    assert engine is not None and engine.enabled
    run_task(provider)
    flush(provider)
    assert len(sink.diaries) == 1


def test_instrumentor_bad_option_is_logged_not_raised(
        provider: TracerProvider, instrumentor: DiaryInstrumentor,
        caplog: pytest.LogCaptureFixture) -> None:
    """A bad instrumentor option is logged with its name; instrument() returns normally."""
    with caplog.at_level(logging.ERROR, logger="otel_diary"):
        instrumentor.instrument(tracer_provider=provider, enabled=True, colour="blue")
    assert "colour" in caplog.text
    engine = install(provider, enabled=False)  # nothing was attached before
    assert engine is not None and not engine.enabled
