"""The C reader of protobuf requests gives what the pure-Python path gives, on any input.

``decode(..., native=True)`` reads spans from the bytes with ``otel_diary.receiver._otlpscan``,
which validates them as it goes; ``native=False`` parses them with ``FromString`` and
reads them through the parsed message. Both must make the same :class:`Batch` of every
request ``FromString`` accepts, canonical or not, and refuse the same ones. What the
validating reader accepts, ``FromString`` must accept (it may refuse more: those bodies
go to ``FromString``). On bytes nothing validated, the C reader returns a batch or
raises DecodeError. In the package only ``decode`` imports the extension: the tests go
through its API, except those of what it cannot reach (argument checks, wire rules,
the exact exception).
"""

from __future__ import annotations

import dataclasses
import gc
import os
from collections.abc import Callable

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from otel_diary import GENAI, ORCHESTRATOR, Conventions
from otel_diary.assembly.batch import Batch, Contribution, Part
from otel_diary.errors import DecodeError
from otel_diary.receiver import decode as _otlp
from otel_diary.receiver.decode import PROTOBUF, decode
from otel_diary.receiver.records import kept_keys
from tests.support.otlp_build import protobuf_body, task_trace
from tests.support.otlp_build import request as otlp_request

if not _otlp.NATIVE:
    if os.environ.get("CI"):
        pytest.fail("the C extension otel_diary.receiver._otlpscan was not built", pytrace=False)
    pytest.skip("the C extension otel_diary.receiver._otlpscan was not built (no C compiler?)",
                allow_module_level=True)

from otel_diary.receiver import _otlpscan  # type: ignore[attr-defined]

COUNTING = dataclasses.replace(ORCHESTRATOR, recover_on_child_errors=True)
CONVENTIONS = (ORCHESTRATOR, COUNTING, GENAI)


def both(body: bytes, conventions: Conventions) -> tuple[Batch | str, Batch | str]:
    """The batch (or "DecodeError") of the native and the pure-Python path."""
    results: list[Batch | str] = []
    for native in (True, False):
        try:
            results.append(decode(body, PROTOBUF, conventions, native=native))
        except DecodeError:
            results.append("DecodeError")
    return results[0], results[1]


def assert_same(body: bytes) -> None:
    for conventions in CONVENTIONS:
        native, python = both(body, conventions)
        assert native == python


def validated(body: bytes) -> Batch | None:
    """What the validating reader makes of ``body``, or None when it refuses it (any other
    exception escapes)."""
    try:
        return _otlp.scan(body, COUNTING, validate=True)
    except DecodeError:
        return None


def protobuf_accepts(body: bytes) -> bool:
    try:
        ExportTraceServiceRequest.FromString(body)
    except Exception:  # DecodeError, RecursionError: refused either way
        return False
    return True


def assert_no_laxer_than_protobuf(body: bytes) -> None:
    """The validating reader accepts nothing protobuf refuses."""
    if validated(body) is not None:
        assert protobuf_accepts(body), body[:200]


# -- requests built with the protobuf API -----------------------------------------------

_KEYS = ["orchestrator.task.id", "gen_ai.operation.name", "gen_ai.request.model",
         "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "error.type",
         "gen_ai.agent.name", "orchestrator.agent.name", "http.url", "", "é"]

_scalars = st.one_of(
    st.builds(lambda v: AnyValue(string_value=v), st.text(max_size=12)),
    st.builds(lambda v: AnyValue(int_value=v), st.integers(-(2**63), 2**63 - 1)),
    st.builds(lambda v: AnyValue(bool_value=v), st.booleans()),
    st.builds(lambda v: AnyValue(double_value=v), st.floats(allow_nan=False)),
    st.builds(lambda v: AnyValue(bytes_value=v), st.binary(max_size=8)),
    st.just(AnyValue()),
)
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.builds(lambda vs: AnyValue(array_value=ArrayValue(values=vs)),
              st.lists(inner, max_size=3)),
    st.builds(lambda kvs: AnyValue(kvlist_value=KeyValueList(values=kvs)), st.lists(
        st.builds(lambda k, v: KeyValue(key=k, value=v), st.sampled_from(_KEYS), inner),
        max_size=3)),
), max_leaves=6)
_attributes = st.lists(st.one_of(
    st.builds(lambda k, v: KeyValue(key=k, value=v), st.sampled_from(_KEYS), _values),
    st.builds(lambda k: KeyValue(key=k), st.sampled_from(_KEYS)),  # no value at all
    st.just(KeyValue(key="orchestrator.task.id", value=AnyValue(string_value="T-1"))),
    st.builds(lambda v: KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value=v)),
              st.sampled_from(["invoke_agent", "invoke_workflow", "chat", ""])),
), max_size=5)
_events = st.lists(st.builds(
    lambda name, attributes: Span.Event(name=name, time_unix_nano=1, attributes=attributes),
    st.sampled_from(["exception", "log", ""]), st.lists(st.one_of(
        st.builds(lambda k, v: KeyValue(key=k, value=v),
                  st.sampled_from(["exception.type", "exception.message",
                                   "exception.stacktrace", "x"]), _values),
        st.builds(lambda v: KeyValue(key="exception.message", value=AnyValue(string_value=v)),
                  st.text(max_size=12))), max_size=4)), max_size=3)
