"""Trace <-> diary: the trace URL template, and the `diary.write` span linked to the task."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_diary import ORCHESTRATOR, Diary, DiarySpanProcessor, Pipeline, Settings, install
from otel_diary.pipeline.render import diary_id, parse_front_matter
from otel_diary.testing import InMemorySink
from otel_diary.text import check_trace_url_template
from tests.support.kb import kb_pipeline, task_record, write

TASK = {"orchestrator.task.id": "T-1", "orchestrator.task.title": "Fix the build",
        "orchestrator.agent.name": "coder"}
JAEGER = "http://localhost:16686/trace/{trace_id}?uiFind={span_id}"


def test_trace_url_goes_to_front_matter_and_body(tmp_path: Path) -> None:
    """With a template the diary carries trace_url and links to it; ids and tag remain."""
    diary = write(kb_pipeline(tmp_path, trace_url=JAEGER), task_record(1, "T-1"))
    url = f"http://localhost:16686/trace/{diary.trace_id}?uiFind={diary.span_id}"
    front = parse_front_matter((tmp_path / diary.path).read_text())
    assert front["trace_url"] == url
    assert f"Trace: <{url}>" in diary.body
    assert front["trace_id"] == diary.trace_id and f"trace:{diary.trace_id}" in front["tags"]


def test_without_a_template_there_is_no_link_but_the_ids_stay(tmp_path: Path) -> None:
    """Without OTEL_DIARY_TRACE_URL the trace and span ids and the trace tag are still there."""
    diary = write(kb_pipeline(tmp_path), task_record(1, "T-1"))
    assert "trace_url" not in diary.front_matter and "Trace: <" not in diary.body
    assert diary.front_matter["span_id"] == diary.span_id
    assert f"trace:{diary.trace_id}" in diary.tags


def test_trace_url_template_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_DIARY_TRACE_URL sets the template."""
    monkeypatch.setenv("OTEL_DIARY_TRACE_URL", JAEGER)
    assert Settings().trace_url == JAEGER


BAD_TEMPLATES = ["http://x/{trace}", "http://x/{trace_id", "http://x/}", "http://x/{0}",
                 "http://x/{trace_id!r}", "http://x/{span_id:>20}", "http://x/{}"]


@pytest.mark.parametrize("template", BAD_TEMPLATES)
def test_bad_template_in_the_environment_is_ignored_with_a_warning(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        template: str) -> None:
    """A template with an unknown or malformed placeholder logs a warning and is ignored."""
    monkeypatch.setenv("OTEL_DIARY_TRACE_URL", template)
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        assert Settings().trace_url is None
    assert any("OTEL_DIARY_TRACE_URL" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("template", BAD_TEMPLATES)
def test_bad_template_in_code_raises_value_error(template: str) -> None:
    """A bad template passed in code raises ValueError, from Settings and from Pipeline."""
    with pytest.raises(ValueError, match="template"):
        Settings(trace_url=template)
    with pytest.raises(ValueError, match="template"):
        Pipeline(ORCHESTRATOR, [], trace_url_template=template)


def test_escaped_braces_are_literal() -> None:
    """Doubled braces are accepted and produce literal braces (Grafana explore URLs)."""
    template = 'http://grafana/explore?left={{"queries":[{{"query":"{trace_id}"}}]}}'
    assert check_trace_url_template(template) == template
    assert template.format(trace_id="ab", span_id="cd") == \
        'http://grafana/explore?left={"queries":[{"query":"ab"}]}'


# -- diary.write ---------------------------------------------------------------------------

@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def traced_provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def diary_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == "diary.write"]


