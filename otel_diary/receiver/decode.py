"""OTLP trace payloads in, the spans trace assembly needs out; OTLP responses back.

:func:`decode` turns an ``ExportTraceServiceRequest`` body (protobuf or OTLP/JSON) into a
:class:`Batch`. What cannot be decoded raises :class:`DecodeError` (a permanent error:
HTTP 400, gRPC INVALID_ARGUMENT). Together with the receivers, the only module that
knows OTLP types.

Most spans of an agent's trace (HTTP calls, internal steps) add nothing to a diary, so
per span this reads only the trace and span ids (to validate them) and the attribute
keys. A span becomes an item only when it is a task span (copied whole, as a
:class:`SpanRecord`) or contributes to its task (tokens, models, operation; errors when
the conventions count failed children): then it keeps the values of those attributes
and its end time (a failed one also its first exception event and status description).
Every other span is only counted, its parent link kept (16 bytes, so assembly can follow
a task span's ancestors through it). Reading a protobuf field from Python costs far more
than parsing it, so nothing else is read.

Protobuf bodies are read from the bytes by the C extension ``_otlpscan`` when it is
built: it creates Python objects only for what is kept, and validates the request as it
reads it, against rules compiled from the descriptors protobuf itself decodes with (wire
types, nested messages, UTF-8 in strings). It is stricter than protobuf: a body it
refuses goes to ``ExportTraceServiceRequest.FromString`` for the verdict, and is then
read through the parsed message. Both paths give the same :class:`Batch`. A body
protobuf refuses only for strings that are not UTF-8 (which the Collector takes and
forwards) is read with each invalid sequence as U+FFFD (:func:`with_valid_utf8`).

This is the only module that imports the extension. The pure-Python reader
(:func:`extract`) is the reference: ``tests/receiver/test_native.py`` holds the C reader
to it and to ``FromString``, and ``make sanitize`` runs those tests on a build with
AddressSanitizer and UndefinedBehaviorSanitizer.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError as _ProtobufDecodeError
from google.protobuf.message import Message
from google.rpc import status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import (
    ResourceSpans,
    ScopeSpans,
    Span,
)

from otel_diary.assembly.batch import (
    ATTRIBUTE_BYTES,
    CONTRIBUTION_BYTES,
    TASK_BYTES,
    Batch,
    Contribution,
    Part,
    estimate,
    weight,
)
from otel_diary.conventions import Conventions
from otel_diary.errors import DecodeError
from otel_diary.pipeline.redact import redact
from otel_diary.receiver.json_reader import read_json
from otel_diary.receiver.records import (
    STATUS_ERROR,
    ZERO_ID,
    Links,
    kept_keys,
    span_record,
    valid_ids,
)
from otel_diary.record import SpanRecord, error_details

try:
    from otel_diary.receiver import _otlpscan  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler: the pure-Python path is used
    _otlpscan = None

NATIVE = _otlpscan is not None
"""Whether protobuf requests are read by the C extension."""


def _wire_rules(lossy: bool = False) -> object | None:
    """What the C reader validates a request against: for every message type in an
    ``ExportTraceServiceRequest``, each field's number, type and (for a message field)
    the index of its type, the six types it reads itself first. None when the reader
    cannot take them (field numbers past its tables): then ``FromString`` validates.
    ``lossy`` takes every string field for a bytes field: any bytes pass, and those it
    reads as text are read with each invalid sequence as U+FFFD."""
    order = [message.DESCRIPTOR for message in (
        ExportTraceServiceRequest, ResourceSpans, ScopeSpans, Span, KeyValue, AnyValue)]
    index = {descriptor.full_name: n for n, descriptor in enumerate(order)}
    for descriptor in order:  # grows while it is walked: every type reachable
        for item in descriptor.fields:
            inner = item.message_type
            if inner is not None and inner.full_name not in index:
                index[inner.full_name] = len(order)
                order.append(inner)
    try:
        rules: object = _otlpscan.schema([
            [(item.number, _BYTES if lossy and item.type == _STRING else item.type,
              index[item.message_type.full_name] if item.message_type is not None else 0)
             for item in descriptor.fields]
            for descriptor in order])
    except ValueError:
        return None
    return rules


_STRING, _BYTES = FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES
WIRE_RULES = _wire_rules() if NATIVE else None
LOSSY_RULES = _wire_rules(lossy=True) if NATIVE else None

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
MEDIA_TYPES = (PROTOBUF, JSON)




# -- decoding ----------------------------------------------------------------------------


def decode(body: bytes, media_type: str, conventions: Conventions, *,
           native: bool = NATIVE) -> Batch:
    """The items of an OTLP trace request in ``media_type`` (protobuf or JSON)."""
    if media_type == JSON:
        return read_json(body, conventions)
    native = native and not conventions.profiles  # the C reader knows one task marker
    if native and WIRE_RULES is not None:
        for lossy in (False, True):  # then strings that are not UTF-8, as the Collector
            try:
                return scan(body, conventions, validate=True, lossy=lossy)
            except DecodeError:
                pass  # invalid, or valid in a way the reader does not vouch for
    try:
        request = parse_protobuf(body)  # the verdict
    except DecodeError:  # on the strings made valid, if that is what it refused
        repaired = with_valid_utf8(body)
        if repaired is None:
            raise
        body = repaired
        request = parse_protobuf(body)
    if native:
        try:
            return scan(body, conventions)
        except DecodeError:
            pass  # protobuf accepted what the reader refuses (e.g. odd unknown groups)
    return extract(request, conventions, raw=body)


def parse_protobuf(body: bytes) -> ExportTraceServiceRequest:
    """The request a protobuf body holds; :class:`DecodeError` when it holds none."""
    try:
        return ExportTraceServiceRequest.FromString(body)
    except (_ProtobufDecodeError, RecursionError, ValueError) as exc:
        raise DecodeError(f"invalid protobuf: {exc}") from None


def with_valid_utf8(body: bytes, message: type[Message] = ExportTraceServiceRequest
                    ) -> bytes | None:
    """``body`` (a ``message``) with every string that is not UTF-8 made so, each invalid
    sequence becoming U+FFFD, as OpenTelemetry's policy for invalid UTF-8 asks (rather
    than the whole batch refused); None when that is not what keeps protobuf from reading
    it. The Collector's receiver reads such strings as they are and sends them on, so a
    gateway Collector passes on what one app's SDK let through among every other app's
    spans. Read with string fields taken as bytes, then written again: only for bodies
    protobuf refuses."""
    lenient, strings = _lenient()
    try:
        parsed = lenient[message.DESCRIPTOR.full_name].FromString(body)
    except (_ProtobufDecodeError, RecursionError, ValueError):
        return None
    if not _repair(parsed, strings):
        return None
    repaired: bytes = parsed.SerializeToString()
    return repaired


@functools.cache
def _lenient() -> tuple[dict[str, Any], frozenset[str]]:
    """The messages of an ``ExportTraceServiceRequest`` by full name, with every string
    field a bytes field; and the full names of those fields."""
    from google.protobuf import descriptor_pb2  # only for such bodies

    pool = descriptor_pool.DescriptorPool()
    strings: set[str] = set()
    added: set[str] = set()
    names: list[str] = []

    def add(file: Any) -> None:
        if file.name in added:
            return
        for dependency in file.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        pending = [(f"{proto.package}.{message.name}", message) for message in proto.message_type]
        while pending:
            name, message = pending.pop()
            names.append(name)
            pending += [(f"{name}.{nested.name}", nested) for nested in message.nested_type]
            for item in message.field:
                if item.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING:
                    item.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
                    strings.add(f"{name}.{item.name}")
        pool.AddSerializedFile(proto.SerializeToString())
        added.add(file.name)

    add(ExportTraceServiceRequest.DESCRIPTOR.file)
    classes = {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
               for name in names}
    return classes, frozenset(strings)


def _repair(message: Any, strings: frozenset[str]) -> bool:
    """Make every string of ``message`` (taken as bytes) UTF-8; whether one was not."""
    changed = False
    for item, value in message.ListFields():
        if item.message_type is not None:
            for inner in (value,) if isinstance(value, Message) else value:
                changed |= _repair(inner, strings)
        elif item.full_name in strings:
            values = [value] if isinstance(value, bytes) else list(value)
            fixed = [text.decode("utf-8", "replace").encode() for text in values]
            if fixed == values:
                continue
            changed = True
            if isinstance(value, bytes):
                setattr(message, item.name, fixed[0])
            else:
                del value[:]
                value.extend(fixed)
    return changed


_HEX = {16: re.compile(r"[0-9a-fA-F]{32}"), 8: re.compile(r"[0-9a-fA-F]{16}")}
_ID_FIELDS = (("traceId", "trace_id", 16), ("spanId", "span_id", 8),
              ("parentSpanId", "parent_span_id", 8))


def parse_json(body: bytes) -> ExportTraceServiceRequest:
    """The request an OTLP/JSON body holds, as a protobuf message; ids are read as hex.

    :func:`decode` reads OTLP/JSON with :func:`~otel_diary.receiver.json_reader.read_json`
    instead, several times faster: this slower route through ``json_format`` is the
    reference its tests compare it to.

    ``json_format`` alone would read a hex id as base64 and silently make a 24-byte trace
    id of it, so ids are converted here first. Unknown fields are ignored.
    """
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise DecodeError(f"invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise DecodeError("invalid JSON: expected an object with resourceSpans")
    _hex_ids_to_base64(data)
    try:
        return json_format.ParseDict(data, ExportTraceServiceRequest(),
                                     ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, AttributeError, KeyError,
            RecursionError) as exc:
        raise DecodeError(f"invalid OTLP/JSON: {exc}") from None


def _members(container: object, *names: str) -> Iterable[dict[str, Any]]:
    """The objects of the list that ``container`` holds under one of ``names``."""
    if not isinstance(container, dict):
        return ()
    for name in names:
        value = container.get(name)
        if isinstance(value, list):
            return [item for item in value if isinstance(item, dict)]
    return ()


def _hex_ids_to_base64(data: dict[str, Any]) -> None:
    for r, resource_spans in enumerate(_members(data, "resourceSpans", "resource_spans")):
        for s, scope_spans in enumerate(_members(resource_spans, "scopeSpans", "scope_spans")):
            for n, span in enumerate(_members(scope_spans, "spans")):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                _convert_ids(span, where)
                for k, link in enumerate(_members(span, "links")):
                    _convert_ids(link, f"{where}.links[{k}]")


def _convert_ids(obj: dict[str, Any], where: str) -> None:
    for camel, snake, size in _ID_FIELDS:
        for name in (camel, snake):
            value = obj.get(name)
            if not isinstance(value, str) or value == "":
                continue
            if not _HEX[size].fullmatch(value):
                raise DecodeError(
                    f"{where}.{camel}: expected {2 * size} hex digits (OTLP/JSON ids are hex, "
                    f"not base64), got {value[:48]!r}")
            obj[name] = base64.b64encode(bytes.fromhex(value)).decode("ascii")


def any_value(value: AnyValue) -> object:
    """An attribute value as plain data: str, bool, int, float, bytes, list or dict."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind)


