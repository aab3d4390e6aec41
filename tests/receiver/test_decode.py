"""OTLP decoding: protobuf and JSON bodies into per-span items."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.machinery
import importlib.util
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import otel_diary
from otel_diary import ORCHESTRATOR, SpanRecord
from otel_diary.assembly.batch import Contribution, estimate, weight
from otel_diary.conventions import AUTO, GENAI, Conventions
from otel_diary.errors import DecodeError
from otel_diary.receiver.decode import (
    JSON,
    NATIVE,
    PROTOBUF,
    decode,
    export_response,
    parse_json,
    scan,
    status_body,
)
from tests.support.otlp_build import (
    json_body,
    json_document,
    new_span_id,
    new_trace_id,
    protobuf_body,
    span,
    task_trace,
)


def test_protobuf_task_span_becomes_a_full_record() -> None:
    """The task span of a protobuf request is decoded whole, with ids as integers."""
    spans = task_trace("T-1", chats=2)
    batch = decode(protobuf_body(spans), PROTOBUF, ORCHESTRATOR)
    assert (batch.held, batch.valid, batch.rejected) == (3, 4, 0)  # the step: counted
    [part] = batch.parts
    assert (part.trace_id, len(part.contributions)) == (spans[0].trace_id, 2)
    assert part.size == sum(c.size for c in part.contributions)
    [(span_id, payload, size)] = part.tasks
    assert isinstance(payload, SpanRecord)
    assert size == weight(payload) + estimate(payload.resource)  # its resource, once
    assert payload.trace_id == int.from_bytes(spans[0].trace_id, "big")
    assert payload.span_id == int.from_bytes(span_id, "big")
    assert payload.attributes["orchestrator.task.id"] == "T-1"
    assert payload.resource["service.name"] == "orchestrator"
    assert payload.parent_span_id is None


def test_contributing_spans_keep_only_the_attributes_that_matter() -> None:
    """A chat span keeps its token and model attributes and its end; plain spans are
    counted, not kept; a failed span counts where the conventions count failed children."""
    trace_id = new_trace_id()
    chat = span(trace_id, b"\x01" * 8, b"\x02" * 8, attributes={
        "gen_ai.usage.input_tokens": 7, "gen_ai.request.model": "m", "http.url": "x"})
    plain = span(trace_id, b"\x03" * 8, b"\x02" * 8, attributes={"http.url": "x"})
    failed = span(trace_id, b"\x04" * 8, b"\x02" * 8, error=True)
    body = protobuf_body([chat, plain, failed])
    batch = decode(body, PROTOBUF, ORCHESTRATOR)
    [part] = batch.parts
    assert part.span_ids == [b"\x01" * 8] and batch.valid == 3 and not part.tasks
    assert part.contributions == [Contribution(
        {"gen_ai.usage.input_tokens": 7, "gen_ai.request.model": "m"}, False,
        chat.end_time_unix_nano)]
    counting = dataclasses.replace(ORCHESTRATOR, recover_on_child_errors=True)
    [part] = decode(body, PROTOBUF, counting).parts
    assert part.span_ids == [b"\x01" * 8, b"\x04" * 8]
    assert part.contributions[1] == Contribution({}, True, failed.end_time_unix_nano)


@pytest.mark.parametrize("reader", ["native", "python", "json"])
def test_a_span_with_nothing_to_contribute_is_only_counted(reader: str) -> None:
    """Captured messages are kept with what a span contributes, but alone they contribute
    nothing, nor does a task marker that marks no task: such a span is counted, not held,
    in every reader (as the processor reads it)."""
    trace_id = new_trace_id()
    messages: dict[str, object] = {"gen_ai.input.messages": '[{"role": "user"}]',
                                   "gen_ai.output.messages": '[{"role": "assistant"}]'}
    model: dict[str, object] = {"gen_ai.request.model": "m"}
    chat = span(trace_id, b"\x01" * 8, b"\x02" * 8, attributes={**messages, **model})
    quiet = span(trace_id, b"\x03" * 8, b"\x02" * 8, attributes=messages)
    unmarked = span(trace_id, b"\x04" * 8, b"\x02" * 8,
                    attributes={"orchestrator.task.id": "", **messages})
    spans = [chat, quiet, unmarked]
    body = json_body(spans) if reader == "json" else protobuf_body(spans)
    for conventions, kept in ((GENAI, {**messages, **model}), (AUTO, {**messages, **model}),
                              (ORCHESTRATOR, model)):
        batch = decode(body, JSON if reader == "json" else PROTOBUF, conventions,
                       native=reader == "native")
        [part] = batch.parts
        assert (batch.held, batch.valid, part.span_ids) == (1, 3, [b"\x01" * 8])
        assert part.contributions == [Contribution(kept, False, chat.end_time_unix_nano)]


def test_requests_without_any_key_that_matters_are_only_counted() -> None:
    """A request none of whose spans carries a task or contribution key yields no items."""
    trace_id = new_trace_id()
    spans = [span(trace_id, new_span_id(), attributes={"http.url": "x", "n": n})
             for n in range(5)]
    batch = decode(protobuf_body(spans), PROTOBUF, ORCHESTRATOR)
    assert (batch.parts, batch.valid, batch.spans, batch.size) == ([], 5, 5, 0)


def test_json_ids_are_hex_and_match_the_protobuf_decoding() -> None:
    """OTLP/JSON (hex ids, integer enums) decodes to the same items as protobuf."""
    spans = task_trace("T-2", chats=1)
    from_json = decode(json_body(spans), JSON, ORCHESTRATOR)
    from_protobuf = decode(protobuf_body(spans), PROTOBUF, ORCHESTRATOR)
    assert from_json == from_protobuf
    assert len(from_json.parts[0].trace_id) == 16


def test_json_accepts_string_integers_and_snake_case() -> None:
    """64-bit integers may be strings and field names may be the proto names."""
    document = json_document(task_trace("T-3", chats=1))
    scope = document["resourceSpans"][0]["scopeSpans"][0]
    for item in scope["spans"]:
        item["start_time_unix_nano"] = str(item.pop("startTimeUnixNano"))
    batch = decode(json.dumps(document).encode(), JSON, ORCHESTRATOR)
    record = batch.parts[0].tasks[0][1]
    assert isinstance(record, SpanRecord) and record.start_ns > 0


def test_json_base64_ids_are_refused_with_a_clear_message() -> None:
    """A base64 trace id (what a naive encoder sends) is a decode error naming the field."""
    document = json_document(task_trace("T-4", chats=0))
    item = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    import base64

    item["traceId"] = base64.b64encode(bytes.fromhex(item["traceId"])).decode()
    with pytest.raises(DecodeError, match=r"traceId: expected 32 hex digits"):
        decode(json.dumps(document).encode(), JSON, ORCHESTRATOR)


def test_truncated_protobuf_is_a_decode_error() -> None:
    """A protobuf body cut short cannot be decoded."""
    body = protobuf_body(task_trace("T-5"))
    with pytest.raises(DecodeError):
        decode(body[:-7], PROTOBUF, ORCHESTRATOR)


@pytest.mark.parametrize("reader", ["native", "python"])
def test_a_string_that_is_not_utf8_is_read_with_replacement_characters(reader: str) -> None:
    """A title, a list's string and another span's name in Latin-1, as an SDK that does
    not check its strings sends them and the Collector forwards them: each invalid
    sequence is read as U+FFFD, and nothing else changes; protobuf's verdict on a body
    broken otherwise stays the error."""
    spans = task_trace("T-8", chats=1)
    spans[0].attributes[1].value.string_value = "Caf\u00e9 menu"
    related = spans[0].attributes.add(key="orchestrator.related").value.array_value.values
    related.add(string_value="kh-caf\u00e9")
    related.add(string_value="kh-2")
    spans.append(span(new_trace_id(), new_span_id(), name="GET /caf\u00e9"))
    good = protobuf_body(spans)
    body = good.replace("caf\u00e9".encode(), b"caf\xe9!").replace("Caf\u00e9".encode(),
                                                                      b"Caf\xe9?")
    native = reader == "native"
    batch = decode(body, PROTOBUF, ORCHESTRATOR, native=native)
    [part] = batch.parts
    [(_, record, _)] = part.tasks
    assert isinstance(record, SpanRecord)
    assert record.attributes["orchestrator.task.title"] == "Caf\ufffd? menu"
    assert record.attributes["orchestrator.related"] == ["kh-caf\ufffd!", "kh-2"]
    assert (batch.held, batch.valid, batch.rejected) == (2, 4, 0)  # the task, its model call
    spans[0].attributes[1].value.string_value = "Caf\ufffd? menu"
    related[0].string_value = "kh-caf\ufffd!"
    assert batch == decode(protobuf_body(spans), PROTOBUF, ORCHESTRATOR, native=native)
    if native and NATIVE:  # read by the C reader itself, not handed to protobuf
        assert scan(body, ORCHESTRATOR, validate=True, lossy=True) == batch
    with pytest.raises(DecodeError, match="Error parsing message"):
        decode(body[:-7], PROTOBUF, ORCHESTRATOR, native=native)


def test_wrong_length_ids_are_a_decode_error() -> None:
    """A 5-byte trace id is not an OTLP span."""
    with pytest.raises(DecodeError, match="16 bytes"):
        decode(protobuf_body([span(b"\x01" * 5, b"\x02" * 8)]), PROTOBUF, ORCHESTRATOR)


def test_zero_ids_are_refused_span_by_span() -> None:
    """Spans with an all-zero or empty id (as protobuf reads it: zero) are counted as
    rejected; the others are kept, in both encodings."""
    good = span(new_trace_id(), b"\x05" * 8)
    zero = span(bytes(16), b"\x06" * 8)
    empty_span, empty_trace = span(new_trace_id(), b""), span(b"", b"\x07" * 8)
    for body, kind in ((protobuf_body, PROTOBUF), (json_body, JSON)):
        batch = decode(body([good, zero, empty_span, empty_trace]), kind, ORCHESTRATOR)
        assert (batch.valid, batch.rejected, batch.spans) == (1, 3, 4)
        assert "empty or all-zero" in batch.reason


def test_partial_success_response_in_both_content_types() -> None:
    """The response carries rejected spans as protobuf and as OTLP/JSON."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    response = ExportTraceServiceResponse.FromString(export_response(PROTOBUF, 3, "bad ids"))
    assert response.partial_success.rejected_spans == 3
    assert json.loads(export_response(JSON, 3, "bad ids")) == {
        "partialSuccess": {"rejectedSpans": "3", "errorMessage": "bad ids"}}
    assert json.loads(export_response(JSON)) == {}


