"""What ``serve`` writes for the spans an app ended: the same spans, encoded by the OTLP
exporter's encoder, through ``serve``'s decoding, assembly and pipeline (no HTTP), for
holding the two paths to one diary per run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from random import Random

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_diary import Diary, Settings
from otel_diary.assembly.grace import TraceStore
from otel_diary.conventions import load_conventions
from otel_diary.receiver.decode import JSON, PROTOBUF, decode
from otel_diary.testing import InMemorySink
from otel_diary.wiring import build_pipeline
from tests.support.otlp_build import json_of


def serve_diaries(profile: str, spans: Sequence[ReadableSpan],
                  shuffle: Random | None = None) -> list[str]:
    """The diaries ``serve`` writes for ``spans`` sent in one OTLP/protobuf request, or
    with ``shuffle`` in any order over two requests, in OTLP/JSON or protobuf."""
    sink, conventions = InMemorySink(), load_conventions(profile)
    pipeline = build_pipeline(Settings(dir=None, index=False), conventions, sinks=[sink])
    traces = TraceStore(conventions, grace=0)
    parts = [list(spans)]
    if shuffle is not None:
        spans = shuffle.sample(spans, len(spans))
        cut = shuffle.randint(0, len(spans))
        parts = [spans[:cut], spans[cut:]]
    for part in parts:
        message = encode_spans(part)
        batch = (decode(json.dumps(json_of(message)).encode(), JSON, conventions)
                 if shuffle is not None and shuffle.random() < 0.5
                 else decode(message.SerializeToString(), PROTOBUF, conventions))
        traces.add(batch, now=0)
    for ready in traces.drain():
        pipeline.handle(ready)
    pipeline.close()
    return [diary.content for diary in sink.diaries]


class SameInServe:
    """Keeps every span a provider ends, to check that ``serve`` writes, from them, the
    diaries the provider's diary processor wrote."""

    def __init__(self, provider: TracerProvider, profile: str) -> None:
        self.profile = profile
        self.exported = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(self.exported))

    def check(self, diaries: Sequence[Diary]) -> None:
        """Fails unless ``serve`` writes ``diaries`` (those of the processor, flushed), in
        any order, from the spans ended so far."""
        spans = self.exported.get_finished_spans()
        assert sorted(serve_diaries(self.profile, spans)) == sorted(
            diary.content for diary in diaries), "serve wrote other diaries for these spans"
