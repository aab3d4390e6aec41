"""The open-trace table both assemblers keep: traces by id, least recently active first.

In-process assembly and assembly by grace hold different things per trace (summaries
per parent span; deduplicated task spans and contributions), but the same table: a trace
is touched when a span of it arrives, the least recently active one is evicted first at
a bound, and idle traces lead the table, so expiry looks only at the ones it forgets.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from otel_diary.assembly.summary import Ready


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


LINK_BYTES = 16
"""One parent link as the readers hand it over: a span id, then its parent's (big-endian)."""
LINKS_OVERHEAD = 40
"""Estimated memory of a bytes object of links besides its links."""


WALK_STEPS_PER_LINK = 16
MIN_WALK_STEPS = 100_000
"""Steps up the parent links that the walks of one :class:`Ancestry` other than its own
may take together (:attr:`Ancestry.steps`): this many per link, and at least the minimum.
Each task's walks start again from its spans, so many tasks under one very deep chain
would otherwise cost tasks times depth: a request of a few megabytes, minutes of CPU."""


class Ancestry:
    """Whether a span has a task span among its ancestors, following the parent links of
    the trace's spans (runs of :data:`LINK_BYTES` pairs) through the plain spans in
    between. The links are read into a dict at the first walk that needs them; a walk
    ends at a span whose parent is not known (not come, or the trace root), and at a
    cycle. Each span's answer is remembered, so any number of walks cost at most one step
    per link: while the trace takes in nothing new, one ``Ancestry`` serves every decision."""

    __slots__ = ("_asked", "_is_task", "_known", "_links", "_parent_ids", "_parents", "steps")

    def __init__(self, is_task: Callable[[int], bool], links: Iterable[bytes]) -> None:
        self._is_task = is_task
        self._links = links
        self._parents: dict[int, int] | None = None
        self._parent_ids: set[bytes] | None = None
        """The parent half of every link, once :meth:`any_parent` is asked a second time."""
        self._asked = False
        self._known: dict[int, bool] = {}
        """Plain span -> whether a task span is among its ancestors."""
        self.steps = 0
        """Steps left to other walks up :meth:`parents` (see :data:`WALK_STEPS_PER_LINK`);
        set when they are read."""

    def parents(self) -> dict[int, int]:
        """Span id -> parent span id, of every span the links hold (read at the first call)."""
        parents = self._parents
        if parents is None:
            parents = self._parents = dict(
                pair for run in self._links for pair in struct.iter_unpack(">QQ", run))
            self.steps = max(WALK_STEPS_PER_LINK * len(parents), MIN_WALK_STEPS)
        return parents

    def any_parent(self, span_ids: Iterable[bytes]) -> bool:
        """Whether one of ``span_ids`` (8 bytes each) is the parent of a span. The first
        call makes one pass over the links' parent halves (cheaper than reading them into
        :meth:`parents`); a second one keeps their set, so that many tasks' questions cost
        one pass, not one each."""
        wanted = set(span_ids)
        if self._parent_ids is not None:
            return not self._parent_ids.isdisjoint(wanted)
        half = LINK_BYTES // 2
        if not self._asked:
            self._asked = True
            return any(run[at:at + half] in wanted for run in self._links
                       for at in range(half, len(run), LINK_BYTES))
        self._parent_ids = {run[at:at + half] for run in self._links
                            for at in range(half, len(run), LINK_BYTES)}
        return not self._parent_ids.isdisjoint(wanted)

    def nested(self, parent: int | None) -> bool:
        """Whether the span whose parent is ``parent`` has a task span among its ancestors."""
        if parent is None:
            return False
        is_task = self._is_task
        if is_task(parent):
            return True
        known = self._known
        answer = known.get(parent)
        if answer is not None:
            return answer
        parents = self.parents()
        # Each span walked is remembered at once as having no task above it, the answer
        # when the walk ends at the root, at an unknown parent, or back at itself (a
        # cycle); a task span met makes it true for all of them.
        walked = [parent]
        known[parent] = False
        while (up := parents.get(walked[-1])) is not None:
            if is_task(up):
                for span in walked:
                    known[span] = True
                return True
            seen = known.get(up)
            if seen is not None:
                if seen:
                    for span in walked:
                        known[span] = True
                return seen
            known[up] = False
            walked.append(up)
        return False


class Assembly(Protocol):
    """What every assembler gives its source: root task spans with their children's
    summary, and everything still held at the end."""

    def __len__(self) -> int:
        """Open traces."""
        ...

    def drain(self) -> list[Ready]:
        """Decide every waiting task span now (end of input, shutdown): nothing is lost."""
        ...
