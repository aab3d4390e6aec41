"""TraceAssembler: children summarized under their task; bounded in traces and age."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_diary import GENAI, ORCHESTRATOR, SpanRecord, TraceAssembler
from otel_diary.assembly.inprocess import _text_size


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def task(trace_id: int, span_id: int, parent: int | None = None) -> SpanRecord:
    return SpanRecord(trace_id=trace_id, span_id=span_id, name="t", start_ns=0, end_ns=1,
                      parent_span_id=parent, attributes={"orchestrator.task.id": "T"})


def test_root_task_takes_its_childrens_summary() -> None:
    """A root task span is ready at once with what its children contributed."""
    assembler = TraceAssembler(ORCHESTRATOR)
    assembler.contribute(1, {"gen_ai.usage.input_tokens": 5}, False)
    assembler.contribute(1, {"gen_ai.usage.output_tokens": 2}, False)
    [(record, summary)] = assembler.task_ended(task(1, 10))
    assert record.span_id == 10 and summary.input_tokens + summary.output_tokens == 7
    assert len(assembler) == 0


def test_task_under_local_parent_waits_for_it() -> None:
    """A task span with an in-process parent is decided when that parent ends."""
    assembler = TraceAssembler(ORCHESTRATOR)
    assert assembler.task_ended(task(1, 10, parent=5)) == []
    ready = assembler.span_ended(1, 5, is_local_root=True)
    assert [r.span_id for r, _ in ready] == [10]


def test_nested_task_is_absorbed_by_outer_task() -> None:
    """A task span whose parent is a task span is not a root: only the outer is ready."""
    assembler = TraceAssembler(ORCHESTRATOR)
    assert assembler.task_ended(task(1, 10, parent=5)) == []
    ready = assembler.task_ended(task(1, 5))
    assert [r.span_id for r, _ in ready] == [5]


def test_oldest_trace_is_evicted_over_the_bound() -> None:
    """Beyond max_traces the least recently active trace is evicted and counted."""
    assembler = TraceAssembler(ORCHESTRATOR, max_traces=2)
    for trace_id in (1, 2, 3):
        assembler.contribute(trace_id, {}, False)
    assert len(assembler) == 2 and 1 not in assembler and assembler.evicted == 1


def test_evicted_trace_releases_its_waiting_task() -> None:
    """A trace evicted over the bound hands its waiting task spans out; none is lost."""
    assembler = TraceAssembler(ORCHESTRATOR, max_traces=1)
    assert assembler.task_ended(task(1, 10, parent=5)) == []
    assembler.contribute(2, {}, False)
    assert [r.span_id for r, _ in assembler.expire()] == [10]
    assert assembler.evicted == 1


def test_idle_traces_expire_and_waiting_tasks_are_released() -> None:
    """Idle traces are forgotten (counted); a waiting task span is released after its
    timeout instead of being lost."""
    clock = Clock()
    assembler = TraceAssembler(ORCHESTRATOR, trace_ttl_s=100, pending_timeout_s=10,
                               clock=clock)
    assembler.contribute(1, {}, False)
    assembler.task_ended(task(2, 20, parent=9))
    clock.now = 11
    assert [r.span_id for r, _ in assembler.expire()] == [20]
    clock.now = 200
    assert assembler.expire() == [] and assembler.expired == 2 and len(assembler) == 0


def test_an_agent_run_lasting_minutes_after_its_sub_task_gives_one_diary() -> None:
    """With the default timeout, a sub-task waits for its run to end minutes later (an
    agent's run lasts that long): then it is nested in it, not written as a root."""
    clock = Clock()
    assembler = TraceAssembler(ORCHESTRATOR, clock=clock)
    outer = task(1, 10)  # the trace's root
    assert assembler.task_ended(task(1, 20, parent=10)) == []
    clock.now = 300
    assert assembler.expire() == []
    assert [r.span_id for r, _ in assembler.task_ended(outer)] == [10]
    assert assembler.drain() == []


def test_drain_releases_every_waiting_task() -> None:
    """At shutdown every waiting task span is released: nothing is lost."""
    assembler = TraceAssembler(ORCHESTRATOR)
    assembler.task_ended(task(1, 10, parent=5))
    assembler.task_ended(task(2, 20, parent=6))
    assert sorted(r.span_id for r, _ in assembler.drain()) == [10, 20]


def test_nested_task_ending_after_its_parent_task_writes_nothing() -> None:
    """Fire-and-forget work that ends after its task belongs to that task's run: no
    second diary, and it is counted."""
    assembler = TraceAssembler(ORCHESTRATOR, pending_timeout_s=0)
    assert [r.span_id for r, _ in assembler.task_ended(task(1, 5))] == [5]
    assert assembler.task_ended(task(1, 10, parent=5)) == []
    assert assembler.expire() == [] and assembler.drain() == []
    assert assembler.late_nested == 1


def test_contributions_past_the_bucket_bound_share_one_bucket_and_reach_the_task() -> None:
    """Past MAX_BUCKETS distinct parents, contributions fold into one shared bucket:
    memory stays bounded and the root task still counts every contribution."""
    from otel_diary.assembly.inprocess import MAX_BUCKETS

    assembler = TraceAssembler(ORCHESTRATOR)
    parents = MAX_BUCKETS + 50
    for parent in range(1, parents + 1):
        assembler.contribute(1, {"gen_ai.usage.input_tokens": 1}, False, parent)
        assembler.contribute(1, {"gen_ai.usage.input_tokens": 1}, False, parent)
    buckets = assembler._traces[1].buckets
    assert len(buckets) == MAX_BUCKETS + 1
    assembler.contribute(1, {}, False, 1)  # a parent already held keeps its own bucket
    assert buckets[1].spans == 3 and buckets[None].spans == 2 * (parents - MAX_BUCKETS)
    [(_, summary)] = assembler.task_ended(task(1, 10_000))
    assert summary.input_tokens == 2 * parents


def _kept(assembler: TraceAssembler) -> int:
    """What the open traces keep, counted from their contents."""
    return sum(sum(entry.weights.values())
               + sum(_text_size(bucket) for bucket in entry.buckets.values())
               for entry in assembler._traces.values())


def test_waiting_task_spans_are_bounded_in_bytes() -> None:
    """Task spans waiting under a parent that stays open are bounded by their weight: past
    ``max_bytes`` the oldest trace is evicted and its waiting tasks released, not lost."""
    assembler = TraceAssembler(ORCHESTRATOR, max_bytes=10_000)
    for trace_id in (1, 2):
        for span_id in range(10, 13):
            assert assembler.task_ended(task(trace_id, span_id, parent=5), weight=2_000) == []
    assert assembler.held_bytes == _kept(assembler) == 12_000 - 6_000  # trace 1 evicted
    assert 1 not in assembler and assembler.evicted == 1
    released = assembler.expire()
    assert sorted((r.trace_id, r.span_id) for r, _ in released) == [(1, 10), (1, 11), (1, 12)]
    assert [r.span_id for r, _ in assembler.span_ended(2, 5, is_local_root=True)] == [
        10, 11, 12]
    assert assembler.held_bytes == 0


def test_captured_messages_are_bounded_in_bytes() -> None:
    """Captured messages and error text kept in the buckets count toward ``max_bytes``."""
    assembler = TraceAssembler(GENAI, max_bytes=100_000)
    message = "x" * 30_000
    for trace_id in range(1, 5):  # 4 traces of 30,000 characters each
        assembler.contribute(trace_id, {"gen_ai.input.messages": message}, False, 7)
    assert assembler.evicted == 1 and 1 not in assembler
    assert assembler.held_bytes == _kept(assembler) == 90_000
    assembler.contribute(2, {"exception.stacktrace": "Trace\n" + "y" * 1_000}, True, 7)
    assert assembler.held_bytes == _kept(assembler) > 90_000


def test_names_kept_are_bounded_in_bytes() -> None:
    """The names a trace's buckets keep (models, tools, agents, error types) count toward
    ``max_bytes`` too, also where no text is kept: past it the oldest trace is evicted."""
    assembler = TraceAssembler(ORCHESTRATOR, max_bytes=20_000)
    for trace_id in range(1, 51):  # 16 distinct names of 200 characters per trace
        for n in range(20):
            assembler.contribute(trace_id, {"gen_ai.request.model": f"{n:03}" + "m" * 197},
                                 False, 7)
    assert assembler.evicted > 0 and 1 not in assembler
    assert 0 < assembler.held_bytes == _kept(assembler) <= 20_000


@given(st.lists(st.tuples(st.sampled_from(["contribute", "task", "end", "expire"]),
                          st.integers(1, 3), st.integers(1, 6), st.integers(0, 6),
                          st.booleans()), max_size=60))
@settings(max_examples=300, deadline=None)
def test_bytes_held_match_what_the_traces_keep(steps: list[tuple[str, int, int, int, bool]]
                                               ) -> None:
    """Whatever spans end in whatever order, the count of bytes held is what the open
    traces keep, never more than the bound, and nothing once every trace is closed."""
    clock = Clock()
    assembler = TraceAssembler(GENAI, max_bytes=3_000, pending_timeout_s=5, clock=clock)
    for op, trace_id, span_id, parent, flag in steps:
        parent_id = parent or None
        if op == "contribute":  # a tool call (or a model's) with a name of its own
            assembler.contribute(trace_id, {"gen_ai.input.messages": "m" * 400 * span_id,
                                            "gen_ai.output.messages": "o" * 300,
                                            "gen_ai.request.model": f"model-{span_id}" * 9,
                                            "gen_ai.operation.name": "execute_tool",
                                            "gen_ai.tool.name": f"tool-{parent}" * 20},
                                 flag, parent_id, span_id=span_id)
        elif op == "task":  # a task that failed keeps its message when it is nested
            record = task(trace_id, span_id, parent_id)
            if span_id % 2:
                record = replace(record, is_error=True, attributes={
                    **record.attributes, "exception.message": "boom " * 40 * span_id})
            assembler.task_ended(record, weight=500, parent_ended=flag)
        elif op == "end":
            assembler.span_ended(trace_id, span_id, flag, parent_id)
        else:
            clock.now += 3
            assembler.expire()
        assert assembler.held_bytes == _kept(assembler) <= 3_000
    for trace_id in (1, 2, 3):
        assembler.span_ended(trace_id, 99, True)
    assert assembler.held_bytes == 0
