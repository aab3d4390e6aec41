"""What both OTLP readers (protobuf and JSON) share: the keys kept and a task span's record."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags, Status

from otel_diary.conventions import Conventions
from otel_diary.errors import DecodeError
from otel_diary.record import SpanRecord

STATUS_ERROR = Status.STATUS_CODE_ERROR
_HAS_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
ZERO_TRACE = bytes(16)
ZERO_SPAN = bytes(8)
ZERO_ID = "a span has an empty or all-zero trace id or span id"


def valid_ids(trace_id: bytes, span_id: bytes, name: object) -> bool:
    """Whether a span's ids are usable: False for an empty or all-zero id (the span is
    refused and counted, as protobuf reads an empty id: zero); a trace or span id of
    another length makes the request undecodable."""
    if len(trace_id) not in (0, 16) or len(span_id) not in (0, 8):
        shown = name[:64] if isinstance(name, str) else ""
        raise DecodeError(f"span {shown!r}: trace id must be 16 bytes and span id 8 "
                          f"(got {len(trace_id)} and {len(span_id)})")
    return trace_id not in (ZERO_TRACE, b"") and span_id not in (ZERO_SPAN, b"")


class Links:
    """Collects a request's parent links into ``Batch.links``: per run of spans of one
    trace, the span id and parent span id of each span that has a parent (8 bytes each;
    a parent id of another length is no link)."""

    __slots__ = ("_out", "_pairs", "_trace_id")

    def __init__(self, out: list[tuple[bytes, bytes]]) -> None:
        self._out = out
        self._trace_id = b""
        self._pairs: list[bytes] = []

    def add(self, trace_id: bytes, span_id: bytes, parent: bytes) -> None:
        if len(parent) != 8 or parent == ZERO_SPAN:
            return
        if trace_id != self._trace_id:
            self.close()
            self._trace_id = trace_id
        self._pairs.append(span_id + parent)

    def close(self) -> None:
        """Hand over the last run."""
        if self._pairs:
            self._out.append((self._trace_id, b"".join(self._pairs)))
            self._pairs = []


def kept_keys(conventions: Conventions) -> tuple[str, ...]:
    """The attribute keys whose values decoding keeps: the task marker, then the keys of
    what a span contributes to its task (and any other task marker), and the messages it
    may carry (see :attr:`Conventions.content_keys`)."""
    marker = conventions.task_marker
    return (marker, *sorted((conventions.child_keys | conventions.task_markers
                             | conventions.content_keys) - {marker}))


def span_record(trace_id: bytes, span_id: bytes, name: str, start_ns: int, end_ns: int,
                parent: bytes, flags: int, code: int, message: str,
                span_attributes: Mapping[str, object],
                resource: Mapping[str, object]) -> SpanRecord:
    """A task span from its OTLP fields; a parent id of the wrong length is undecodable."""
    if parent and len(parent) != 8:
        raise DecodeError(f"span {name[:64]!r}: parent span id must be 8 bytes "
                          f"(got {len(parent)})")
    return SpanRecord(  # positional: noticeably faster than keywords, per task span
        int.from_bytes(trace_id, "big"),  # trace_id
        int.from_bytes(span_id, "big"),  # span_id
        name,
        start_ns,
        end_ns,  # 0 when unset: the diary is dated by the start then
        int.from_bytes(parent, "big") or None,  # parent_span_id
        bool(flags & _HAS_IS_REMOTE and flags & _IS_REMOTE),  # parent_is_remote
        code == STATUS_ERROR,  # is_error
        message,  # status_message
        span_attributes,  # attributes
        resource,
    )