_ids = st.one_of(st.sampled_from([bytes(16), b"\x01" * 16, b"\x02" * 16]), st.binary(
    min_size=16, max_size=16))
_spans = st.builds(
    lambda trace_id, span_id, parent, name, code, end, attributes, events, message: Span(
        trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=name,
        start_time_unix_nano=1, end_time_unix_nano=end, attributes=attributes,
        events=events, status=Status(code=code, message=message)),
    _ids, st.one_of(st.just(bytes(8)), st.binary(min_size=8, max_size=8)),
    st.one_of(st.just(b""), st.binary(min_size=8, max_size=8)), st.text(max_size=10),
    st.sampled_from([0, 1, 2, 3, -1]), st.integers(0, 2**64 - 1), _attributes, _events,
    st.one_of(st.just("m"), st.text(max_size=8)))
_requests = st.builds(
    lambda groups: ExportTraceServiceRequest(resource_spans=[
        ResourceSpans(scope_spans=[ScopeSpans(spans=spans) for spans in scopes])
        for scopes in groups]),
    st.lists(st.lists(st.lists(_spans, max_size=4), max_size=2), min_size=1, max_size=2))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_requests, st.data())
def test_the_same_batch_as_the_pure_python_path(request: ExportTraceServiceRequest,
                                                data: st.DataObject) -> None:
    """Any request built with the protobuf API: task spans, contributions, zero ids,
    every kind of attribute value, several resources and scopes."""
    for resource_spans in request.resource_spans:
        resource_spans.resource.attributes.extend(data.draw(_attributes))
    body = request.SerializeToString()
    assert_same(body)
    assert validated(body) is not None  # valid requests take the fast path


def _with_mark(message: Message) -> int:
    """Every string of ``message`` and the messages in it, a "ÿ" appended; how many."""
    marked = 0
    for item, value in message.ListFields():
        if item.type == FieldDescriptor.TYPE_STRING:
            if isinstance(value, str):
                setattr(message, item.name, value + "ÿ")
                marked += 1
            else:
                value[:] = [text + "ÿ" for text in value]
                marked += len(value)
        elif item.message_type is not None:
            for inner in (value,) if isinstance(value, Message) else value:
                marked += _with_mark(inner)
    return marked


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_requests)
def test_strings_that_are_not_utf8_are_read_alike_by_both_paths(
        request: ExportTraceServiceRequest) -> None:
    """Any request built with the protobuf API, every string in it ending in bytes that
    are not UTF-8 (as long as the "ÿ" they replace, so every length stays right):
    protobuf refuses it, and both paths read it, each invalid byte as U+FFFD (the C reader
    itself, without handing the request to protobuf)."""
    marked = _with_mark(request)
    body = request.SerializeToString().replace("ÿ".encode(), b"\xff\xfe")
    assert protobuf_accepts(body) == (marked == 0)
    for conventions in CONVENTIONS:
        native, python = both(body, conventions)
        assert isinstance(native, Batch) and native == python
        assert _otlp.scan(body, conventions, validate=True, lossy=True) == native


