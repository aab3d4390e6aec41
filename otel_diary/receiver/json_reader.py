"""OTLP/JSON trace requests read straight from ``json.loads`` output into a :class:`Batch`.

It gives what :func:`~otel_diary.receiver.decode.extract` gives for the same request as
protobuf, without building protobuf messages: ids are hex (OTLP/JSON has them so; a
base64 id is refused), enums are integers (or their names), 64-bit integers may be
strings, field names are lowerCamelCase or the proto names, and unknown fields are
ignored. Like the protobuf reader it reads of each span only its ids and attribute keys,
and more only of the spans it keeps: each of those values is type-checked, and a wrong
type is a :class:`DecodeError`. Values it does not read (other attributes' values,
events, links) are skipped like unknown fields.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from otel_diary.assembly.batch import Batch, Contribution, Part, estimate, weight
from otel_diary.conventions import Conventions
from otel_diary.errors import DecodeError
from otel_diary.receiver.records import (
    STATUS_ERROR,
    ZERO_ID,
    Links,
    kept_keys,
    span_record,
    valid_ids,
)
from otel_diary.record import error_details

_STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_SURROGATE = re.compile("[\ud800-\udfff]")
_INT32 = (-(2**31), 2**31)
_INT64 = (-(2**63), 2**63)
_UINT32 = (0, 2**32)
_UINT64 = (0, 2**64)


def decoding_cost(text: bytes) -> int:
    """About the bytes ``json.loads`` holds for ``text`` at its peak, or more: a value costs
    a list slot and an object, a ``{`` or ``[`` a container with its slots, a string its
    object. OTLP/JSON takes 6 to 9 times its text (estimated 1.2 to 1.3 times that); a text
    of empty objects ``[{},{},…]`` takes 25 times its size. Counted at C speed, about 3 ms
    per MiB."""
    return (len(text) + 32 * text.count(b",") + 160 * (text.count(b"{") + text.count(b"["))
            + 16 * text.count(b'"'))


def read_json(body: bytes, conventions: Conventions) -> Batch:
    """The items of an OTLP/JSON ``ExportTraceServiceRequest`` body; bytes that are not
    UTF-8 in it are read as U+FFFD, as escaped lone surrogates are (:func:`_text`)."""
    try:
        try:
            data = json.loads(body)
        except UnicodeDecodeError:
            data = json.loads(body.decode("utf-8", "replace"))
    except (ValueError, RecursionError) as exc:
        raise DecodeError(f"invalid JSON: {exc}") from None
    if type(data) is not dict:
        raise DecodeError("invalid JSON: expected an object with resourceSpans")
    try:
        return read_document(data, conventions)
    except RecursionError:
        raise DecodeError("invalid OTLP/JSON: values nested too deeply") from None


def _field(obj: dict[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _messages(obj: dict[str, Any], camel: str, snake: str, where: str) -> list[dict[str, Any]]:
    """The objects of a repeated message field; a wrong type is a :class:`DecodeError`."""
    value = _field(obj, camel, snake)
    if value is None:
        return []
    if type(value) is not list or any(type(item) is not dict for item in value):
        raise DecodeError(f"invalid OTLP/JSON: {where}{camel}: expected a list of objects")
    return value


def _message(obj: dict[str, Any], camel: str, snake: str, where: str) -> dict[str, Any]:
    value = _field(obj, camel, snake)
    if value is None:
        return {}
    if type(value) is not dict:
        raise DecodeError(f"invalid OTLP/JSON: {where}{camel}: expected an object")
    return value


def _id(value: object, size: int, where: tuple[int, int, int], name: str) -> bytes:
    """A hex id as bytes; missing or empty: ``b""`` (refused later, as protobuf's is)."""
    if value is None or value == "":
        return b""
    if type(value) is str and len(value) == 2 * size:
        try:
            data = bytes.fromhex(value)
        except ValueError:
            data = b""
        if len(data) == size:
            return data
    shown = value[:48] if isinstance(value, str) else value
    r, s, n = where
    raise DecodeError(f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}].{name}: expected "
                      f"{2 * size} hex digits (OTLP/JSON ids are hex, not base64), "
                      f"got {shown!r}")


def _integer(value: object, bounds: tuple[int, int], what: str) -> int:
    """An integer field: a JSON number or a decimal string, as protobuf's JSON reads it."""
    if value is None:
        return 0
    number: int | None = None
    if isinstance(value, bool):
        pass
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float):
        if value.is_integer():
            number = int(value)
    elif isinstance(value, str) and " " not in value:
        try:
            number = int(value)
        except ValueError:
            try:
                real = float(value)
            except ValueError:
                real = 0.5
            if real.is_integer():
                number = int(real)
    if number is None or not bounds[0] <= number < bounds[1]:
        raise DecodeError(f"invalid OTLP/JSON: {what}: expected an integer, got {value!r:.48}")
    return number


