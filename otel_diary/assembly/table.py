"""The open-trace table both assemblers keep: traces by id, least recently active first.

In-process assembly and assembly by grace hold different things per trace (summaries
per parent span; deduplicated task spans and contributions), but the same table: a trace
is touched when a span of it arrives, the least recently active one is evicted first at
a bound, and idle traces lead the table, so expiry looks only at the ones it forgets.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol, TypeVar

from otel_diary.record import Ready


class OpenTrace(Protocol):
    last_seen: float
    """When a span of the trace last arrived (the table's clock: seconds, or spans read)."""


K = TypeVar("K")
T = TypeVar("T", bound=OpenTrace)


class TraceTable(OrderedDict[K, T]):
    """Open traces in order of their last activity, oldest first. Not thread-safe."""

    def touch(self, key: K, entry: T, now: float) -> None:
        """A span of ``entry`` arrived at ``now``: it becomes the youngest."""
        entry.last_seen = now
        self.move_to_end(key)

    def oldest(self) -> tuple[K, T]:
        """The least recently active trace (the table must not be empty)."""
        return next(iter(self.items()))

    def idle(self, now: float, timeout: float) -> bool:
        """Whether the oldest trace has been idle for ``timeout`` (False when empty)."""
        if not self:
            return False
        return now - self.oldest()[1].last_seen >= timeout


class Assembly(Protocol):
    """What every assembler gives its source: root task spans with their children's
    summary, and everything still held at the end."""

    def __len__(self) -> int:
        """Open traces."""
        ...

    def drain(self) -> list[Ready]:
        """Decide every waiting task span now (end of input, shutdown): nothing is lost."""
        ...