def test_the_same_batch_for_sdk_traces() -> None:
    """Realistic task traces, with an empty id refusing its span in both, and a
    wrong-length id making both refuse the request."""
    spans = [*task_trace("T-1", chats=3), *task_trace("T-2", failed=True, chats=1)]
    body = protobuf_body(spans)
    native, python = both(body, COUNTING)
    assert isinstance(native, Batch) and native.held == 6 and len(native.parts) == 2
    assert native == python
    spans[3].span_id = b""
    native, python = both(protobuf_body(spans), COUNTING)
    assert isinstance(native, Batch) and (native.held, native.rejected) == (5, 1)
    assert native == python
    spans[3].span_id = b"\x01" * 7
    assert both(protobuf_body(spans), COUNTING) == ("DecodeError", "DecodeError")


# -- encodings protobuf accepts but never writes -------------------------------------------


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, payload: bytes | int, wire: int = 2) -> bytes:
    """One field in wire format (tests only: the product writes no protobuf by hand)."""
    tag = varint(number << 3 | wire)
    if wire == 2:
        assert isinstance(payload, bytes)
        return tag + varint(len(payload)) + payload
    if wire == 0:
        assert isinstance(payload, int)
        return tag + varint(payload)
    assert isinstance(payload, bytes)
    return tag + payload  # fixed64, fixed32, or the inside of a group


def group(number: int, inside: bytes) -> bytes:
    return varint(number << 3 | 3) + inside + varint(number << 3 | 4)


def request_of(*spans: bytes, resource: bytes = b"") -> bytes:
    scope = b"".join(field(2, s) for s in spans)
    return field(1, resource + field(2, scope))


TASK = KeyValue(key="orchestrator.task.id", value=AnyValue(string_value="T-9"))
TOKENS = KeyValue(key="gen_ai.usage.input_tokens", value=AnyValue(int_value=12))
IDS = field(1, b"\x07" * 16) + field(2, b"\x08" * 8)


@pytest.mark.parametrize("span", [
    # fields out of order, ids given twice (the last counts)
    field(9, TOKENS.SerializeToString()) + field(2, b"\x01" * 8) + IDS,
    # a KeyValue with its key after its value, and its value given twice (merged)
    IDS + field(9, field(2, AnyValue(int_value=5).SerializeToString())
                + field(2, AnyValue(string_value="x").SerializeToString())
                + field(1, b"gen_ai.usage.input_tokens")),
    # an AnyValue with two members (the last counts) and arrays given twice (merged)
    IDS + field(9, field(1, b"gen_ai.request.model") + field(
        2, field(1, b"a") + field(3, 7, wire=0))),
    IDS + field(9, field(1, b"gen_ai.request.model") + field(
        2, field(5, field(1, AnyValue(string_value="a").SerializeToString()))
        + field(5, field(1, AnyValue(int_value=2).SerializeToString())))),
    # status given twice (merged): ERROR then a message only
    IDS + field(15, field(3, 2, wire=0)) + field(15, field(2, b"boom")),
    # a negative status code and end time
    IDS + field(15, field(3, 2**64 - 1, wire=0)) + field(8, b"\xff" * 8, wire=1),
    # known fields with the wrong wire type are unknown fields; groups of unknown fields
    IDS + field(9, 5, wire=0) + field(1, 3, wire=0)
    + group(40, field(1, b"x") + group(2, field(3, 1, wire=0)))
    + field(41, b"\x00" * 4, wire=5) + field(9, TOKENS.SerializeToString()),
    # a task span split into two occurrences of its attributes
    IDS + field(9, TASK.SerializeToString()) + field(5, "tâche".encode())
    + field(9, KeyValue(key="orchestrator.agent.name",
                        value=AnyValue(string_value="coder")).SerializeToString()),
    # an empty key and a KeyValue with no value
    IDS + field(9, b"") + field(9, field(1, b"error.type")),
])
def test_the_same_batch_for_non_canonical_encodings(span: bytes) -> None:
    body = request_of(span, resource=field(1, field(1, KeyValue(
        key="service.name", value=AnyValue(string_value="a")).SerializeToString()))
        + field(1, field(1, KeyValue(key="host.name", value=AnyValue(
            string_value="b")).SerializeToString())))  # the resource given twice
    ExportTraceServiceRequest.FromString(body)  # protobuf accepts it
    assert_same(body)


# -- arbitrary and damaged bytes -------------------------------------------------------------

_SAMPLE = protobuf_body([*task_trace("T-1", chats=2), *task_trace("T-2", failed=True)])


