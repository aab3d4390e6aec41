"""Assembly across requests: any order, split, duplicated; nested tasks; expiry; bounds."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_diary import GENAI, ORCHESTRATOR, Diary, Settings
from otel_diary.assembly import grace
from otel_diary.assembly.batch import Batch
from otel_diary.assembly.grace import TraceStore
from otel_diary.assembly.summary import Ready
from otel_diary.assembly.table import LINKS_OVERHEAD, Ancestry
from otel_diary.receiver import admission
from otel_diary.receiver.admission import Admission, Collector
from otel_diary.receiver.decode import JSON, PROTOBUF, decode
from otel_diary.receiver.metrics import metric_values, metrics_text
from otel_diary.testing import InMemorySink
from otel_diary.wiring import build_pipeline
from tests.support.otlp_build import (
    NESTED_RUN,
    json_body,
    new_span_id,
    new_trace_id,
    protobuf_body,
    span,
    task_trace,
    tree_spans,
)


def batch_of(spans: Sequence[Span]) -> Batch:
    return decode(protobuf_body(spans), PROTOBUF, ORCHESTRATOR)


def store(**bounds: float) -> TraceStore:
    return TraceStore(ORCHESTRATOR, grace=5, trace_timeout=60, **bounds)  # type: ignore[arg-type]


def tokens(ready: Ready) -> int:
    return ready[1].input_tokens + ready[1].output_tokens


def test_children_after_their_task_within_grace_are_counted() -> None:
    """Children arriving in a later request, before the grace ends, join the task."""
    spans = task_trace("T-1", chats=3)
    traces = store()
    traces.add(batch_of(spans[:1]), now=0)
    traces.add(batch_of(spans[1:]), now=2)
    assert traces.due(4.9) == []
    ready = traces.due(5)
    assert len(ready) == 1 and tokens(ready[0]) == 3 * 120
    assert ready[0][0].attributes["orchestrator.task.id"] == "T-1"
    assert len(traces) == 0 and traces.spans == 0 and traces.bytes == 0


def test_due_decides_at_most_the_limit_at_a_time() -> None:
    """The timer thread decides a backlog in slices, so receivers never wait long."""
    traces = store()
    for n in range(3):
        traces.add(batch_of(task_trace(f"T-{n}", chats=1)), now=0)
    assert not traces.is_due(4.9) and traces.is_due(5)
    assert len(traces.due(5, limit=2)) == 2 and traces.is_due(5)
    assert len(traces.due(5, limit=2)) == 1 and not traces.is_due(5)
    assert (len(traces), traces.spans, traces.bytes) == (0, 0, 0)


def test_due_reads_no_trace_anew_past_its_budget() -> None:
    """With a budget, a call stops before a trace it has not read yet once those it read
    hold that many spans and links; the tasks of a trace it read are still decided in it.
    Over the calls, the decisions are those of one call without a budget."""
    chains = {letter: (new_trace_id(), [new_span_id() for _ in range(50)])
              for letter in "ABC"}
    requests = []  # due in this order; the first of a trace brings its chain of 50
    for name in ("A1", "A2", "B1", "C1", "A3"):
        trace_id, chain = chains[name[0]]
        spans = task_trace(name, chats=1, trace_id=trace_id, parent=chain[-1])
        if name.endswith("1"):
            spans += [span(trace_id, chain[0])]
            spans += [span(trace_id, chain[k], chain[k - 1]) for k in range(1, 50)]
        requests.append(protobuf_body(spans))

    def traces_and_deadlines() -> TraceStore:
        traces = store()
        for n, body in enumerate(requests):
            traces.add(decode(body, PROTOBUF, ORCHESTRATOR), now=n)
        return traces

    bounded, unbounded = traces_and_deadlines(), traces_and_deadlines()
    calls = []
    while bounded.is_due(100):
        calls.append([record.attributes["orchestrator.task.id"]
                      for record, _ in bounded.due(100, budget=1)])
    assert calls == [["A1", "A2"], ["B1"], ["C1"], ["A3"]]
    whole = {str(record.attributes["orchestrator.task.id"]): (record, summary)
             for record, summary in unbounded.due(100)}
    assert sorted(whole) == ["A1", "A2", "A3", "B1", "C1"]
    fresh = traces_and_deadlines()
    decided = [ready for _ in range(4) for ready in fresh.due(100, budget=1)]
    assert {record.attributes["orchestrator.task.id"]: (record.span_id, summary)
            for record, summary in decided} == {
        name: (record.span_id, summary) for name, (record, summary) in whole.items()}


def test_plain_spans_are_counted_not_held() -> None:
    """Only the task span and the contributing spans are held; every valid span counts."""
    spans = task_trace("T-plain", chats=2)
    traces = store()
    traces.add(batch_of(spans), now=0)
    assert (traces.accepted, traces.spans, len(traces)) == (4, 3, 1)
    assert traces.bytes > 0
    assert len(traces.due(5)) == 1
    assert (traces.spans, traces.bytes, len(traces)) == (0, 0, 0)
    traces.add(batch_of([span(new_trace_id(), new_span_id(), name="GET /")]), now=6)
    assert (traces.accepted, traces.spans, len(traces)) == (5, 0, 0)


def test_out_of_order_split_and_duplicated_delivery_yields_one_task() -> None:
    """Reversed order, one span per request, every request twice: one task, tokens once.

    Duplicates are counted among the spans assembly holds (all but the plain step span).
    """
    spans = task_trace("T-2", chats=4)
    traces = store()
    ready: list[Ready] = []
    for now, item in enumerate(reversed(spans)):
        for _ in range(2):
            ready += traces.add(batch_of([item]), now=now / 10)
    ready += traces.due(10)
    assert len(ready) == 1 and tokens(ready[0]) == 4 * 120
    assert traces.duplicates == len(spans) - 1
    assert traces.accepted == len(spans) + 1  # the plain span's copy holds nothing: not seen
    assert traces.add(batch_of(spans[:1]), now=11) == [] and traces.due(100) == []
    assert traces.duplicates == len(spans)  # the root again, after its decision


def test_copies_within_one_request_are_counted_once() -> None:
    """A request holding a trace twice, back to back; then one holding it again, around
    another trace, its task span a third time; then the other trace again: one task each,
    tokens once, every copy counted."""
    spans = task_trace("T-3", chats=3)
    other = task_trace("T-4", chats=1)
    traces = store()
    traces.add(batch_of(spans + spans), now=0)
    kept = len(spans) - 1  # all but the plain step span
    assert (traces.spans, traces.duplicates) == (kept, kept)
    second = spans[:2] + other + spans[2:] + spans[:2]
    traces.add(batch_of(second), now=1)
    assert traces.duplicates == kept + kept + 1
    traces.add(batch_of(other), now=2)
    assert traces.duplicates == kept + kept + 1 + len(other) - 1
    ready = traces.due(10)
    assert sorted(tokens(item) for item in ready) == [120, 3 * 120]
    assert traces.accepted == 2 * len(spans) + len(second) + len(other) - traces.duplicates


def test_nested_task_spans_belong_to_the_outer_task() -> None:
    """A task span under another task span writes nothing; its children count for the outer."""
    trace_id = new_trace_id()
    outer = task_trace("OUTER", chats=1, trace_id=trace_id)
    inner = task_trace("INNER", chats=2, trace_id=trace_id, parent=outer[0].span_id)
    traces = store()
    traces.add(batch_of(inner), now=0)
    traces.add(batch_of(outer), now=1)
    ready = traces.due(10)
    assert [r[0].attributes["orchestrator.task.id"] for r in ready] == ["OUTER"]
    assert tokens(ready[0]) == 3 * 120
    assert (traces.root_tasks, traces.nested_tasks) == (1, 1)


@pytest.mark.parametrize("reader", ["native", "python", "json"])
def test_a_task_under_a_plain_span_under_a_task_belongs_to_the_outer_task(reader: str) -> None:
    """Task > plain step > task gives one root task, whichever reader decoded the spans and
    in whichever request the plain span came: its parent link is followed."""
    trace_id = new_trace_id()
    outer = task_trace("OUTER", chats=1, trace_id=trace_id)
    step = span(trace_id, new_span_id(), outer[0].span_id, name="plan")
    inner = task_trace("INNER", chats=2, trace_id=trace_id, parent=step.span_id)

    def read(spans: list[Span]) -> Batch:
        if reader == "json":
            return decode(json_body(spans), JSON, ORCHESTRATOR)
        return decode(protobuf_body(spans), PROTOBUF, ORCHESTRATOR, native=reader == "native")

    traces = store()
    traces.add(read(inner), now=0)
    traces.add(read([step]), now=0.5)
    traces.add(read(outer), now=1)
    ready = traces.due(10)
    assert [r[0].attributes["orchestrator.task.id"] for r in ready] == ["OUTER"]
    assert tokens(ready[0]) == 3 * 120
    assert (traces.root_tasks, traces.nested_tasks) == (1, 1)


def test_a_nested_task_keeps_only_its_facts_for_the_outer_run() -> None:
    """A nested task span's own model and tokens count for the outer run; of its attributes
    only those facts are held once it is decided (not its 1 MiB captured input), so what
    the store holds is what it counts."""
    trace_id = new_trace_id()
    outer = task_trace("OUTER", chats=1, trace_id=trace_id)
    inner = span(trace_id, new_span_id(), outer[0].span_id, name="inner", attributes={
        "orchestrator.task.id": "INNER", "gen_ai.request.model": "m-inner",
        "gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 5,
        "input.value": "x" * 2**20})
    traces = store()
    traces.add(batch_of([inner]), now=0)
    traces.add(batch_of(outer), now=1)
    assert traces.due(5.5) == []  # INNER decided: nested in OUTER
    assert traces.nested_tasks == 1
    [*_, held] = traces._traces[trace_id].contributions
    assert "input.value" not in held.attributes
    assert traces.bytes < 64 * 1024
    [(record, summary)] = traces.due(10)
    assert record.attributes["orchestrator.task.id"] == "OUTER"
    assert summary.input_tokens + summary.output_tokens == 120 + 10
    assert "m-inner" in summary.models


def chain_of_tasks(trace_id: bytes, parent: bytes, plain: int, tasks: int) -> list[Span]:
    """``plain`` plain spans one under the other below ``parent``, then ``tasks`` task
    spans under the last of them."""
    spans: list[Span] = []
    for _ in range(plain):
        spans.append(span(trace_id, new_span_id(), parent, name="step"))
        parent = spans[-1].span_id
    return spans + [span(trace_id, new_span_id(), parent, name="sub", attributes={
        "orchestrator.task.id": f"SUB-{n}", "gen_ai.usage.input_tokens": 1})
        for n in range(tasks)]


def test_many_tasks_under_a_long_chain_of_plain_spans_belong_to_the_outer_task() -> None:
    """Task > 3,000 plain spans > 200 tasks: one root task, which takes the inner ones'
    facts. Decided in one call, they share one walk of the chain (see test_table)."""
    trace_id = new_trace_id()
    outer = task_trace("OUTER", chats=1, trace_id=trace_id)
    traces = store()
    traces.add(batch_of(chain_of_tasks(trace_id, outer[0].span_id, 3_000, 200)), now=0)
    traces.add(batch_of(outer), now=1)
    ready = traces.due(10)
    assert [r[0].attributes["orchestrator.task.id"] for r in ready] == ["OUTER"]
    assert tokens(ready[0]) == 120 + 200
    assert (traces.root_tasks, traces.nested_tasks) == (1, 200)
    assert (len(traces), traces.spans, traces.bytes) == (0, 0, 0)


def test_the_decisions_of_one_call_share_one_ancestry_of_their_trace() -> None:
    """Deciding many task spans of a trace in one call reads its links once (one
    Ancestry); another call, after the trace took in more, reads them again."""
    built: list[int] = []

    class Counting(TraceStore):
        @staticmethod
        def _ancestry(entry: Any, done: set[int]) -> Ancestry:
            built.append(len(entry.links))
            return TraceStore._ancestry(entry, done)

    trace_id = new_trace_id()
    outer = task_trace("OUTER", chats=1, trace_id=trace_id)
    traces = Counting(ORCHESTRATOR, grace=5, trace_timeout=60)
    traces.add(batch_of(chain_of_tasks(trace_id, outer[0].span_id, 50, 40)), now=0)
    traces.add(batch_of(outer), now=1)
    assert [r[0].attributes["orchestrator.task.id"] for r in traces.due(10)] == ["OUTER"]
    assert len(built) == 1
    later = batch_of(chain_of_tasks(new_trace_id(), b"", 3, 2))
    traces.add(later, now=20)
    traces.due(30, limit=1)
    traces.due(30)
    assert len(built) == 3  # one per call


def test_a_contribution_ending_as_a_root_task_ends_is_that_task_s() -> None:
    """Two root tasks under one request span: a child ending at the very instant the
    first one ends counts for the first, one ending just after for the second."""
    trace_id = new_trace_id()
    request_span = span(trace_id, new_span_id(), name="POST /run", duration_ms=5000)
    first = task_trace("A", chats=0, trace_id=trace_id, parent=request_span.span_id)
    second = later(task_trace("B", chats=0, trace_id=trace_id, parent=request_span.span_id),
                   1)
    end = first[0].end_time_unix_nano
    chats = [span(trace_id, new_span_id(), request_span.span_id, name="chat", start=end - 10**7,
                  attributes={"gen_ai.usage.input_tokens": tokens_in})
             for tokens_in in (1, 1000)]
    chats[1].end_time_unix_nano += 1
    traces = store()
    traces.add(batch_of([request_span, *first, *second, *chats]), now=0)
    assert {r[0].attributes["orchestrator.task.id"]: tokens(r) for r in traces.due(5)} == {
        "A": 1, "B": 1000}


def read_with(reader: str, spans: list[Span]) -> Batch:
    if reader == "json":
        return decode(json_body(spans), JSON, GENAI)
    return decode(protobuf_body(spans), PROTOBUF, GENAI, native=reader == "native")


@pytest.mark.parametrize("reader", ["native", "python", "json"])
@pytest.mark.parametrize("arrival", ["whole", "parents first", "with copies"])
def test_usage_and_failures_above_others_count_once(reader: str, arrival: str) -> None:
    """A span reporting usage over spans that report theirs counts only what it adds to
    them (two instrumentations of one call: nothing; a span adding up its calls: the
    calls it made uninstrumented), and a failed span over a failed one is one failure,
    found through the parent links of the spans between them (task spans included)
    whichever reader decoded them and however the spans came."""
    spans = tree_spans(new_trace_id(), NESTED_RUN)
    if arrival == "whole":
        requests = [spans]
    elif arrival == "parents first":
        requests = [spans[::-1][:4], spans[::-1][4:9], spans[::-1][9:]]
    else:
        requests = [spans[:7], spans[3:], spans[5:9]]
    traces = TraceStore(GENAI, grace=5, trace_timeout=60)
    for number, part in enumerate(requests):
        traces.add(read_with(reader, part), now=number)
    [(record, summary)] = traces.due(10)
    assert record.attributes["gen_ai.conversation.id"] == "c-1"
    assert (summary.input_tokens, summary.output_tokens) == (500, 100)
    assert summary.failed_spans == 3


def got_past_then_failed(trace_id: bytes) -> list[Span]:
    """A GenAI run whose step fails for its own reason (ending at 60 ms) after a tool call
    under it failed (3 ms) and a later one succeeded (5 ms)."""
    task, step, failed, retried = (new_span_id() for _ in range(4))
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    return [
        span(trace_id, failed, step, name="execute_tool", attributes=tool, error=True,
             duration_ms=3),
        span(trace_id, retried, step, name="execute_tool", attributes=tool, duration_ms=5),
        span(trace_id, step, task, error=True, duration_ms=60),
        span(trace_id, task, name="invoke_agent", duration_ms=61, attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "c-1"}),
    ]


@pytest.mark.parametrize("reader", ["native", "python", "json"])
def test_a_failure_above_one_got_past_is_another(reader: str) -> None:
    """A failed span above a failed one is the same failure going up, unless a span under
    it succeeded after that failure: then it failed for a reason of its own (it was counted
    as the one below)."""
    traces = TraceStore(GENAI, grace=5, trace_timeout=60)
    traces.add(read_with(reader, got_past_then_failed(new_trace_id())), now=0)
    [(_, summary)] = traces.due(10)
    assert summary.failed_spans == 2


def test_a_cycle_of_parent_links_ends_the_walk_up() -> None:
    """Spans whose parent links go round in a circle (hostile input), and one under them,
    are counted each as a span of its own: the walks up from them end."""
    trace_id = new_trace_id()
    [task] = tree_spans(trace_id, ("invoke_agent", {"gen_ai.operation.name": "invoke_agent"},
                                   False, ()))
    ids = [new_span_id() for _ in range(3)]
    usage = {"gen_ai.usage.input_tokens": 5}
    calls = [span(trace_id, ids[n], ids[(n + 1) % 3], name="chat", attributes=usage)
             for n in range(3)]
    plain = span(trace_id, new_span_id(), ids[0], name="chat", attributes=usage)
    traces = TraceStore(GENAI, grace=5, trace_timeout=60)
    traces.add(read_with("native", [*calls, plain, task]), now=0)
    [(_, summary)] = traces.due(10)
    assert summary.input_tokens == 5 * 4


def test_a_trace_holds_at_most_max_links_and_counts_the_others(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``MAX_LINKS`` parent links in a trace, the others are dropped and counted (and
    in /metrics): a task reached only through them is taken for a root."""
    monkeypatch.setattr(grace, "MAX_LINKS", 100)
    trace_id = new_trace_id()
    outer = task_trace("OUTER", chats=1, trace_id=trace_id)
    batches = [batch_of(outer), batch_of(chain_of_tasks(trace_id, outer[0].span_id, 300, 1))]
    links = sum(len(run) for batch in batches for _, run in batch.links) // 16
    pipeline = build_pipeline(Settings(index=False), ORCHESTRATOR, sinks=[InMemorySink()])
    traces = store()
    service = Collector(traces, pipeline, start=False)
    for batch in batches:
        traces.add(batch, now=0)
    assert links > 300 and traces.links_dropped == links - 100
    assert metric_values(metrics_text(service))[
        'otel_diary_spans_dropped_total{reason="trace_links"}'] == links - 100
    service.close(10)
    assert sorted(str(r[0].attributes["orchestrator.task.id"]) for r in traces.due(10)) == [
        "OUTER", "SUB-0"]