def _text(value: object, what: str) -> str:
    """A string field's text; an escaped lone surrogate (``"\\ud83c"``, what JavaScript's
    ``JSON.stringify`` writes for a string cut inside a character, as the JS SDK's
    attribute length limit cuts one) becomes U+FFFD, as the Collector reads it."""
    if value is None:
        return ""
    if type(value) is not str:
        raise DecodeError(f"invalid OTLP/JSON: {what}: expected a string, got {value!r:.48}")
    return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value


_SPECIAL = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _double(value: object) -> float:
    if isinstance(value, bool):
        pass
    elif isinstance(value, int):
        return float(value)
    elif isinstance(value, float):
        if value == value and abs(value) != float("inf"):
            return value
    elif isinstance(value, str) and value != "nan":
        try:
            return float(value)
        except ValueError:
            special = _SPECIAL.get(value)
            if special is not None:
                return special
    raise DecodeError(f"invalid OTLP/JSON: doubleValue: expected a number, got {value!r:.48}")


def _bytes(value: object) -> bytes:
    if not isinstance(value, str):
        raise DecodeError(f"invalid OTLP/JSON: bytesValue: expected base64, got {value!r:.48}")
    try:
        encoded = value.encode("utf-8")
        return base64.urlsafe_b64decode(encoded + b"=" * (4 - len(encoded) % 4))
    except (binascii.Error, ValueError):
        raise DecodeError("invalid OTLP/JSON: bytesValue: invalid base64") from None


_ANY_FIELDS = {"stringValue": "s", "string_value": "s", "boolValue": "b", "bool_value": "b",
               "intValue": "i", "int_value": "i", "doubleValue": "d", "double_value": "d",
               "arrayValue": "a", "array_value": "a", "kvlistValue": "k", "kvlist_value": "k",
               "bytesValue": "y", "bytes_value": "y"}


def any_value(value: object) -> object:
    """An ``AnyValue`` object as plain data: str, bool, int, float, bytes, list or dict."""
    if value is None:
        return None
    if type(value) is not dict:
        raise DecodeError(f"invalid OTLP/JSON: an attribute value must be an object, got "
                          f"{value!r:.48}")
    kind = None
    inner: object = None
    for name, item in value.items():
        tag = _ANY_FIELDS.get(name)
        if tag is None or item is None:
            continue  # unknown, or unset
        if kind is not None:
            raise DecodeError("invalid OTLP/JSON: an attribute value holds two values")
        kind, inner = tag, item
    if kind is None:
        return None
    if kind == "s":
        return _text(inner, "stringValue")
    if kind == "i":
        return _integer(inner, _INT64, "intValue")
    if kind == "b":
        if type(inner) is not bool:
            raise DecodeError(f"invalid OTLP/JSON: boolValue: expected true or false, got "
                              f"{inner!r:.48}")
        return inner
    if kind == "d":
        return _double(inner)
    if kind == "y":
        return _bytes(inner)
    if type(inner) is not dict:
        raise DecodeError("invalid OTLP/JSON: arrayValue and kvlistValue must be objects")
    items = _messages(inner, "values", "values", "")
    if kind == "a":
        return [any_value(item) for item in items]
    return attributes(items)


def attributes(pairs: list[dict[str, Any]]) -> dict[str, object]:
    """``KeyValue`` objects as a dict (a later key wins, as with protobuf)."""
    return {_text(kv.get("key"), "key"): any_value(kv.get("value")) for kv in pairs}


