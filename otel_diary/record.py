"""The normalized span every stage after a source works on.

Sources (the in-process processor, the OTLP receiver, replay) turn their own span types
into a :class:`SpanRecord`; nothing downstream imports OpenTelemetry or OTLP types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

Attributes = Mapping[str, object]
"""Attribute values as a source hands them over; stages coerce and never trust the type."""


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One ended span as plain data.

    Ids are integers (128-bit trace id, 64-bit span id); times are nanoseconds since the
    epoch. ``parent_is_remote`` is true when the parent lives in another process.
    """

    trace_id: int
    span_id: int
    name: str
    start_ns: int
    end_ns: int
    parent_span_id: int | None = None
    parent_is_remote: bool = False
    is_error: bool = False
    status_message: str = ""
    attributes: Attributes = field(default_factory=dict)
    resource: Attributes = field(default_factory=dict)

    @property
    def trace_id_hex(self) -> str:
        return f"{self.trace_id:032x}"

    @property
    def span_id_hex(self) -> str:
        return f"{self.span_id:016x}"

    @property
    def is_local_root(self) -> bool:
        """True for a trace root or the first span of this process under a remote parent."""
        return self.parent_span_id is None or self.parent_is_remote