def test_status_body_is_a_google_rpc_status() -> None:
    """Error bodies are google.rpc.Status in the request's content type."""
    from google.rpc import status_pb2  # type: ignore[import-untyped]

    status = status_pb2.Status.FromString(status_body(PROTOBUF, 3, "no"))
    assert (status.code, status.message) == (3, "no")
    assert json.loads(status_body(JSON, 14, "later")) == {"code": 14, "message": "later"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_never_escape_as_anything_but_decode_error(body: bytes) -> None:
    """Any bytes as protobuf or JSON either decode or raise DecodeError."""
    for media_type in (PROTOBUF, JSON):
        with contextlib.suppress(DecodeError):
            decode(body, media_type, ORCHESTRATOR)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(max_size=40) | st.sampled_from(["", "00" * 16, "ab" * 8, "AAAA==", "zz"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["resourceSpans", "scopeSpans", "spans", "traceId", "spanId",
                         "parentSpanId", "attributes", "key", "value", "stringValue",
                         "intValue", "arrayValue", "kvlistValue", "values", "status", "code",
                         "name", "links", "flags", "resource", "startTimeUnixNano",
                         "resource_spans", "unknownField"]) | st.text(max_size=8),
        children, max_size=5),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json_values)
def test_arbitrary_json_never_escapes_as_anything_but_decode_error(value: object) -> None:
    """Any JSON value, shaped like OTLP or not, decodes or raises DecodeError."""
    try:
        body = json.dumps(value).encode()
    except ValueError:
        return
    try:
        parse_json(body)
        decode(body, JSON, ORCHESTRATOR)
    except DecodeError:
        pass