def test_one_diary_write_span_links_to_the_task_span(tmp_path: Path,
                                                     exporter: InMemorySpanExporter) -> None:
    """An installed processor emits exactly one diary.write span per diary: linked to the
    task span, in a trace of its own, with the diary's id, file and outcome."""
    provider = traced_provider(exporter)
    processor = install(provider, enabled=True, dir=tmp_path)
    assert processor is not None
    with provider.get_tracer("tests").start_as_current_span("task", attributes=TASK) as task:
        pass
    assert processor.force_flush(10_000)
    assert processor.force_flush(10_000)  # the diary.write span itself is never a task
    [span] = diary_spans(exporter)
    task_context = task.get_span_context()
    [link] = span.links
    assert link.context.trace_id == task_context.trace_id
    assert link.context.span_id == task_context.span_id
    assert span.parent is None and span.context.trace_id != task_context.trace_id
    attributes = dict(span.attributes or {})
    [file] = tmp_path.rglob("*.md")
    assert attributes["diary.id"] == diary_id(task_context.trace_id, task_context.span_id)
    assert attributes["diary.id"] == parse_front_matter(file.read_text())["id"]
    assert attributes["diary.path"] == str(file.resolve())
    assert attributes["diary.outcome"] == "completed"
    assert "diary.hub.url" not in attributes and "orchestrator.task.id" not in attributes
    assert processor.stats.tasks == 1 and processor.stats.diaries == 1
    provider.shutdown()
    assert len(diary_spans(exporter)) == 1


def test_no_diary_write_span_when_disabled(tmp_path: Path,
                                           exporter: InMemorySpanExporter) -> None:
    """With diaries disabled nothing is written and no diary.write span appears."""
    provider = traced_provider(exporter)
    processor = install(provider, dir=tmp_path)
    with provider.get_tracer("tests").start_as_current_span("task", attributes=TASK):
        pass
    assert processor is not None and processor.force_flush(10_000)
    provider.shutdown()
    assert [span.name for span in exporter.get_finished_spans()] == ["task"]
    assert diary_spans(exporter) == []


def test_no_diary_write_span_without_a_known_provider(exporter: InMemorySpanExporter) -> None:
    """A processor not told its provider writes diaries but emits no span."""
    provider = traced_provider(exporter)
    sink = InMemorySink()
    processor = DiarySpanProcessor(enabled=True, sinks=[sink])
    provider.add_span_processor(processor)
    with provider.get_tracer("tests").start_as_current_span("task", attributes=TASK):
        pass
    assert processor.force_flush(10_000)
    provider.shutdown()
    assert len(sink.diaries) == 1 and diary_spans(exporter) == []


class HubLikeSink:
    """A sink that reports a hub location: an HTTP URL, or ``hub:<path>`` when queued."""

    def __init__(self, queued: bool) -> None:
        self.queued = queued

    def write(self, diary: Diary) -> str:
        return f"hub:{diary.path}" if self.queued else f"https://hub.example/kb/{diary.id}"

    def close(self) -> None:
        pass


def test_diary_write_span_names_the_hub_url(exporter: InMemorySpanExporter) -> None:
    """A diary delivered to an HTTP location puts that URL on the span; the path stays the
    knowledge-base path when no local file was written."""
    provider = traced_provider(exporter)
    processor = DiarySpanProcessor(enabled=True, sinks=[HubLikeSink(queued=False)],
                                   tracer_provider=provider)
    provider.add_span_processor(processor)
    with provider.get_tracer("tests").start_as_current_span("task", attributes={
            **TASK, "orchestrator.escalation_count": 1}):
        pass
    assert processor.force_flush(10_000)
    provider.shutdown()
    [span] = diary_spans(exporter)
    attributes = dict(span.attributes or {})
    assert attributes["diary.hub.url"] == f"https://hub.example/kb/{attributes['diary.id']}"
    assert str(attributes["diary.path"]).startswith("diaries/agents/coder/")
    assert attributes["diary.outcome"] == "recovered"


def test_diary_write_span_names_the_hub_path_of_a_queued_diary(
        exporter: InMemorySpanExporter) -> None:
    """A diary queued for the hub (location ``hub:<path>``) puts that path on the span."""
    provider = traced_provider(exporter)
    processor = DiarySpanProcessor(enabled=True, sinks=[HubLikeSink(queued=True)],
                                   tracer_provider=provider)
    provider.add_span_processor(processor)
    with provider.get_tracer("tests").start_as_current_span("task", attributes=TASK):
        pass
    assert processor.force_flush(10_000)
    provider.shutdown()
    [span] = diary_spans(exporter)
    attributes = dict(span.attributes or {})
    assert attributes["diary.hub.path"] == attributes["diary.path"]
    assert str(attributes["diary.hub.path"]).startswith("diaries/agents/coder/")
    assert "diary.hub.url" not in attributes