def test_parent_links_of_traces_nothing_is_held_of_are_kept_aside_a_while(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain spans of traces without a kept span hold no trace; their links are kept aside
    up to ``MAX_STRAY_BYTES`` of estimated memory, the oldest trace's forgotten first."""
    kept_each = grace.STRAY_TRACE_BYTES + LINKS_OVERHEAD + 2 * 16  # a trace of two links
    monkeypatch.setattr(grace, "MAX_STRAY_BYTES", 2 * kept_each)
    traces = store()
    kept = []
    for _ in range(3):
        trace_id, root = new_trace_id(), new_span_id()
        traces.add(batch_of([span(trace_id, root), span(trace_id, new_span_id(), root),
                             span(trace_id, new_span_id(), root)]), now=0)
        kept.append(trace_id)
    assert (len(traces), traces.bytes) == (0, 0)
    assert list(traces._strays) == kept[1:] and traces._stray_bytes == 2 * kept_each


@pytest.mark.parametrize("reader", ["native", "python", "json"])
def test_a_plain_span_between_two_tasks_that_comes_first_still_nests_them(
        reader: str) -> None:
    """Task > plain span > task, the plain span (another service's) coming alone before
    anything else of its trace: one root task, the outer, as when it comes later."""
    trace_id = new_trace_id()
    outer = task_trace("OUTER", chats=1, trace_id=trace_id)
    call = span(trace_id, new_span_id(), outer[0].span_id, name="POST /agents/inner")
    inner = task_trace("INNER", chats=2, trace_id=trace_id, parent=call.span_id)
    traces = store()
    for number, part in enumerate(([call], inner, outer)):
        if reader == "json":
            traces.add(decode(json_body(part), JSON, ORCHESTRATOR), now=number)
        else:
            traces.add(decode(protobuf_body(part), PROTOBUF, ORCHESTRATOR,
                              native=reader == "native"), now=number)
    assert traces._stray_bytes == 0
    ready = traces.due(10)
    assert [r[0].attributes["orchestrator.task.id"] for r in ready] == ["OUTER"]
    assert tokens(ready[0]) == 3 * 120
    assert (traces.root_tasks, traces.nested_tasks) == (1, 1)


def later(spans: list[Span], seconds: float) -> list[Span]:
    """``spans`` moved ``seconds`` later in time."""
    for item in spans:
        item.start_time_unix_nano += int(seconds * 1e9)
        item.end_time_unix_nano += int(seconds * 1e9)
    return spans


def test_two_root_tasks_in_one_trace_keep_their_own_children() -> None:
    """Two task spans run one after the other under a plain request span: each gets what
    ended during its run; what ends after the last one still counts for the last one."""
    trace_id = new_trace_id()
    request_span = span(trace_id, new_span_id(), name="POST /run", duration_ms=5000)
    first = task_trace("A", chats=1, trace_id=trace_id, parent=request_span.span_id)
    second = later(task_trace("B", chats=3, trace_id=trace_id, parent=request_span.span_id),
                   1)
    straggler = later(task_trace("C", chats=1, trace_id=trace_id)[2:], 3)
    traces = store()
    traces.add(batch_of([request_span, *second, *straggler, *first]), now=0)
    ready = {r[0].attributes["orchestrator.task.id"]: tokens(r) for r in traces.due(5)}
    assert ready == {"A": 120, "B": 480}
    assert (len(traces), traces.spans, traces.late) == (0, 0, 0)


def test_rootless_trace_expires_and_is_counted() -> None:
    """A trace whose task span never comes is forgotten after the timeout, and counted."""
    spans = task_trace("LOST", chats=2)
    traces = store()
    traces.add(batch_of(spans[1:]), now=0)
    traces.expire(59)
    assert len(traces) == 1
    traces.expire(60)
    assert (len(traces), traces.rootless_expired, traces.spans) == (0, 1, 0)


def test_a_run_with_a_nested_task_decided_early_by_the_trace_bound_is_whole() -> None:
    """Past max_traces, the oldest trace's root task is decided early with the task span
    nested in it, whichever of them came first."""
    for first in ("OUTER", "INNER"):
        trace_id = new_trace_id()
        outer = task_trace("OUTER", chats=1, trace_id=trace_id)
        inner = task_trace("INNER", chats=2, trace_id=trace_id, parent=outer[0].span_id)
        traces = store(max_traces=1)
        assert traces.add(batch_of(outer + inner if first == "OUTER" else inner + outer),
                          now=0) == []
        [ready] = traces.add(batch_of(task_trace("NEXT", chats=1)), now=1)
        assert ready[0].attributes["orchestrator.task.id"] == "OUTER"
        assert tokens(ready) == 3 * 120
        assert (traces.root_tasks, traces.nested_tasks, len(traces)) == (1, 1, 1)


def test_a_task_waiting_past_the_trace_timeout_is_still_written() -> None:
    """With a grace period longer than the trace timeout, a trace whose task spans wait
    (a root task and one nested in it) is not forgotten when it times out: the run is
    decided when its grace ends, with every span it had."""
    trace_id = new_trace_id()
    outer = task_trace("OUTER", chats=1, trace_id=trace_id)
    inner = task_trace("INNER", chats=2, trace_id=trace_id, parent=outer[0].span_id)
    traces = TraceStore(ORCHESTRATOR, grace=100, trace_timeout=60)
    traces.add(batch_of(inner + outer), now=0)
    traces.expire(60)
    assert (len(traces), traces.rootless_expired) == (1, 0)
    [ready] = traces.due(100)
    assert ready[0].attributes["orchestrator.task.id"] == "OUTER"
    assert tokens(ready) == 3 * 120
    traces.expire(200)
    assert (len(traces), traces.spans, traces.rootless_expired) == (0, 0, 0)


def test_children_after_the_decision_are_counted_late() -> None:
    """A child arriving after its task's diary was decided is late, not a rootless trace."""
    spans = task_trace("T-late", chats=2)
    traces = store()
    traces.add(batch_of(spans[:3]), now=0)
    assert len(traces.due(5)) == 1
    traces.add(batch_of(spans[3:]), now=6)
    traces.expire(100)
    assert (traces.late, traces.rootless_expired) == (1, 0)


def test_trace_bound_decides_the_oldest_trace_early() -> None:
    """Past max_traces the least recently active trace is decided now, not lost."""
    traces = store(max_traces=2)
    ready: list[Ready] = []
    for n in range(3):
        ready += traces.add(batch_of(task_trace(f"T-{n}", chats=1)), now=n)
    assert [r[0].attributes["orchestrator.task.id"] for r in ready] == ["T-0"]
    assert (len(traces), traces.evicted) == (2, 1)


def test_traces_without_a_task_go_first_at_a_bound() -> None:
    """At a bound a trace holding no task span is dropped before an older task trace."""
    traces = store(max_traces=2)
    ready = traces.add(batch_of(task_trace("T-old", chats=1)), now=0)
    ready += traces.add(batch_of(task_trace("LOST", chats=2)[1:]), now=1)
    assert (traces.taskless_traces, traces.taskless_spans) == (1, 2)
    ready += traces.add(batch_of(task_trace("T-new", chats=1)), now=2)
    assert ready == []
    assert (len(traces), traces.evicted, traces.evicted_taskless) == (2, 0, 1)
    assert (traces.taskless_traces, traces.taskless_spans, traces.taskless_bytes) == (0, 0, 0)
    assert traces.taskless_dropped == 2
    assert [r[0].attributes["orchestrator.task.id"] for r in traces.due(10)] == ["T-old",
                                                                                "T-new"]
    assert (traces.spans, traces.bytes) == (0, 0)


def test_a_trace_stops_counting_as_taskless_when_its_task_comes() -> None:
    """A trace whose task span comes after its children is no longer first to go."""
    spans = task_trace("T-late-root", chats=2)
    traces = store()
    traces.add(batch_of(spans[1:]), now=0)
    assert traces.taskless_traces == 1 and traces.taskless_bytes > 0
    traces.add(batch_of(spans[:1]), now=1)
    assert (traces.taskless_traces, traces.taskless_spans, traces.taskless_bytes) == (0, 0, 0)
    assert tokens(traces.due(10)[0]) == 240


def test_collector_takes_a_task_while_taskless_traces_fill_the_bound() -> None:
    """Admission counts traces without a task span as room: no 503 while they can go."""
    sink = InMemorySink()
    service = collector(sink, max_traces=3, max_spans=4)
    try:
        for _ in range(4):
            assert service.offer(batch_of(task_trace("x", chats=1)[1:]))[0] is Admission.ACCEPTED
        assert service.saturation() is Admission.ACCEPTED
        assert service.offer(batch_of(task_trace("T-in", chats=1)))[0] is Admission.ACCEPTED
        assert service.store.evicted_taskless >= 2
    finally:
        service.close()
    assert [d.task_id for d in sink.diaries] == ["T-in"]


def test_drain_decides_every_waiting_task() -> None:
    """At the end of input every waiting task span is decided at once."""
    traces = store()
    traces.add(batch_of(task_trace("A") + task_trace("B")), now=0)
    traces.add(batch_of(task_trace("C")[1:]), now=0)
    assert len(traces.drain()) == 2
    assert (len(traces), traces.rootless_expired) == (0, 1)


def collector(sink: InMemorySink, *, start: bool = True, **bounds: float) -> Collector:
    settings = Settings(dir=None, index=False)
    pipeline = build_pipeline(settings, ORCHESTRATOR, sinks=[sink])
    traces = TraceStore(ORCHESTRATOR, grace=0.05, trace_timeout=60, **bounds)  # type: ignore[arg-type]
    return Collector(traces, pipeline, start=start)


def test_collector_assembles_offered_batches_into_diaries() -> None:
    """Batches offered from a handler become diaries on the pipeline thread."""
    sink = InMemorySink()
    service = collector(sink)
    try:
        spans = task_trace("T-c", chats=2)
        assert service.offer(batch_of(spans[2:]))[0] is Admission.ACCEPTED
        assert service.offer(batch_of(spans[:2]))[0] is Admission.ACCEPTED
        diaries = sink.wait_for(1, timeout=10)
        assert [d.task_id for d in diaries] == ["T-c"]
        assert "Tokens: 240" in diaries[0].body
    finally:
        assert service.close(10)


def test_offer_assembles_the_batch_at_once() -> None:
    """An accepted batch is in the store when offer returns (no thread involved); a
    batch of refused spans only is accepted and holds nothing."""
    service = collector(InMemorySink(), start=False)
    assert service.offer(batch_of(task_trace("A", chats=2)))[0] is Admission.ACCEPTED
    assert (len(service.store), service.store.spans, service.store.accepted) == (1, 3, 4)
    zero = batch_of([span(bytes(16), b"\x01" * 8)])
    assert (zero.valid, zero.rejected) == (0, 1)
    assert service.offer(zero)[0] is Admission.ACCEPTED
    assert (len(service.store), service.store.accepted) == (1, 4)


def test_collector_says_store_full_at_the_span_bound() -> None:
    """Past the held-span bound the collector refuses batches (503) instead of growing."""
    service = collector(InMemorySink(), start=False, max_spans=5)  # task + chats are held
    assert service.offer(batch_of(task_trace("A", chats=2)))[0] is Admission.ACCEPTED
    assert service.offer(batch_of(task_trace("B", chats=2)))[0] is Admission.STORE_FULL
    assert service.offer(batch_of(task_trace("C", chats=9)))[0] is Admission.TOO_LARGE


def test_close_writes_waiting_diaries_before_their_grace_ends() -> None:
    """Shutting down decides every waiting task now and delivers its diary."""
    sink = InMemorySink()
    settings = Settings(index=False)
    pipeline = build_pipeline(settings, ORCHESTRATOR, sinks=[sink])
    service = Collector(TraceStore(ORCHESTRATOR, grace=3600), pipeline)
    assert service.offer(batch_of(task_trace("T-close")))[0] is Admission.ACCEPTED
    assert service.close(10)
    assert [d.task_id for d in sink.diaries] == ["T-close"]
    assert service.offer(batch_of(task_trace("T-after")))[0] is Admission.CLOSED


class _StuckSink(InMemorySink):
    """Holds the pipeline thread in its first write until released; says when closed."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.closed = False

    def write(self, diary: Diary) -> str:
        self.entered.set()
        self.release.wait(30)
        return super().write(diary)

    def close(self) -> None:
        self.closed = True


def test_close_past_its_timeout_leaves_the_pipeline_open_under_its_runner() -> None:
    """A runner still writing when the shutdown timeout passes keeps the pipeline (its
    index connection closed under it crashed the process): close says False, and the
    diary it was writing is still written."""
    sink = _StuckSink()
    settings = Settings(index=False)
    pipeline = build_pipeline(settings, ORCHESTRATOR, sinks=[sink])
    service = Collector(TraceStore(ORCHESTRATOR, grace=0), pipeline)
    assert service.offer(batch_of(task_trace("T-stuck")))[0] is Admission.ACCEPTED
    assert sink.entered.wait(10)
    assert service.close(0.2) is False
    closed_at_timeout = sink.closed
    sink.release.set()
    diaries = sink.wait_for(1, timeout=10)
    assert closed_at_timeout is False
    assert [d.task_id for d in diaries] == ["T-stuck"]


def test_metrics_text_is_prometheus_exposition() -> None:
    """Counters come out in the Prometheus text format with HELP and TYPE lines."""
    sink = InMemorySink()
    service = collector(sink)
    try:
        service.counters.add("spans_received_total:protocol", "http", 4)
        service.offer(batch_of(task_trace("T-m")))
        sink.wait_for(1, timeout=10)
        assert service.flush(10)
        text = metrics_text(service)
    finally:
        service.close(10)
    assert "# TYPE otel_diary_spans_received_total counter" in text
    values = metric_values(text)
    assert values['otel_diary_spans_received_total{protocol="http"}'] == 4
    assert values["otel_diary_diaries_written_total"] == 1
    assert values['otel_diary_tasks_total{kind="root"}'] == 1


def test_collector_says_behind_when_diaries_wait_past_their_bound() -> None:
    """Past the bound of decided tasks waiting for the pipeline, batches are refused
    until it catches up."""
    pipeline = build_pipeline(Settings(index=False), ORCHESTRATOR, sinks=[InMemorySink()])
    service = Collector(TraceStore(ORCHESTRATOR, grace=0), pipeline, max_pending=1,
                        start=False)
    assert service.offer(batch_of(task_trace("A")))[0] is Admission.ACCEPTED
    assert not service.flush(0.05)  # decided; nothing writes it
    assert service.pending_diaries == 1
    assert service.saturation() is Admission.BEHIND
    assert service.offer(batch_of(task_trace("B")))[0] is Admission.BEHIND


def test_after_a_long_hold_the_timer_leaves_the_lock_to_the_receivers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A round of the timer that held the lock longer than ``LONG_HOLD_S`` stops there and
    asks to sleep twice as long (at most a second) before the next; what is still due
    waits for it. Otherwise one round decides everything due, a slice at a time."""
    pipeline = build_pipeline(Settings(index=False), ORCHESTRATOR, sinks=[InMemorySink()])
    service = Collector(TraceStore(ORCHESTRATOR, grace=0), pipeline, start=False)
    for name in ("A", "B", "C"):
        service.offer(batch_of(task_trace(name)))
    monkeypatch.setattr(admission, "DECIDE_AT_ONCE", 1)
    monkeypatch.setattr(admission, "LONG_HOLD_S", 0.0)  # every hold is a long one
    pause = service._decide_due(False)
    assert pause is not None and 0 < pause <= 1.0
    assert service.pending_diaries == 1 and service.store.is_due(float("inf"))
    monkeypatch.setattr(admission, "LONG_HOLD_S", float("inf"))
    service._decide_due(False)
    assert service.pending_diaries == 3 and not service.store.is_due(float("inf"))
    monkeypatch.undo()
    assert admission.pause_after(0.019) == 0.0  # a short hold: no pause
    assert admission.pause_after(0.3) == pytest.approx(0.6)  # twice as long
    assert admission.pause_after(0.8) == 1.0  # at most a second


def test_many_root_tasks_of_one_trace_find_their_contributions_in_one_pass() -> None:
    """Root tasks of one trace decided together each take the contributions that ended
    since the one before (the first one: up to it; the last one: after it too); each
    contribution's task is looked up once, not once per task (a request of 10,000 tasks
    and 20,000 failed calls took a minute of CPU)."""
    import sys

    trace_id, parent = new_trace_id(), new_span_id()
    spans = [span(trace_id, parent, name="session")]
    for n in range(300):
        at = 10**18 + n * 10**9
        spans += [span(trace_id, new_span_id(), parent, name="tool", error=True, start=at,
                       duration_ms=1),
                  span(trace_id, new_span_id(), parent, name="chat", start=at, duration_ms=2,
                       attributes={"gen_ai.usage.input_tokens": n}),
                  span(trace_id, new_span_id(), parent, name="task", start=at, duration_ms=5,
                       attributes={"gen_ai.operation.name": "invoke_agent",
                                   "gen_ai.agent.name": f"agent-{n}"})]
    spans.append(span(trace_id, new_span_id(), parent, name="tool", error=True,
                      start=10**18 + 400 * 10**9))  # after every task: the last one's
    traces = TraceStore(GENAI, grace=5, trace_timeout=60)
    traces.add(decode(protobuf_body(spans), PROTOBUF, GENAI), now=0)
    lookups = 0

    def count(frame: Any, event: str, called: Any) -> None:
        nonlocal lookups
        lookups += event == "c_call" and getattr(called, "__name__", "") == "bisect_left"

    sys.setprofile(count)
    try:
        ready = traces.due(10)
    finally:
        sys.setprofile(None)
    assert lookups == 601  # one per contribution (the old loop: one per task and each left)
    assert len(ready) == 300
    for n, (record, summary) in enumerate(ready):
        assert record.attributes["gen_ai.agent.name"] == f"agent-{n}"
        assert summary.input_tokens == n
        assert summary.failed_spans == (2 if n == 299 else 1)
    assert (len(traces), traces.spans, traces.bytes, traces.late) == (0, 0, 0, 0)