def test_only_the_decoder_uses_the_c_reader() -> None:
    """Of the package's modules, only receiver/decode.py names the C extension: every
    other one decodes through its API, and the pure-Python reader stays the reference."""
    root = Path(otel_diary.__file__).parent
    users = sorted(path.relative_to(root).as_posix() for path in root.rglob("*.py")
                   if "_otlpscan" in path.read_text(encoding="utf-8"))
    assert users == ["receiver/decode.py"]


def test_nothing_but_the_extension_is_imported_as_the_c_reader() -> None:
    """The name of the C reader finds the built extension or nothing: a folder of that
    name would be imported as a namespace package where the extension is not built."""
    receiver = Path(otel_diary.__file__).parent / "receiver"
    assert not (receiver / "_otlpscan").exists()
    spec = importlib.util.find_spec("otel_diary.receiver._otlpscan")
    assert spec is None or isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)


@pytest.mark.parametrize("reader", ["native", "python", "json"])
def test_auto_takes_any_profiles_task_spans_whatever_the_reader(reader: str) -> None:
    """Under ``auto`` an OpenInference CHAIN span and an orchestrator task span are both
    task spans, and an LLM span under them a contribution, in every reader (the native
    reader hands ``auto`` to the Python one); under ``orchestrator`` the CHAIN is none."""
    trace_id = new_trace_id()
    chain = span(trace_id, new_span_id(), name="LangGraph", attributes={
        "openinference.span.kind": "CHAIN", "session.id": "s-1"})
    llm = span(trace_id, new_span_id(), chain.span_id, name="ChatOpenAI", attributes={
        "openinference.span.kind": "LLM", "llm.model_name": "m", "llm.token_count.prompt": 3})
    task = task_trace("T-auto", chats=0)

    def tasks_and_contributions(conventions: Conventions) -> tuple[int, int]:
        spans = [chain, llm, *task]
        if reader == "json":
            batch = decode(json_body(spans), JSON, conventions)
        else:
            batch = decode(protobuf_body(spans), PROTOBUF, conventions,
                           native=reader == "native")
        return (sum(len(part.tasks) for part in batch.parts),
                sum(len(part.contributions) for part in batch.parts))

    assert tasks_and_contributions(AUTO) == (2, 1)
    assert tasks_and_contributions(ORCHESTRATOR) == (1, 0)