def attributes(pairs: Iterable[KeyValue]) -> dict[str, object]:
    return {kv.key: any_value(kv.value) for kv in pairs}


def extract(request: ExportTraceServiceRequest, conventions: Conventions, *,
            raw: bytes | None = None) -> Batch:
    """The task spans and contributing spans of ``request``; every other span is counted.

    Spans with an empty or all-zero trace or span id are refused; a trace or span id of
    another length (or a task span's parent id) makes the request undecodable. A kept
    span with the span id of one kept before it in the same part is a copy, left out and
    counted.
    With the protobuf ``raw`` body at hand, attribute keys are not read at all when none
    of the keys that matter occurs anywhere in it.
    """
    marker = conventions.task_marker
    detecting = bool(conventions.profiles)  # auto: any profile's marker
    keys = kept_keys(conventions)
    wanted = {key: key for key in keys}  # to itself: what is kept shares one str per key
    if raw is not None and not any(key.encode() in raw for key in keys):
        wanted = {}  # no span of this request has a key that matters
    child_errors = conventions.recover_on_child_errors
    batch = Batch()
    parts = batch.parts
    part: Part | None = None
    part_ids: set[bytes] = set()  # span ids kept in the part: a copy is left out
    links = Links(batch.links)
    valid = held = size = 0
    for resource_spans in request.resource_spans:
        resource: dict[str, object] | None = None
        resource_size = 0
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                trace_id = span.trace_id
                span_id = span.span_id
                if not valid_ids(trace_id, span_id, span.name):
                    batch.rejected += 1
                    batch.reason = batch.reason or ZERO_ID
                    continue
                valid += 1
                links.add(trace_id, span_id, span.parent_span_id)
                found: dict[str, object] | None = None
                if wanted:
                    for kv in span.attributes:
                        key = wanted.get(kv.key)
                        if key is not None:
                            if found is None:
                                found = {}
                            value = kv.value  # most are strings or integers: one read
                            found[key] = (value.string_value or value.int_value
                                          or any_value(value))
                is_error = child_errors and span.status.code == STATUS_ERROR
                if found is None and not is_error:
                    continue
                task = (found is not None and (marker in found or detecting)
                        and conventions.is_task(found))
                if not task and not conventions.contributes(found or (), is_error):
                    continue
                if part is None or part.trace_id != trace_id:
                    part = Part(trace_id, [], [], [], 0)  # its size is set below
                    parts.append(part)
                    part_ids = set()
                if span_id in part_ids:
                    batch.duplicates += 1
                    continue
                part_ids.add(span_id)
                held += 1
                if task:
                    if resource is None:
                        resource = attributes(resource_spans.resource.attributes)
                        resource_size = estimate(resource)
                    record = task_record(span, resource)
                    task_size = weight(record) + resource_size
                    size += task_size
                    part.tasks.append((span_id, record, task_size))
                    continue
                if is_error:
                    found = {**(found or {}), **error_details(
                        exception_attributes(span), span.status.message)}
                part.span_ids.append(span_id)
                part.contributions.append(
                    Contribution(found or {}, is_error, span.end_time_unix_nano))
    links.close()
    return batch.tally(held, valid, size)