def scan_raw(body: bytes) -> Batch | None:
    """The C reader on unvalidated bytes: a batch or DecodeError (its ValueError, or
    protobuf's error from a value it hands to protobuf), nothing else."""
    try:
        return _otlp.scan(body, COUNTING)
    except DecodeError:
        return None


damage: Callable[..., bytes] = lambda body, at, value: (  # noqa: E731
    body[:at] + bytes([value]) + body[at + 1:])


def test_a_nested_value_weighs_what_it_holds() -> None:
    """A task span's kept attribute holding arrays and key-value lists counts the text and
    bytes inside them, at every depth, against the byte bounds, in both readers alike."""
    spans = task_trace("T-1", chats=0)
    mib = 2**20
    nested = AnyValue(array_value=ArrayValue(values=[
        AnyValue(kvlist_value=KeyValueList(values=[
            KeyValue(key="k", value=AnyValue(string_value="x" * mib))])),
        AnyValue(bytes_value=b"y" * mib),
        AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="z" * mib)]))]))
    spans[0].attributes.append(KeyValue(key="orchestrator.task.title", value=nested))
    native, python = both(protobuf_body(spans), ORCHESTRATOR)
    assert isinstance(native, Batch) and native == python
    (_, record, size), = native.parts[0].tasks
    assert isinstance(record.attributes["orchestrator.task.title"], list)
    assert size > 3 * mib


def test_a_contribution_weighs_the_text_it_keeps() -> None:
    """A contributing span's kept values (a model name, here 1 MiB long) count in its
    part's size, in both readers alike."""
    spans = task_trace("T-1", chats=1)
    chat = next(span for span in spans if any(a.key == "gen_ai.request.model"
                                               for a in span.attributes))
    chat.attributes.append(KeyValue(key="gen_ai.response.model",
                                    value=AnyValue(string_value="m" * 2**20)))
    native, python = both(protobuf_body(spans), ORCHESTRATOR)
    assert isinstance(native, Batch) and native == python
    assert native.parts[0].size > 2**20 and native.size > 2**20


def test_a_task_weighs_its_status_message_and_resource() -> None:
    """A task span's status message and its resource's attributes are held with it: both
    count in its size, in both readers alike."""
    spans = task_trace("T-1", chats=0)
    mib = 2**20
    spans[0].status.message = "m" * mib
    body = otlp_request(spans)
    body.resource_spans[0].resource.attributes.append(
        KeyValue(key="app.blob", value=AnyValue(string_value="r" * mib)))
    native, python = both(body.SerializeToString(), ORCHESTRATOR)
    assert isinstance(native, Batch) and native == python
    (_, record, size), = native.parts[0].tasks
    assert len(record.status_message) == mib and "app.blob" in record.resource
    assert size > 2 * mib


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(_SAMPLE) - 1), st.integers(0, 255), st.integers(0, len(_SAMPLE)))
def test_damaged_requests_agree_and_never_crash(at: int, value: int, cut: int) -> None:
    """A real request with one byte changed, then cut short: both paths agree, and the
    extension alone (no validation first) returns or raises ValueError."""
    body = damage(_SAMPLE, at, value)[:cut]
    scan_raw(body)
    assert_no_laxer_than_protobuf(body)
    assert_same(body)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=512))
def test_arbitrary_bytes_never_crash_the_extension(body: bytes) -> None:
    for wrapped in (body, request_of(body), request_of(IDS + field(9, body))):
        scan_raw(wrapped)
        assert_no_laxer_than_protobuf(wrapped)
    assert_same(request_of(body))


def test_deeply_nested_groups_are_refused_not_followed() -> None:
    """A million nested groups end in ValueError, not a stack overflow."""
    depth = 1_000_000
    body = request_of(IDS + varint(40 << 3 | 3) * depth + varint(40 << 3 | 4) * depth)
    with pytest.raises(DecodeError, match="nested too deeply"):
        _otlp.scan(body, ORCHESTRATOR)
    assert both(body, ORCHESTRATOR) == ("DecodeError", "DecodeError")


