"""What the in-process worker reads of an ended span, and what a queued span weighs."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanContext, Status, StatusCode

from otel_diary.sources.spans import read, weigh


def ended_spans(run: list[str]) -> list[ReadableSpan]:
    """The spans a real provider ends, named in ``run``: a plain one, a failing one with a
    1 MiB exception and a 64 KiB status description, a child of the plain one."""
    ended: list[ReadableSpan] = []

    class Keep(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            ended.append(span)

    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(Keep())
    tracer = provider.get_tracer("t")
    for name in run:
        if name == "failing":
            with tracer.start_as_current_span("failing", attributes={"k": "v"}) as span:
                span.record_exception(ValueError("m" * 2**20))
                span.set_status(Status(StatusCode.ERROR, "d" * 2**16))
        else:
            with tracer.start_as_current_span("plain", attributes={"k": "v"}), \
                    tracer.start_as_current_span("child", attributes={"n": 1}):
                pass
    return ended


def test_a_queued_span_weighs_its_events_and_status_too() -> None:
    """An exception event's message and stack trace, and a status description, count
    toward the queue's byte bound as attributes do (a span was weighed by its attributes
    only: 1 MB exceptions filled memory past the bound without a drop)."""
    failing, plain = (weigh(span) for span in ended_spans(["failing", "plain"])[::2])
    assert failing > 2**20 + 2**16
    assert plain < 1024


def test_any_span_type_is_read_as_an_sdk_span_is() -> None:
    """An SDK span is read through its private fields; a span of another type (here a
    ``ReadableSpan`` made by hand, as a bridge or a test makes them) through the API:
    the same fields either way."""
    for sdk in ended_spans(["failing", "plain"]):
        context = sdk.context
        assert context is not None
        parent = sdk.parent
        made = ReadableSpan(
            name=sdk.name,
            context=SpanContext(context.trace_id, context.span_id, False),
            parent=(SpanContext(parent.trace_id, parent.span_id, parent.is_remote)
                    if parent is not None else None),
            attributes=dict(sdk.attributes or {}),
            status=sdk.status, start_time=sdk.start_time, end_time=sdk.end_time)
        assert not hasattr(made._attributes, "_dict")  # the API's path, not the fields
        assert read(made) == read(sdk)
    child = ended_spans(["plain"])[0]
    attributes, trace_id, span_id, parent_id, remote, failed, end_ns = read(child)
    assert (dict(attributes), failed, remote) == ({"n": 1}, False, False)
    assert child.parent is not None and child.context is not None
    assert (trace_id, span_id, parent_id, end_ns) == (
        child.context.trace_id, child.context.span_id, child.parent.span_id, child.end_time)
