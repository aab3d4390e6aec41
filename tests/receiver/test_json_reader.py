"""The OTLP/JSON reader: the same batches as protobuf's JSON route, and wrong types refused."""

from __future__ import annotations

import base64
import dataclasses
import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from otel_diary import ORCHESTRATOR
from otel_diary.conventions import Conventions
from otel_diary.errors import DecodeError
from otel_diary.receiver.decode import JSON, decode, extract, parse_json
from otel_diary.receiver.json_reader import decoding_cost, read_json
from tests.support.otlp_build import json_body, json_document, request, span, task_trace

COUNTING = dataclasses.replace(ORCHESTRATOR, recover_on_child_errors=True)
KEYS = ["orchestrator.task.id", "orchestrator.task.title", "gen_ai.request.model",
        "gen_ai.usage.input_tokens", "gen_ai.operation.name", "http.url", "other"]


def _scalars() -> st.SearchStrategy[AnyValue]:
    return st.one_of(
        st.text(max_size=12).map(lambda v: AnyValue(string_value=v)),
        st.sampled_from(["T-1", "T-2", ""]).map(lambda v: AnyValue(string_value=v)),
        st.integers(-(2**63), 2**63 - 1).map(lambda v: AnyValue(int_value=v)),
        st.booleans().map(lambda v: AnyValue(bool_value=v)),
        st.floats(allow_nan=False).map(lambda v: AnyValue(double_value=v)),
        st.binary(max_size=8).map(lambda v: AnyValue(bytes_value=v)),
        st.just(AnyValue()),
    )


_values = st.recursive(_scalars(), lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(
        lambda vs: AnyValue(array_value=ArrayValue(values=vs))),
    st.lists(st.tuples(st.sampled_from(KEYS), inner), max_size=3).map(
        lambda kvs: AnyValue(kvlist_value=KeyValueList(
            values=[KeyValue(key=k, value=v) for k, v in kvs])))), max_leaves=6)
_attributes = st.lists(st.tuples(st.sampled_from(KEYS), _values), max_size=5).map(
    lambda kvs: [KeyValue(key=k, value=v) for k, v in kvs])
_ids = st.sampled_from([bytes(8), b"\x01" * 8, b"\x02" * 8, b"\x03" * 8])


@st.composite
def _spans(draw: st.DrawFn) -> Span:
    return Span(
        trace_id=draw(st.sampled_from([bytes(16), b"\x0a" * 16, b"\x0b" * 16])),
        span_id=draw(_ids), parent_span_id=draw(st.sampled_from([b"", b"\x01" * 8])),
        name=draw(st.text(max_size=10)), flags=draw(st.integers(0, 2**32 - 1)),
        start_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
        end_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
        attributes=draw(_attributes),
        status=Status(code=draw(st.sampled_from([
            Status.STATUS_CODE_UNSET, Status.STATUS_CODE_OK, Status.STATUS_CODE_ERROR])),
            message=draw(st.text(max_size=6))))


def _reshape(value: Any, data: st.DataObject) -> Any:
    """The document with some int64 strings as numbers and some names in snake_case."""
    if isinstance(value, list):
        return [_reshape(item, data) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in ("intValue", "startTimeUnixNano", "endTimeUnixNano") and data.draw(
                st.booleans()):
            item = int(item)
        if data.draw(st.booleans()):
            key = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
        out[key] = _reshape(item, data)
    if data.draw(st.booleans()):
        out["unknownField"] = {"nested": [1, "x"]}
    return out


def _document(spans: list[Span], resource: list[KeyValue]) -> dict[str, Any]:
    req = request(spans)
    del req.resource_spans[0].resource.attributes[:]
    req.resource_spans[0].resource.attributes.extend(resource)
    from google.protobuf import json_format

    document = json_format.MessageToDict(req, use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for item in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if item.get(key):
                        item[key] = base64.b64decode(item[key]).hex()
    return document


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_spans(), max_size=6), _attributes, st.booleans(), st.data())
def test_the_reader_gives_what_the_json_format_route_gives(
        spans: list[Span], resource: list[KeyValue], counting: bool,
        data: st.DataObject) -> None:
    """On generated requests (any attribute values, zero ids, copies, string and number
    int64s, snake_case names, unknown fields) both readers give the same batch."""
    conventions: Conventions = COUNTING if counting else ORCHESTRATOR
    body = json.dumps(_reshape(_document(spans, resource), data)).encode()
    try:
        expected = extract(parse_json(body), conventions)
    except DecodeError:
        with pytest.raises(DecodeError):
            read_json(body, conventions)
        return
    assert read_json(body, conventions) == expected


def _task_document() -> dict[str, Any]:
    return json_document(task_trace("T-j", chats=1))


def _span_of(document: dict[str, Any], n: int = 0) -> dict[str, Any]:
    item: dict[str, Any] = document["resourceSpans"][0]["scopeSpans"][0]["spans"][n]
    return item


BAD = [
    ("name", 5), ("startTimeUnixNano", "soon"), ("endTimeUnixNano", -1), ("flags", 2**40),
    ("status", "ERROR"), ("attributes", {"key": "x"}), ("attributes", [5]),
    ("parentSpanId", "zz" * 8), ("spanId", 12), ("traceId", ["a"]),
]


