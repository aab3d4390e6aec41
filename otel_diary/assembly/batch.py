"""What a decoder hands to assembly: the kept spans of one request, grouped per trace.

Decoding keeps only task spans (as :class:`~otel_diary.record.SpanRecord`) and spans that
contribute to a task (as :class:`Contribution`); of every other span it keeps only the
parent link (16 bytes), and counts it. Sizes
are estimates of the memory assembly holds for them, so its bounds are in bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from otel_diary.record import SpanRecord

TASK_BYTES = 400
"""Estimated memory the collector holds for a task span besides its attributes."""
CONTRIBUTION_BYTES = 300
ATTRIBUTE_BYTES = 150
"""Estimated memory of a contributing span and of each attribute it keeps."""


class Contribution(NamedTuple):
    """What a non-task span adds to its task's summary."""

    attributes: dict[str, object]
    """Only the attributes that matter (tokens, models, operation, error type)."""
    is_error: bool
    end_ns: int
    """When it ended: with several root tasks in a trace, it goes to the one that ends
    next (as in-process, where a task span takes what ended before it)."""

    @property
    def size(self) -> int:
        """Estimated bytes held for it."""
        return (CONTRIBUTION_BYTES + ATTRIBUTE_BYTES * len(self.attributes)
                + held_by_values(self.attributes))


Payload = SpanRecord | Contribution


class Part(NamedTuple):
    """Kept spans of one trace that follow each other in a request.

    Assembly keeps its lists. The C reader leaves out of garbage collection the span-id
    list, and the contribution list and its contributions when these hold plain values
    only: the collector would otherwise walk every span held. An untracked container is
    never walked, so a reference cycle through one is never collected. Hence the rule,
    for everything after decoding: put nothing tracked (``gc.is_tracked``) into an
    untracked list (take a new list first), and change no contribution's attributes.
    ``tests/assembly/test_untracked.py`` checks the reader and assembly against it."""

    trace_id: bytes
    span_ids: list[bytes]
    """Of the contributions, one each."""
    contributions: list[Contribution]
    tasks: list[tuple[bytes, SpanRecord, int]]
    """(span id, record, estimated bytes) of each task span."""
    size: int
    """Estimated bytes of the contributions."""


@dataclass(slots=True)
class Batch:
    """The spans of one request that assembly needs, and how many were valid or refused."""

    parts: list[Part] = field(default_factory=list)
    held: int = 0
    """Task spans and contributions in the parts."""
    valid: int = 0
    """Spans with valid ids: those held and those only counted."""
    rejected: int = 0
    duplicates: int = 0
    """Kept spans left out of the parts: copies of a span before them in the same part
    (same span id), which decoding drops (assembly drops copies across parts)."""
    reason: str = ""
    """Why the first refused span was refused (for ``partial_success.error_message``)."""
    size: int = 0
    """Estimated bytes the collector holds while assembling the parts."""
    links: list[tuple[bytes, bytes]] = field(default_factory=list)
    """Parent links of the spans that have a parent, every span of the request whether
    kept or not: per run of spans of one trace that follow each other, (trace id, pairs
    of span id and parent span id, 8 bytes each). Assembly keeps those of open traces to
    tell whether a task span has a task span among its ancestors."""

    @property
    def spans(self) -> int:
        """Every span of the request, valid or refused."""
        return self.valid + self.rejected

    def tally(self, held: int, valid: int, size: int) -> Batch:
        """This batch, with the counts its reader kept and each part's size, that of its
        contributions (``size``: the bytes counted besides them, of tasks and resources)."""
        parts = self.parts
        for index, part in enumerate(parts):
            part_size = sum(contribution.size for contribution in part.contributions)
            parts[index] = part._replace(size=part_size)
            size += part_size
        self.held, self.valid, self.size = held, valid, size
        return self


def weight(payload: Payload) -> int:
    """Estimated bytes held for an item's payload. A task also holds its resource's
    attributes, which the tasks of one resource share: the readers add their estimate,
    made once per resource, to each task's size."""
    if type(payload) is Contribution:
        return payload.size
    assert isinstance(payload, SpanRecord)
    return (TASK_BYTES + estimate(payload.attributes) + len(payload.name)
            + len(payload.status_message))


def estimate(attrs: Mapping[str, object]) -> int:
    """Rough bytes held for ``attrs`` (keys and values with Python's object overhead): 64,
    and per attribute 120, its key's length and what its value holds (as
    :func:`held_by_values` counts it), in one pass: every span queued in-process is
    weighed, and a pass per part cost as much again."""
    size = 64
    for key, value in attrs.items():
        kind = type(value)
        if kind is str or kind is bytes:
            size += 120 + len(key) + len(value)  # type: ignore[arg-type]
        elif kind is int or kind is bool or kind is float:
            size += 120 + len(key)
        else:
            size += 120 + len(key) + _held(value)
    return size


def held_by_values(attrs: Mapping[str, object]) -> int:
    """What the values of ``attrs`` hold besides their slots: the length of text and
    bytes, and what sequences and mappings hold (:func:`_held`)."""
    size = 0
    for value in attrs.values():
        kind = type(value)
        if kind is str or kind is bytes:
            size += len(value)  # type: ignore[arg-type]
        elif kind is not int and kind is not bool and kind is not float:
            size += _held(value)
    return size


HELD_DEPTH = 256
"""Containers nested deeper than this count nothing more (no decoded value comes close;
the C reader's twin stops at the same depth)."""


def _held(value: object) -> int:
    """Rough bytes of a value in attributes: its text, or, for a sequence or a mapping, 64
    per item and what its items (and keys) hold, at any depth, walked without recursion.
    The SDK keeps a list attribute as a tuple; a decoded OTLP array is a list, a key-value
    list a dict, and either may hold more of them."""
    size = 0
    stack = [(value, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (str, bytes)):
            size += len(value)
        elif depth > HELD_DEPTH:
            continue
        elif isinstance(value, (tuple, list)):
            size += 64 * len(value)
            for item in value:
                if type(item) is str:
                    size += len(item)
                else:
                    stack.append((item, depth + 1))
        elif isinstance(value, dict):
            size += 64 * len(value)
            for key, item in value.items():
                stack.append((key, depth + 1))
                stack.append((item, depth + 1))
    return size