def test_bad_arguments_are_type_errors() -> None:
    class WithDict(tuple):  # type: ignore[type-arg]  # its instances have a __dict__
        pass

    def call(body: object, keys: object, contribution: object = Contribution,
             part: object = Part) -> None:
        _otlpscan.scan(body, keys, None, False, contribution, part, _otlp._decode_value, 1, 1, 1)

    for body, keys, contribution, part in [
        (b"", ("k",), dict, Part),
        (b"", ("k",), Contribution, list),
        (b"", ("k",), WithDict, Part),
        (b"", ("k",), Contribution, WithDict),
        (b"", (1,), Contribution, Part),
        (b"", (), Contribution, Part),
        ("text", ("k",), Contribution, Part),
    ]:
        with pytest.raises(TypeError):
            call(body, keys, contribution, part)
    call(b"", ("k",))
    for contributing in (b"", b"\x01\x01", "\x01", [1]):  # bytes, one per key
        with pytest.raises(TypeError, match="contributing"):
            _otlpscan.scan(b"", ("k",), None, False, Contribution, Part, _otlp._decode_value,
                           1, 1, 1, None, None, contributing)
    _otlpscan.scan(b"", ("k",), None, False, Contribution, Part, _otlp._decode_value,
                   1, 1, 1, None, None, b"\x00")


def test_what_protobuf_accepts_and_the_reader_refuses_takes_the_python_path() -> None:
    """Field number 0 inside an unknown group: upb skips it, the C reader refuses it; the
    request is still decoded (by the pure-Python path), not answered with 400."""
    body = request_of(IDS) + group(10, varint(0) + varint(1)) + request_of(IDS)
    ExportTraceServiceRequest.FromString(body)
    with pytest.raises(DecodeError, match="invalid field number"):
        _otlp.scan(body, ORCHESTRATOR)
    assert_same(body)
    assert decode(body, PROTOBUF, ORCHESTRATOR).valid == 2


def test_a_value_member_the_reader_does_not_know_is_read_by_protobuf() -> None:
    """AnyValue fields beyond string..bytes (string_value_strindex in newer OTLP) or with
    an unexpected wire type are decoded by protobuf, as the pure-Python path does."""
    tokens = field(1, b"gen_ai.usage.input_tokens")
    for value in (field(8, 100, wire=0), field(3, b"\x01", wire=2), field(9, 5, wire=0)):
        body = request_of(IDS + field(9, tokens + field(2, value)))
        ExportTraceServiceRequest.FromString(body)
        assert_same(body)


def test_bad_utf8_in_a_task_span_is_read_with_replacement_characters() -> None:
    """Unvalidated bytes (a body read once its strings are taken as bytes) with a broken
    name or status message: each invalid sequence is U+FFFD, as with_valid_utf8 makes it."""
    keys = kept_keys(COUNTING)
    for name, message in ((b"\xff", b"\xfe"), (b"ok", b"\xfe"), (b"\xff", b"ok")):
        body = request_of(IDS + field(9, TASK.SerializeToString()) + field(5, name)
                          + field(15, field(2, message)))
        parts = _otlpscan.scan(body, keys, None, True, Contribution, Part, _otlp._decode_value,
                               1, 1, 1)[0]
        [(_, read_name, _, _, _, _, _, read_message, *_)] = parts[0].tasks
        assert read_name == name.decode("utf-8", "replace")
        assert read_message == message.decode("utf-8", "replace")


_VALUES = [  # the bytes of an AnyValue, of every member and around every limit
    b"", field(1, b""), field(1, b"model"), field(1, "é🙂".encode()), field(1, b"\xff"),
    field(1, b"\xed\xa0\x80"), field(1, b"x" * 126), field(1, b"x" * 200),
    field(7, b""), field(7, b"\xff\x00"), field(2, 0, wire=0), field(2, 300, wire=0),
    *(field(3, value, wire=0) for value in (0, 1, 127, 128, 2**63 - 1, 2**64 - 1)),
    b"\x18" + b"\xff" * 10 + b"\x01", b"\x18\x80", b"\x18",  # too long, cut short
    field(4, b"\x00" * 7 + b"\x40", wire=1), b"\x21" + b"\x00" * 7,
    field(1, b"a") + field(3, 5, wire=0), field(3, 5, wire=0) + field(3, 6, wire=0),
    field(8, 1, wire=0), b"\x08\x01", b"\x0a\x05ab", field(1, b"a") + b"\x00",
]
_KEY_BYTES = [b"gen_ai.usage.input_tokens", b"gen_ai.request.model", b"http.url", b"",
              b"\xffkey", b"k" * 130]


