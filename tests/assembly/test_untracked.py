"""The lists the C reader leaves out of garbage collection stay safe to leave out.

The reader untracks a part's span-id list, its contribution list when no contribution
holds a container, and such contributions themselves (see :class:`Part`), so that the
collector does not walk every span held for assembly. An untracked container is never
walked: whatever it refers to counts as referenced from outside, so a reference cycle
running through it is never collected, and what the cycle holds stays until the process
exits. A list never becomes tracked again, and a tuple is never walked however its items
change. So what breaks the rule is, after decoding: putting a tracked object (a list, a
dict holding one, a contribution holding either) into an untracked list, or adding a
value to the attributes of an untracked contribution. These tests drive real requests
through the C reader and :class:`TraceStore` and check that no untracked container
holds a tracked object, however parts of a trace are split, merged and decided.
"""

from __future__ import annotations

import copy
import gc
import random
import types
import weakref
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_diary import ORCHESTRATOR
from otel_diary.assembly.batch import Batch, Contribution
from otel_diary.assembly.grace import TraceStore
from otel_diary.receiver.decode import NATIVE, PROTOBUF, decode
from tests.support.otlp_build import new_trace_id, protobuf_body, task_trace

pytestmark = pytest.mark.skipif(not NATIVE, reason="the C reader was not built")

_SKIPPED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
            types.MethodType)


def _reachable(root: object) -> Iterator[object]:
    """Every object ``root`` refers to, directly or not (classes and functions aside)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SKIPPED):
            continue
        seen.add(id(obj))
        yield obj
        stack.extend(gc.get_referents(obj))


def untracked_holding_tracked(root: object) -> list[tuple[object, object]]:
    """(container, item) for every untracked container reachable from ``root`` that refers
    to a tracked object other than its own class."""
    return [(obj, item) for obj in _reachable(root) if not gc.is_tracked(obj)
            for item in gc.get_referents(obj)
            if gc.is_tracked(item) and not isinstance(item, type)]


def untracked_of(batch: Batch) -> int:
    """How many containers of ``batch`` are untracked (so that a test can fail if none is)."""
    return sum(1 for obj in _reachable(batch.parts) if not gc.is_tracked(obj)
               and isinstance(obj, (list, tuple, dict)))


_MODEL = "gen_ai.request.model"
_VALUES: dict[str, AnyValue] = {
    "plain": AnyValue(string_value="model-y"),
    "array": AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="m")])),
    "kvlist": AnyValue(kvlist_value=KeyValueList(values=[
        KeyValue(key="k", value=AnyValue(int_value=1))])),
    "bytes": AnyValue(bytes_value=b"\x00m"),
}


def _trace(task_id: str, models: list[str]) -> list[Span]:
    """A task trace whose chat spans carry the given kinds of model value."""
    spans = task_trace(task_id, chats=len(models))
    for chat, kind in zip(spans[2:], models, strict=True):
        chat.attributes.append(KeyValue(key=_MODEL, value=_VALUES[kind]))
    return spans


_kinds = st.lists(st.sampled_from(sorted(_VALUES)), min_size=1, max_size=4)


@st.composite
def _deliveries(draw: st.DrawFn) -> list[list[Span]]:
    """The spans of one to three traces, shuffled, split over requests, some sent twice."""
    spans = [span for n, models in enumerate(draw(st.lists(_kinds, min_size=1, max_size=3)))
             for span in _trace(f"T-{n}", models)]
    random.Random(draw(st.integers(0, 2**32))).shuffle(spans)
    cuts = sorted(draw(st.lists(st.integers(0, len(spans)), max_size=4)))
    requests = [spans[a:b] for a, b in zip([0, *cuts], [*cuts, len(spans)], strict=True)]
    requests = [request for request in requests if request]
    again = draw(st.lists(st.sampled_from(requests), max_size=2))
    return requests + again


def test_the_reader_untracks_only_what_holds_nothing_tracked() -> None:
    """Of a decoded request, span ids and plain contributions come untracked, and no
    untracked container holds a tracked object; tasks and their records stay tracked."""
    spans = _trace("T-1", ["plain", "plain"]) + _trace("T-2", ["plain", "array", "kvlist"])
    batch = decode(protobuf_body(spans), PROTOBUF, ORCHESTRATOR)
    plain, mixed = batch.parts
    assert not gc.is_tracked(plain.span_ids) and not gc.is_tracked(mixed.span_ids)
    assert not gc.is_tracked(plain.contributions) and gc.is_tracked(mixed.contributions)
    assert [gc.is_tracked(item) for item in mixed.contributions] == [False, True, True]
    assert gc.is_tracked(plain.tasks) and gc.is_tracked(plain.tasks[0])
    assert untracked_of(batch) >= 5 and untracked_holding_tracked(batch.parts) == []


def test_the_pure_python_reader_untracks_nothing() -> None:
    """The reference reader makes ordinary tracked lists: assembly must take both kinds."""
    batch = decode(protobuf_body(_trace("T-1", ["plain"])), PROTOBUF, ORCHESTRATOR,
                   native=False)
    assert gc.is_tracked(batch.parts[0].span_ids) and gc.is_tracked(batch.parts[0].contributions)


def test_a_cycle_through_an_untracked_list_is_never_collected() -> None:
    """What the rule prevents: a cycle through a list the reader untracked outlives
    ``gc.collect()``, where the same cycle through an ordinary list is collected."""

    class Holder:
        ids: list[object]

    def cycle(ids: list[object]) -> weakref.ref[Holder]:
        holder = Holder()
        holder.ids = ids
        ids.append(holder)
        return weakref.ref(holder)

    native = decode(protobuf_body(_trace("T-1", ["plain"])), PROTOBUF, ORCHESTRATOR)
    leaked = cycle(native.parts[0].span_ids)  # type: ignore[arg-type]
    collected = cycle(list(native.parts[0].span_ids))
    del native
    gc.collect()
    assert collected() is None
    holder = leaked()
    assert holder is not None
    holder.ids.clear()  # break the cycle by hand


def _assert_contract(store: TraceStore) -> None:
    found = untracked_holding_tracked(store)
    assert found == [], f"untracked containers hold tracked objects: {found[:3]}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_deliveries(), st.lists(st.booleans(), min_size=8, max_size=8))
def test_assembly_never_puts_a_tracked_object_into_an_untracked_list(
        requests: list[list[Span]], decide: list[bool]) -> None:
    """Parts of traces merged in any order, copies dropped, tasks decided between requests:
    no untracked list or contribution the store holds ever refers to a tracked object,
    and no contribution's attributes change."""
    store = TraceStore(ORCHESTRATOR, grace=2, trace_timeout=60)
    contributions: list[tuple[Contribution, bool, dict[str, object]]] = []
    for now, spans in enumerate(requests):
        batch = decode(protobuf_body(spans), PROTOBUF, ORCHESTRATOR)
        contributions += [(item, gc.is_tracked(item), copy.deepcopy(item.attributes))
                          for part in batch.parts for item in part.contributions]
        store.add(batch, now)
        _assert_contract(store)
        if decide[now % len(decide)]:
            store.due(now)
            _assert_contract(store)
    store.drain()
    for item, tracked, attributes in contributions:
        assert gc.is_tracked(item) == tracked and item.attributes == attributes