def read_document(data: dict[str, Any], conventions: Conventions) -> Batch:
    """:func:`~otel_diary.receiver.decode.extract` for a parsed OTLP/JSON document."""
    marker = conventions.task_marker
    detecting = bool(conventions.profiles)  # auto: any profile's marker
    wanted = {key: key for key in kept_keys(conventions)}  # one str per key, as protobuf's
    child_errors = conventions.recover_on_child_errors
    batch = Batch()
    parts = batch.parts
    part: Part | None = None
    part_ids: set[bytes] = set()
    links = Links(batch.links)
    valid = held = size = 0
    for r, resource_spans in enumerate(_messages(data, "resourceSpans", "resource_spans", "")):
        resource: dict[str, object] | None = None
        resource_size = 0
        where_r = f"resourceSpans[{r}]."
        resource_message = _message(resource_spans, "resource", "resource", where_r)
        for s, scope_spans in enumerate(_messages(resource_spans, "scopeSpans", "scope_spans",
                                                  where_r)):
            spans = _messages(scope_spans, "spans", "spans", f"{where_r}scopeSpans[{s}].")
            for n, span in enumerate(spans):
                where = (r, s, n)
                trace_id = _id(_field(span, "traceId", "trace_id"), 16, where, "traceId")
                span_id = _id(_field(span, "spanId", "span_id"), 8, where, "spanId")
                parent = _id(_field(span, "parentSpanId", "parent_span_id"), 8, where,
                             "parentSpanId")
                if not valid_ids(trace_id, span_id, span.get("name")):
                    batch.rejected += 1
                    batch.reason = batch.reason or ZERO_ID
                    continue
                valid += 1
                links.add(trace_id, span_id, parent)
                found: dict[str, object] | None = None
                pairs = span.get("attributes")
                if pairs is not None:
                    if type(pairs) is not list:
                        raise DecodeError("invalid OTLP/JSON: attributes: expected a list")
                    for kv in pairs:
                        if type(kv) is not dict:
                            raise DecodeError("invalid OTLP/JSON: attributes: expected a list "
                                              "of objects")
                        key = kv.get("key")
                        if type(key) is not str:
                            key = _text(key, "key")
                        hit = wanted.get(key)
                        if hit is not None:
                            if found is None:
                                found = {}
                            found[hit] = any_value(kv.get("value"))
                status: dict[str, Any] | None = None
                code = 0
                if child_errors or found is not None:
                    status = _message(span, "status", "status", "")
                    code = _status_code(status.get("code"))
                is_error = child_errors and code == STATUS_ERROR
                if found is None and not is_error:
                    continue
                task = (found is not None and (marker in found or detecting)
                        and conventions.is_task(found))
                if not task and not conventions.contributes(found or (), is_error):
                    continue
                if part is None or part.trace_id != trace_id:
                    part = Part(trace_id, [], [], [], 0)
                    parts.append(part)
                    part_ids = set()
                if span_id in part_ids:
                    batch.duplicates += 1
                    continue
                part_ids.add(span_id)
                held += 1
                end = _integer(_field(span, "endTimeUnixNano", "end_time_unix_nano"), _UINT64,
                               "endTimeUnixNano")
                if task:
                    if resource is None:
                        resource = attributes(_messages(resource_message, "attributes",
                                                        "attributes", where_r))
                        resource_size = estimate(resource)
                    assert status is not None
                    record = span_record(
                        trace_id, span_id, _text(span.get("name"), "name"),
                        _integer(_field(span, "startTimeUnixNano", "start_time_unix_nano"),
                                 _UINT64, "startTimeUnixNano"),
                        end, parent, _integer(span.get("flags"), _UINT32, "flags"), code,
                        _text(status.get("message"), "status.message"),
                        attributes(_messages(span, "attributes", "attributes", "")), resource)
                    task_size = weight(record) + resource_size
                    size += task_size
                    part.tasks.append((span_id, record, task_size))
                    continue
                if is_error:
                    assert status is not None
                    found = {**(found or {}), **error_details(
                        _exception_attributes(span), _text(status.get("message"),
                                                           "status.message"))}
                part.span_ids.append(span_id)
                part.contributions.append(Contribution(found or {}, is_error, end))
    links.close()
    return batch.tally(held, valid, size)


def _exception_attributes(span: dict[str, Any]) -> dict[str, object] | None:
    """The attributes of the span's first ``exception`` event, if it has one."""
    for event in _messages(span, "events", "events", ""):
        if _text(event.get("name"), "name") == "exception":
            return attributes(_messages(event, "attributes", "attributes", ""))
    return None


def _status_code(value: object) -> int:
    """A status code: an integer (or a decimal string), or the enum value's name."""
    if value is None:
        return 0
    if type(value) is str and value in _STATUS_CODES:
        return _STATUS_CODES[value]
    if type(value) is bool:
        return int(value)  # protobuf's JSON reader takes it as 0 or 1
    return _integer(value, _INT32, "status.code")
