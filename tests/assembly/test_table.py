"""The open-trace table's Ancestry: answers as a plain walk gives them, each link walked once."""

from __future__ import annotations

import random
import struct
from collections.abc import Iterable

from otel_diary.assembly.table import Ancestry


def packed(pairs: Iterable[tuple[int, int]]) -> list[bytes]:
    """Parent links as the readers hand them over: (span id, parent span id) pairs."""
    return [b"".join(struct.pack(">QQ", child, parent) for child, parent in pairs)]


def plain_walk(parents: dict[int, int], tasks: set[int], parent: int | None) -> bool:
    """The answer by definition: a task span among the ancestors, a cycle ending the walk."""
    seen: set[int] = set()
    while parent is not None and parent not in seen:
        if parent in tasks:
            return True
        seen.add(parent)
        parent = parents.get(parent)
    return False


def test_answers_are_those_of_a_plain_walk_whatever_the_order_of_questions() -> None:
    """Over random forests with cycles, unknown parents and tasks anywhere, every answer,
    asked in any order and again, is the plain walk's."""
    rng = random.Random(7)
    for _ in range(200):
        size = rng.randint(1, 60)
        parents = {span: rng.randint(0, size + 5) for span in range(1, size + 1)
                   if rng.random() < 0.9}
        tasks = {span for span in range(size + 6) if rng.random() < 0.1}
        ancestry = Ancestry(tasks.__contains__, packed(parents.items()))
        questions = [rng.choice([None, *range(size + 6)]) for _ in range(3 * size)]
        for parent in questions:
            assert ancestry.nested(parent) == plain_walk(parents, tasks, parent), parent


def test_each_span_is_walked_once_however_many_questions() -> None:
    """Many task spans under one long chain of plain spans, one under a chain that ends at
    an unknown parent and one in a cycle: each link is followed at most once, so deciding
    them all costs about the chain's length, not its length times their number."""
    length = 5_000
    chain = [(span + 1, span) for span in range(1, length)]  # span 1 is the task
    lost = [(span + 1, span) for span in range(10_001, 10_000 + length)]  # 10_001: unknown
    cycle = [(20_001, 20_002), (20_002, 20_001)]
    asked = 0

    def is_task(span: int) -> bool:
        nonlocal asked
        asked += 1
        return span == 1

    ancestry = Ancestry(is_task, packed([*chain, *lost, *cycle]))
    for _ in range(300):
        assert ancestry.nested(length)
        assert not ancestry.nested(10_000 + length)
        assert not ancestry.nested(20_001)
    assert asked <= 2 * length + 3 * 300 + 10


def test_any_parent_finds_an_id_in_a_parent_s_place_only() -> None:
    """An id is a parent when a link names it as one, not when it is a span's own id (nor
    when its bytes straddle two ids), read as the links are or once read into a dict."""
    run = struct.pack(">QQQQ", 1, 2, 0x0300000000000004, 5)
    for read in (False, True):
        ancestry = Ancestry(lambda span: False, [run])
        if read:
            ancestry.parents()
        assert ancestry.any_parent([(2).to_bytes(8, "big")])
        assert ancestry.any_parent([(9).to_bytes(8, "big"), (5).to_bytes(8, "big")])
        assert not ancestry.any_parent([(1).to_bytes(8, "big")])  # a child's own id
        assert not ancestry.any_parent([bytes([0, 0, 0, 2, 3, 0, 0, 0])])  # across two ids