def test_a_plain_part_then_one_with_containers_in_the_same_trace() -> None:
    """The case that breaks a naive merge: a trace's first part is all plain (its list
    untracked), a later part holds an array value; the merged list must be tracked."""
    spans = _trace("T-1", ["plain", "array"])
    store = TraceStore(ORCHESTRATOR, grace=2, trace_timeout=60)
    first = decode(protobuf_body(spans[:3]), PROTOBUF, ORCHESTRATOR)
    assert not gc.is_tracked(first.parts[0].contributions)
    store.add(first, 0)
    store.add(decode(protobuf_body(spans[3:]), PROTOBUF, ORCHESTRATOR), 1)
    _assert_contract(store)
    assert len(store) == 1 and store.spans == 3
    ((record, summary),) = store.due(2)
    assert record.attributes["orchestrator.task.id"] == "T-1"
    assert (summary.spans, summary.input_tokens) == (2, 200)


def test_a_nested_task_decided_into_an_untracked_list() -> None:
    """A nested task span's facts join its trace's contributions, which came all plain
    (a list the reader untracked): the store holds them in a tracked list."""
    trace_id = new_trace_id()
    outer = task_trace("OUTER", chats=2, trace_id=trace_id)
    inner = task_trace("INNER", chats=0, trace_id=trace_id, parent=outer[0].span_id)[0]
    store = TraceStore(ORCHESTRATOR, grace=2, trace_timeout=60)
    chats = decode(protobuf_body(outer[2:]), PROTOBUF, ORCHESTRATOR)
    assert not gc.is_tracked(chats.parts[0].contributions)
    store.add(chats, 0)
    store.add(decode(protobuf_body([inner]), PROTOBUF, ORCHESTRATOR), 0)
    store.add(decode(protobuf_body(outer[:1]), PROTOBUF, ORCHESTRATOR), 1)
    assert store.due(2.5) == [] and store.nested_tasks == 1
    _assert_contract(store)
    ((record, summary),) = store.due(4)
    assert record.attributes["orchestrator.task.id"] == "OUTER"
    assert summary.spans == 3  # two chats and the nested task