@pytest.mark.parametrize(("field", "value"), BAD)
def test_a_wrong_type_in_a_kept_span_is_a_decode_error(field: str, value: object) -> None:
    """A task span field of the wrong type is refused with DecodeError, nothing else."""
    document = _task_document()
    _span_of(document)[field] = value
    with pytest.raises(DecodeError):
        decode(json.dumps(document).encode(), JSON, ORCHESTRATOR)


@pytest.mark.parametrize("value", [
    {"intValue": "seven"}, {"intValue": 2**70}, {"boolValue": "yes"}, {"stringValue": 5},
    {"doubleValue": "many"}, {"bytesValue": 5}, {"arrayValue": []},
    {"kvlistValue": {"values": [{"key": 5}]}}, {"stringValue": "a", "intValue": 1}, "x",
    {"arrayValue": {"values": 5}}])
def test_a_wrong_attribute_value_is_a_decode_error(value: object) -> None:
    """A kept attribute whose AnyValue is malformed is refused with DecodeError."""
    document = _task_document()
    _span_of(document, 2)["attributes"][0]["value"] = value  # the chat span's first
    with pytest.raises(DecodeError):
        decode(json.dumps(document).encode(), JSON, ORCHESTRATOR)


@pytest.mark.parametrize("shape", [[], 5, "x", {"resourceSpans": 5},
                                   {"resourceSpans": [{"scopeSpans": [5]}]},
                                   {"resourceSpans": [{"resource": [1], "scopeSpans": []}]}])
def test_a_wrong_document_shape_is_a_decode_error(shape: object) -> None:
    """A document that is not an ExportTraceServiceRequest object is refused."""
    with pytest.raises(DecodeError):
        decode(json.dumps(shape).encode(), JSON, ORCHESTRATOR)


def test_enum_names_and_unknown_fields_are_read() -> None:
    """A status given by its enum name counts; unknown fields anywhere are ignored."""
    document = _task_document()
    task = _span_of(document)
    task["status"] = {"code": "STATUS_CODE_ERROR", "futureField": 1}
    task["futureField"] = {"a": [1, 2]}
    document["futureTop"] = True
    batch = read_json(json.dumps(document).encode(), ORCHESTRATOR)
    record = batch.parts[0].tasks[0][1]
    assert record.is_error and record.attributes["orchestrator.task.id"] == "T-j"


def test_an_escaped_lone_surrogate_is_read_as_a_replacement_character() -> None:
    """``JSON.stringify`` escapes half a character (``"\\ud83c"``) in a string cut inside it;
    the Collector reads it as U+FFFD, and so does the reader, in values, keys, names and
    status messages alike (a pair stays the character it encodes)."""
    document = _task_document()
    task = _span_of(document)
    for pair in task["attributes"]:
        if pair["key"] == "orchestrator.task.title":
            pair["value"] = {"stringValue": "Fixed \ud83c"}
    task["attributes"].append({"key": "odd \udf89 key", "value": {"stringValue": "\U0001f389"}})
    task["name"] = "task \udf89"
    task["status"] = {"code": 2, "message": "failed \ud83c"}
    text = json.dumps(document).encode()
    assert b"\\ud83c" in text and b"\\ud83c\\udf89" in text
    record = read_json(text, ORCHESTRATOR).parts[0].tasks[0][1]
    assert record.attributes["orchestrator.task.title"] == "Fixed \ufffd"
    assert record.name == "task \ufffd"
    assert record.status_message == "failed \ufffd"  # and the odd key refused nothing


def test_bytes_that_are_not_utf8_are_read_as_replacement_characters() -> None:
    """A Latin-1 byte in a string (as an SDK that does not check its strings sends one)
    is read as U+FFFD, the rest of the request as it is."""
    document = _task_document()
    for pair in _span_of(document)["attributes"]:
        if pair["key"] == "orchestrator.task.title":
            pair["value"] = {"stringValue": "Caf@ menu"}
    text = json.dumps(document).encode().replace(b"Caf@", b"Caf\xe9")
    batch = read_json(text, ORCHESTRATOR)
    record = batch.parts[0].tasks[0][1]
    assert record.attributes["orchestrator.task.title"] == "Caf\ufffd menu"
    fixed = json.dumps(document).encode().replace(b"Caf@", "Caf\ufffd".encode())
    assert batch == read_json(fixed, ORCHESTRATOR)


def _peak_of_loads(text: bytes) -> int:
    tracemalloc.start()
    try:
        json.loads(text)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("text", [
    json_body([span for n in range(20) for span in task_trace(f"T-{n}")]),
    json_body([span(b"\x01" * 16, bytes([0, 0, 0, 0, 0, 0, n // 256 + 1, n % 256]),
                    attributes={f"k{i}": f"v{i}" for i in range(10)}) for n in range(500)]),
    b"[" + b"{}," * 200_000 + b"{}]",
    b"[" + b"[]," * 200_000 + b"[]]",
    b"[" + b"1.5," * 200_000 + b"1]",
    b'{"a": [' + b'"x",' * 200_000 + b'"y"]}',
], ids=["otlp", "attributes", "dicts", "lists", "floats", "strings"])
def test_the_decoding_cost_is_near_or_above_what_json_loads_holds(text: bytes) -> None:
    """The estimate counted before decoding is within 15% of json.loads's measured peak, or
    above it (a hostile text of empty objects costs 25 times its size)."""
    assert decoding_cost(text) >= 0.85 * _peak_of_loads(text)