@pytest.mark.parametrize("value", _VALUES)
def test_attribute_forms_agree_with_protobuf(value: bytes) -> None:
    """Attributes around the limits of the reader's shortcut for the usual KeyValue (key,
    then a value holding one member, lengths in one byte), and just past them: the same
    batch as the pure-Python path, and nothing protobuf refuses is accepted."""
    for key in _KEY_BYTES:
        for pair in (field(1, key) + field(2, value),  # the usual form
                     field(2, value) + field(1, key),  # value first
                     field(1, key) + field(2, value) + field(3, 1, wire=0),  # more after
                     field(1, key) + field(2, value) + b"\x00",  # then no valid field
                     field(1, key) + b"\x12" + varint(len(value) + 1) + value,  # cut short
                     field(1, key) + b"\x12" + varint(len(value) + 1) + value + b"\x00"):
            body = request_of(IDS + field(9, pair))
            assert_no_laxer_than_protobuf(body)
            assert_same(body)


@pytest.mark.parametrize("length", [1, 62, 63, 64, 200])
def test_kept_keys_of_any_length_are_found(length: int) -> None:
    marker = "m" * length
    conventions = dataclasses.replace(ORCHESTRATOR, task_marker=marker)
    for key, held in ((marker, 1), ("n" * length, 0), (marker + "m", 0)):
        body = request_of(IDS + field(9, KeyValue(
            key=key, value=AnyValue(string_value="T-1")).SerializeToString()))
        native, python = both(body, conventions)
        assert native == python
        assert isinstance(native, Batch) and native.held == held


def test_copies_within_a_part_are_left_out_and_counted() -> None:
    """A kept span whose span id a span kept before it in the same part has (the same
    span twice, or a task span and a contribution sharing an id) is left out and counted;
    in another part of the request it is kept (assembly tells those copies apart)."""
    first = task_trace("T-1", chats=2)
    other = task_trace("T-2", chats=1)
    big = task_trace("T-3", chats=100)
    clash = Span()
    clash.CopyFrom(first[2])
    clash.span_id = first[0].span_id  # a chat span with the task span's id
    for spans, duplicates, held in (
        (first + first, 3, 3),
        (first[:1] + first[:1] + first[2:] + first[2:3], 2, 3),
        ([*first, clash], 1, 3),
        (first + other + first, 0, 8),
        (big + big[40:] + big[:1], 63, 101),  # more ids than the first table holds
    ):
        body = protobuf_body(spans)
        for conventions in CONVENTIONS[:2]:
            native, python = both(body, conventions)
            assert native == python
            assert isinstance(native, Batch)
            assert (native.duplicates, native.held) == (duplicates, held)
            assert native.valid == len(spans)


def test_lists_assembly_keeps_are_left_out_of_garbage_collection() -> None:
    """A part's span ids, and its contributions when none holds a container, can be in no
    reference cycle: the garbage collector does not walk them while assembly holds them.
    A contribution with an array value is tracked, and so is its part's list."""
    plain = task_trace("T-1", chats=2)
    listed = task_trace("T-2", chats=1)
    listed[2].attributes.append(KeyValue(key="gen_ai.request.model", value=AnyValue(
        array_value=ArrayValue(values=[AnyValue(string_value="m")]))))
    for spans in (plain + listed, listed + plain):
        parts = decode(protobuf_body(spans), PROTOBUF, ORCHESTRATOR).parts
        assert len(parts) == 2 and not any(gc.is_tracked(part.span_ids) for part in parts)
        for part in parts:
            values = [item.attributes.get("gen_ai.request.model") for item in part.contributions]
            assert gc.is_tracked(part.contributions) == (["m"] in values)
            assert [gc.is_tracked(item) for item in part.contributions] == [
                value == ["m"] for value in values]


# -- validation: never laxer than protobuf ------------------------------------------------

_VARINTS = {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_INT32,
            FieldDescriptor.TYPE_BOOL, FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_ENUM,
            FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64}
_FIXED = {FieldDescriptor.TYPE_FIXED64: 8, FieldDescriptor.TYPE_SFIXED64: 8,
          FieldDescriptor.TYPE_DOUBLE: 8, FieldDescriptor.TYPE_FIXED32: 4,
          FieldDescriptor.TYPE_SFIXED32: 4, FieldDescriptor.TYPE_FLOAT: 4}
_strings = st.one_of(st.text(max_size=6).map(str.encode), st.binary(max_size=4))