def scan(body: bytes, conventions: Conventions, *, validate: bool = False,
         lossy: bool = False) -> Batch:
    """:func:`extract` for a protobuf body, read by the C extension: only the spans kept
    become Python objects. The body is one ``FromString`` accepted, or, with
    ``validate``, any: :class:`DecodeError` unless the reader finds it valid (with
    ``lossy`` too, its strings need not be UTF-8)."""
    keys = kept_keys(conventions)
    rules = (LOSSY_RULES if lossy else WIRE_RULES) if validate else None
    if validate and rules is None:
        raise DecodeError("the C reader has no wire rules to validate with")
    try:
        parts, held, valid, rejected, duplicates, size, links = _otlpscan.scan(
            body, keys, conventions.task_marker_values, conventions.recover_on_child_errors,
            Contribution, Part, _decode_value, CONTRIBUTION_BYTES, ATTRIBUTE_BYTES,
            TASK_BYTES, rules, error_details,
            bytes(key in conventions.child_keys for key in keys))  # Conventions.contributes
    except (ValueError, _ProtobufDecodeError) as exc:
        raise DecodeError(str(exc)) from None
    for part in parts:
        tasks = part.tasks
        for n, (span_id, name, start, end, parent, flags, code, message, span_attributes,
                resource, task_size) in enumerate(tasks):
            tasks[n] = (span_id, span_record(part.trace_id, span_id, name, start, end, parent,
                                             flags, code, message, span_attributes, resource),
                        task_size)
    return Batch(parts, held, valid, rejected, duplicates, ZERO_ID if rejected else "", size,
                 links)


