"""Build OTLP trace requests for tests with the opentelemetry-proto messages.

Usage::

    spans = task_trace("T-1", chats=2)
    body = protobuf_body(spans)          # or json_body(spans): OTLP/JSON with hex ids
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

T0 = 1_790_000_000_000_000_000
"""A fixed start time (2026-09), so diary paths are stable."""


def new_trace_id() -> bytes:
    return os.urandom(16)


def new_span_id() -> bytes:
    return os.urandom(8)


def kv(key: str, value: object) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def span(trace_id: bytes, span_id: bytes, parent: bytes = b"", *, name: str = "step",
         attributes: Mapping[str, object] | None = None, error: bool = False,
         start: int = T0, duration_ms: int = 10) -> Span:
    return Span(
        trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=name,
        kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=start, end_time_unix_nano=start + duration_ms * 1_000_000,
        attributes=[kv(k, v) for k, v in (attributes or {}).items()],
        status=Status(code=Status.STATUS_CODE_ERROR if error else Status.STATUS_CODE_UNSET),
    )


def task_trace(task_id: str, *, chats: int = 2, trace_id: bytes | None = None,
               parent: bytes = b"", agent: str = "coder", failed: bool = False,
               escalations: int = 0, tokens: tuple[int, int] = (100, 20)) -> list[Span]:
    """A root task span (first) and ``chats`` LLM child spans under an agent step span."""
    trace_id = trace_id or new_trace_id()
    root = new_span_id()
    step = new_span_id()
    spans = [span(trace_id, root, parent, name="orchestrator.task", duration_ms=900,
                  error=failed, attributes={
                      "orchestrator.task.id": task_id,
                      "orchestrator.task.title": f"Task {task_id}",
                      "orchestrator.agent.name": agent,
                      "orchestrator.escalation_count": escalations,
                  }),
             span(trace_id, step, root, name="agent.step")]
    for _ in range(chats):
        spans.append(span(trace_id, new_span_id(), step, name="chat m", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "model-x",
            "gen_ai.usage.input_tokens": tokens[0], "gen_ai.usage.output_tokens": tokens[1],
        }))
    return spans


def request(spans: Iterable[Span], service: str = "orchestrator") -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    resource_spans = req.resource_spans.add()
    resource_spans.resource.attributes.append(kv("service.name", service))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "tests"
    scope_spans.spans.extend(spans)
    return req


def protobuf_body(spans: Iterable[Span]) -> bytes:
    return request(spans).SerializeToString()


def json_document(spans: Iterable[Span]) -> dict[str, Any]:
    """OTLP/JSON as the specification has it: hex ids, lowerCamelCase, integer enums."""
    document = json_format.MessageToDict(request(spans), use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for item in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if item.get(key):
                        item[key] = base64.b64decode(item[key]).hex()
    return document


def json_body(spans: Iterable[Span]) -> bytes:
    return json.dumps(json_document(spans)).encode()