def _raw_field(number: int, wire: int, data: st.DataObject) -> bytes:
    """A field of any wire type holding arbitrary content."""
    if wire == 0:
        return field(number, data.draw(st.integers(0, 2**64 - 1)), wire=0)
    if wire == 1 or wire == 5:
        size = 8 if wire == 1 else 4
        return field(number, data.draw(st.binary(min_size=size, max_size=size)), wire=wire)
    if wire == 3:
        return group(number, data.draw(st.binary(max_size=4)))
    return field(number, data.draw(_strings))


def wire_message(descriptor: Descriptor, data: st.DataObject, depth: int = 0) -> bytes:
    """Any message of ``descriptor``'s type in wire format, often not a valid one: strings
    with any bytes, fields with another wire type, unknown fields and groups."""
    out = b""
    for _ in range(data.draw(st.integers(0, 4 if depth < 5 else 1))):
        roll = data.draw(st.integers(0, 19))
        if roll == 0 or not descriptor.fields:
            out += _raw_field(data.draw(st.integers(20, 60)), data.draw(
                st.sampled_from([0, 1, 2, 3, 5])), data)
            continue
        item = data.draw(st.sampled_from(list(descriptor.fields)))
        if roll == 1:  # a known field with any wire type
            out += _raw_field(item.number, data.draw(st.sampled_from([0, 1, 2, 3, 5])), data)
        elif item.message_type is not None:
            out += field(item.number, wire_message(item.message_type, data, depth + 1)
                         if depth < 8 else b"")
        elif item.type == FieldDescriptor.TYPE_STRING:
            out += field(item.number, data.draw(_strings))
        elif item.type == FieldDescriptor.TYPE_BYTES:
            out += field(item.number, data.draw(st.binary(max_size=16)))
        elif item.type in _VARINTS:
            out += field(item.number, data.draw(st.integers(0, 2**64 - 1)), wire=0)
        else:
            size = _FIXED[item.type]
            out += field(item.number, data.draw(st.binary(min_size=size, max_size=size)),
                         wire=1 if size == 8 else 5)
    return out


@pytest.mark.slow
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_message_the_reader_validates_protobuf_accepts(data: st.DataObject) -> None:
    """Requests generated from the installed descriptors, every message type at any depth,
    with strings of any bytes, wrong wire types, unknown fields and groups."""
    body = wire_message(ExportTraceServiceRequest.DESCRIPTOR, data)
    assert_no_laxer_than_protobuf(body)
    if protobuf_accepts(body):
        assert_same(body)


def _named(name: bytes) -> bytes:
    return request_of(IDS + field(5, name))


def test_utf8_is_checked_as_protobuf_and_python_check_it() -> None:
    """Every one- and two-byte string, and three- and four-byte ones around every boundary
    (overlong forms, surrogates, past U+10FFFF, cut short), in a span name."""
    samples = [bytes([a, b]) for a in range(256) for b in range(256)]
    samples += [bytes([a, b, c]) for a in range(0xE0, 0x100) for b in range(0x70, 0xD0)
                for c in (0x7F, 0x80, 0xBF, 0xC0)]
    samples += [bytes([a, b, c, d]) for a in range(0xF0, 0x100) for b in range(0x70, 0xD0)
                for c in (0x80, 0xBF, 0xC0) for d in (0x7F, 0x80, 0xBF)]
    for name in samples:
        for text in (name, b"long ascii prefix" + name + b"!"):
            try:
                text.decode("utf-8")
                valid = True
            except UnicodeDecodeError:
                valid = False
            body = _named(text)
            assert (validated(body) is not None) is valid, text
            assert protobuf_accepts(body) is valid, text


@settings(max_examples=500, deadline=None)
@given(st.text(min_size=1, max_size=40), st.data())
def test_utf8_damaged_anywhere_in_a_string(text: str, data: st.DataObject) -> None:
    encoded = text.encode()
    at = data.draw(st.integers(0, len(encoded) - 1))
    damaged = damage(encoded, at, data.draw(st.integers(0x80, 0xFF)))
    for name in (encoded, damaged):
        body = _named(name)
        assert (validated(body) is not None) is protobuf_accepts(body)


