"""What the in-process worker reads of an ended span, and what a queued span weighs.

An SDK span is read through its private fields: its properties copy or wrap on every read
(``attributes`` a ``MappingProxyType``, ``context`` a call per field), which cost more
than the worker's whole use of a span. Any other span type is read through the API.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_diary.assembly.batch import estimate
from otel_diary.conventions import Conventions, marking_profile
from otel_diary.record import SpanRecord

ERROR = StatusCode.ERROR
logger = logging.getLogger("otel_diary")

Fields = tuple[Mapping[str, object], int, int, int | None, bool, bool, int]
"""What the worker reads of a span: ``(attributes, trace_id, span_id, parent_span_id,
parent_is_remote, is_error, end_ns)``."""

Queued = tuple[ReadableSpan, int] | tuple[
    None, int, Mapping[str, object], int, int, int | None, bool, bool, int]
"""A queued span and its weight, or, of a span that marks no task and did not fail, its
weight and :data:`Fields` (read by ``on_end``, which lets the span go)."""


def weigh(span: ReadableSpan) -> int:
    """Estimated bytes a queued span holds: its attributes (an SDK span's own dict), its
    events' (an exception's message and stack trace) and its status description."""
    try:
        size = estimate(span._attributes._dict)  # type: ignore[union-attr]
        events = span._events
        description = span._status._description
    except (AttributeError, TypeError):
        size = estimate(span.attributes or {})
        events = span.events
        description = span.status.description
    if events:
        size += sum(estimate(event.attributes or {}) + len(event.name) for event in events)
    return size + len(description) if description else size


def read(span: ReadableSpan) -> Fields:
    """What the worker reads of ``span`` (see :data:`Fields`)."""
    try:
        attributes = span._attributes._dict  # type: ignore[union-attr]
        ctx = span._context
        parent = span._parent
        is_error = span._status._status_code is ERROR
        end_ns = span._end_time or 0
        # The SDK's SpanContext is a tuple (trace_id, span_id, is_remote, ...).
        trace_id, span_id = (ctx[0], ctx[1]) if ctx is not None else (0, 0)
        if parent is None:
            return attributes, trace_id, span_id, None, False, is_error, end_ns
        return attributes, trace_id, span_id, parent[1], parent[2], is_error, end_ns
    except (AttributeError, TypeError, IndexError):  # any other span: its API
        ctx = span.context
        parent = span.parent
        trace_id, span_id = (ctx.trace_id, ctx.span_id) if ctx is not None else (0, 0)
        parent_id, remote = ((parent.span_id, parent.is_remote) if parent is not None
                             else (None, False))
        return (span.attributes or {}, trace_id, span_id, parent_id, remote,
                span.status.status_code is ERROR, span.end_time or 0)


def to_record(span: ReadableSpan) -> SpanRecord:
    """A plain-data copy of an ended SDK span."""
    ctx = span.context
    parent = span.parent
    status = span.status
    resource = span.resource
    return SpanRecord(
        trace_id=ctx.trace_id if ctx is not None else 0,
        span_id=ctx.span_id if ctx is not None else 0,
        name=span.name,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or span.start_time or 0,
        parent_span_id=parent.span_id if parent is not None else None,
        parent_is_remote=bool(parent is not None and parent.is_remote),
        is_error=status.status_code is ERROR,
        status_message=status.description or "",
        attributes=dict(span.attributes or {}),
        resource=dict(resource.attributes) if resource is not None else {},
    )


def exception_event(span: ReadableSpan) -> Mapping[str, object] | None:
    """The attributes of the span's first ``exception`` event (what
    ``Span.record_exception`` and most instrumentations record), if any."""
    for event in span.events or ():
        if event.name == "exception":
            return event.attributes or {}
    return None


def hint_profile(root: Mapping[str, object], conventions: Conventions) -> bool:
    """Say (a warning) when a trace's root span marks a task under another built-in profile
    than ``conventions``: no diary is written for such runs. ``False`` once said."""
    name = marking_profile(root, conventions)
    if name is None:
        return True
    logger.warning("otel-diary: a trace's root span marks a task under the `%s` profile, not "
                   "under the one in use, so no diary is written for such runs: set "
                   "OTEL_DIARY_CONVENTIONS=%s (see the README's \"Agent frameworks\")",
                   name, name)
    return False