def _decode_value(data: bytes, pair: bool = False) -> object:
    """An AnyValue's bytes (a KeyValue's with ``pair``) as plain data, for the extension;
    strings that are not UTF-8 (which only a lossy scan hands over) read as U+FFFD."""
    message = KeyValue if pair else AnyValue
    try:
        parsed = message.FromString(data)
    except _ProtobufDecodeError:
        repaired = with_valid_utf8(data, message)
        if repaired is None:
            raise
        parsed = message.FromString(repaired)
    return any_value(parsed.value if isinstance(parsed, KeyValue) else parsed)


def exception_attributes(span: Span) -> dict[str, object] | None:
    """The attributes of the span's first ``exception`` event, if it has one."""
    for event in span.events:
        if event.name == "exception":
            return attributes(event.attributes)
    return None


def task_record(span: Span, resource: Mapping[str, object]) -> SpanRecord:
    """A task span of a request, whole."""
    status = span.status
    return span_record(span.trace_id, span.span_id, span.name, span.start_time_unix_nano,
                       span.end_time_unix_nano, span.parent_span_id, span.flags, status.code,
                       status.message, attributes(span.attributes), resource)


# -- responses ---------------------------------------------------------------------------


def export_response(media_type: str, rejected: int = 0, message: str = "") -> bytes:
    """An ``ExportTraceServiceResponse`` in ``media_type``; ``partial_success`` when spans
    were refused."""
    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.CopyFrom(
            ExportTracePartialSuccess(rejected_spans=rejected, error_message=message))
    if media_type == JSON:
        return json.dumps(json_format.MessageToDict(response),
                          separators=(",", ":")).encode()
    return response.SerializeToString()


def status_body(media_type: str, code: int, message: str) -> bytes:
    """A ``google.rpc.Status`` error body in ``media_type`` (``code`` is a gRPC code); the
    message redacted, since it may quote the request (an exporter logs it)."""
    status = status_pb2.Status(code=code, message=redact(message))
    if media_type == PROTOBUF:
        return bytes(status.SerializeToString())
    return json.dumps(json_format.MessageToDict(status), separators=(",", ":")).encode()