@pytest.mark.parametrize("where", [
    "event name", "link trace state", "scope version", "entity ref id key", "schema url",
])
def test_strings_the_reader_never_reads_are_validated(where: str) -> None:
    """Invalid UTF-8 in fields the reader skips still makes it refuse, as protobuf does:
    the rules come from the descriptors, not from what the reader reads. ``decode`` then
    reads the request with each invalid sequence as U+FFFD (as the Collector takes it)."""

    def body_with(text: bytes) -> bytes:
        span = IDS
        scope = resource = b""
        if where == "event name":
            span += field(11, field(2, text))
        elif where == "link trace state":
            span += field(13, field(3, text))
        elif where == "scope version":
            scope = field(1, field(2, text))
        elif where == "entity ref id key":
            resource = field(1, field(3, field(3, b"ok") + field(3, text)))
        else:
            scope = field(3, text)
        return field(1, resource + field(2, scope + field(2, span)))

    body = body_with(b"\xc0\xaf")
    assert not protobuf_accepts(body)
    assert validated(body) is None
    replaced = body_with("\ufffd\ufffd".encode())
    assert protobuf_accepts(replaced) and validated(replaced) is not None
    repaired = _otlp.with_valid_utf8(body)
    assert repaired is not None
    assert ExportTraceServiceRequest.FromString(repaired) == ExportTraceServiceRequest.FromString(
        replaced)
    assert decode(body, PROTOBUF, ORCHESTRATOR) == decode(replaced, PROTOBUF, ORCHESTRATOR)


def _nested(depth: int) -> bytes:
    """A span attribute holding arrays ``depth`` deep (the request is 6 + 2 * depth deep)."""
    value = field(1, b"x")
    for _ in range(depth):
        value = field(5, field(1, value))
    return request_of(IDS + field(9, field(1, b"k") + field(2, value)))


def test_deep_nesting_is_left_to_protobuf() -> None:
    """Past its depth limit the reader refuses, and protobuf decides (it allows 100)."""
    assert validated(_nested(29)) is not None  # 64 deep
    deeper = _nested(30)
    assert validated(deeper) is None and protobuf_accepts(deeper)
    assert decode(deeper, PROTOBUF, ORCHESTRATOR).valid == 1
    too_deep = _nested(60)
    assert not protobuf_accepts(too_deep)
    with pytest.raises(DecodeError):
        decode(too_deep, PROTOBUF, ORCHESTRATOR)


def test_tags_and_lengths_longer_than_protobuf_reads_are_refused() -> None:
    """Tags and lengths are 32-bit varints: protobuf refuses them in more than 5 bytes."""
    for padding in range(5):  # the name's tag and length, padded with redundant bytes
        tag = bytes([0x2A | 0x80] + [0x80] * padding + [0x00]) if padding else b"\x2a"
        length = bytes([0x82] + [0x80] * padding + [0x00]) if padding else b"\x02"
        for body in (request_of(IDS + tag + b"\x02ok"), request_of(IDS + b"\x2a" + length
                                                                   + b"ok")):
            accepted = padding <= 3  # 5 bytes at most
            assert protobuf_accepts(body) is accepted
            assert (validated(body) is not None) is accepted


def test_wire_rules_the_reader_cannot_take_are_refused() -> None:
    """Field numbers past the reader's tables or a schema without the six messages it
    reads: ValueError, so that protobuf validates instead."""
    six: list[list[tuple[int, int, int]]] = [[] for _ in range(6)]
    assert _otlpscan.schema(six) is not None
    with pytest.raises(ValueError):
        _otlpscan.schema(six[:5])
    with pytest.raises(ValueError):
        _otlpscan.schema([[(5000, 9, 0)], *six[1:]])
    with pytest.raises(ValueError):
        _otlpscan.schema([[(1, 11, 6)], *six[1:]])  # a message type past the end


def test_wire_rules_are_read_once_whatever_their_numbers_do() -> None:
    """A field number whose conversion changes the list of rules given: it was copied
    first, and each number is read once (memory-safe, as an AddressSanitizer build
    showed)."""
    fields: list[tuple[object, int, int]] = []

    class Changing:
        def __index__(self) -> int:
            fields[:] = [(4000, 9, 0)]  # out of range, had it been read again
            return 2

    fields[:] = [(1, 9, 0), (Changing(), 9, 0), (3, 9, 0)]
    assert _otlpscan.schema([fields, [], [], [], [], []]) is not None
    assert fields == [(4000, 9, 0)]
