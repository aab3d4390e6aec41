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
    return json_of(request(spans))


def json_of(message: ExportTraceServiceRequest) -> dict[str, Any]:
    """``message`` in OTLP/JSON (see :func:`json_document`)."""
    document = json_format.MessageToDict(message, use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for item in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if item.get(key):
                        item[key] = base64.b64decode(item[key]).hex()
    return document


def json_body(spans: Iterable[Span]) -> bytes:
    return json.dumps(json_document(spans)).encode()


Tree = tuple[str, Mapping[str, str | int], bool, tuple["Tree", ...]]
"""A span (name, attributes, failed) and the spans under it."""

USAGE = "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"


def _chat(tokens_in: int, tokens_out: int, *under: Tree) -> Tree:
    return ("chat", {"gen_ai.operation.name": "chat", USAGE[0]: tokens_in,
                     USAGE[1]: tokens_out}, False, under)


_SUB_AGENT = ("invoke_agent", {"gen_ai.operation.name": "invoke_agent",
                              "gen_ai.agent.name": "helper"})


NESTED_RUN: Tree = ("invoke_agent", {"gen_ai.operation.name": "invoke_agent",
                                     "gen_ai.conversation.id": "c-1"}, False, (
    ("step", {}, False, (
        # a span adding up its calls, and one more call it made uninstrumented
        ("plan", {USAGE[0]: 300, USAGE[1]: 60}, False, (_chat(100, 20), _chat(100, 20))),
        # one call seen by two instrumentations, a plain span between them
        _chat(100, 20, ("POST", {}, False, (_chat(100, 20),))),
        ("fetch", {}, True, (("connect", {}, True, ()),)),  # one failure, going up
        ("fetch", {}, True, ()),  # tried again: another
        # a tool running a sub-agent whose call failed: one failure, up through a task span
        ("execute_tool", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ask"},
         True, ((*_SUB_AGENT, True, (("chat", {"gen_ai.operation.name": "chat"}, True, ()),)),)),
        # a span adding up the calls of a sub-agent it ran (which ends last: the run is OK)
        ("delegate", {USAGE[0]: 100, USAGE[1]: 20}, False, (
            (*_SUB_AGENT, False, (("step", {}, False, (_chat(100, 20),)),)),)),
    )),
))
"""A GenAI run whose spans report usage and failures above others: it used 500 input and
100 output tokens, and three calls failed."""


def tree_spans(trace_id: bytes, tree: Tree, parent: bytes = b"") -> list[Span]:
    """The spans of ``tree``, each under its parent, children ending first."""
    name, attributes, failed, under = tree
    span_id = new_span_id()
    spans = [child for item in under for child in tree_spans(trace_id, item, span_id)]
    return [*spans, span(trace_id, span_id, parent, name=name, attributes=attributes,
                         error=failed, duration_ms=10 + len(spans))]
