"""In process and in ``serve``, one run gives one diary, byte for byte: random agent runs
(model calls, tool calls, sub-agents, plain spans between them, failures anywhere, calls
side by side) go through a real ``TracerProvider`` with the diary processor, and the same
spans, encoded by the OTLP exporter's encoder, through ``serve``'s decoding and assembly,
also when ``serve`` ended before deciding them and takes them back from its journal."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from random import Random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_diary import DiarySpanProcessor, Settings
from otel_diary.assembly.grace import TraceStore
from otel_diary.assembly.journal import Journal
from otel_diary.conventions import load_conventions
from otel_diary.receiver.admission import Collector
from otel_diary.receiver.decode import PROTOBUF, decode
from otel_diary.testing import InMemorySink
from otel_diary.wiring import build_pipeline
from tests.support.serve_path import serve_diaries

START_NS = 1_790_000_000_000_000_000
Attributes = dict[str, str | int]
PROFILES: dict[str, dict[str, Attributes]] = {
    "genai": {
        "run": {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "c-1",
                "gen_ai.agent.name": "coder"},
        "step": {},
        "chat": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m-1",
                 "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 3},
        "reply": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m-2"},
        "summary": {"gen_ai.usage.input_tokens": 25, "gen_ai.usage.output_tokens": 5},
        "search": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
        "read": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read"},
        "helper": {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"},
    },
    "openinference": {
        "run": {"openinference.span.kind": "AGENT", "session.id": "s-1",
                "agent.name": "coder"},
        "step": {},
        "chat": {"openinference.span.kind": "LLM", "llm.model_name": "m-1",
                 "llm.token_count.prompt": 10, "llm.token_count.completion": 3},
        "reply": {"openinference.span.kind": "LLM", "llm.model_name": "m-2"},
        "summary": {"openinference.span.kind": "CHAIN"},
        "search": {"openinference.span.kind": "TOOL", "tool.name": "search"},
        "read": {"openinference.span.kind": "TOOL", "tool.name": "read"},
        "helper": {"openinference.span.kind": "AGENT", "agent.name": "helper"},
    },
}
PROFILES["orchestrator"] = {
    **PROFILES["genai"],
    "run": {"orchestrator.task.id": "T-1", "orchestrator.agent.name": "coder",
            "orchestrator.escalation_count": 1},
    "helper": {"orchestrator.task.id": "T-1.1", "gen_ai.agent.name": "helper"},
}
PROFILES["auto"] = PROFILES["genai"]
PROFILES["traceloop"] = {  # read under ``auto``
    **PROFILES["genai"],
    "run": {"traceloop.span.kind": "workflow", "traceloop.workflow.name": "Agent Workflow"},
    "helper": {"traceloop.span.kind": "agent", "gen_ai.operation.name": "invoke_agent",
               "gen_ai.agent.name": "helper"},
}
"""Each profile's spans by kind: the run (its task span), a plain span, model calls (one
reporting usage, one whose prompt and answer are captured), a span adding up usage (a
chain under OpenInference: a task span nested in the run), tool calls, a sub-agent."""
PROFILES["strands"] = {  # a Strands Agents swarm, read under ``genai``
    **PROFILES["genai"], "run": {"gen_ai.operation.name": "invoke_swarm"}}
PROFILES["agent-framework"] = {  # a Microsoft Agent Framework workflow, read under ``auto``
    **PROFILES["genai"], "run": {"workflow.name": "Flow", "workflow.id": "w-1"}}
CONVENTIONS = {"traceloop": "auto", "strands": "genai", "agent-framework": "auto"}
"""The conventions a profile's spans are read with, when not the profile's own name."""
MESSAGES = {"genai": ("gen_ai.input.messages", "gen_ai.output.messages"),
            "openinference": ("input.value", "output.value")}
ARGUMENTS = {"genai": "gen_ai.tool.call.arguments", "openinference": "input.value"}
"""What a tool call was given, when captured."""
RESULTS = {"genai": "gen_ai.tool.call.result"}
"""What a tool call returned, when captured (a failed one's output tells it when its span
names no more than the error's class)."""
for profile in ("orchestrator", "auto", "traceloop", "strands", "agent-framework"):
    MESSAGES[profile] = MESSAGES["genai"]
    ARGUMENTS[profile] = ARGUMENTS["genai"]
    RESULTS[profile] = RESULTS["genai"]
TASK_IDS = {"gen_ai.conversation.id", "session.id", "orchestrator.task.id"}
KINDS = sorted(PROFILES["genai"].keys() - {"run"})


def attributes(profile: str, node: Node) -> Attributes:
    """The attributes of ``node``'s span: a reply's messages name when it ended."""
    if node.kind == "request":
        return {}
    found = PROFILES[profile][node.kind]
    if node.response:  # a response's usage, with its id (one reported twice counts once)
        found = {**found, "gen_ai.response.id": node.response, **(
            {} if node.kind not in ("run", "helper") else {"gen_ai.usage.input_tokens": 10,
                                                           "gen_ai.usage.output_tokens": 3})}
    if node.kind == "run":  # each run its own task id
        found = {key: f"{value}-{node.end}" if key in TASK_IDS else value
                 for key, value in found.items()}
    elif node.kind == "reply":
        asked, answered = MESSAGES[profile]
        found = {**found, asked: f"Question {node.end}?", answered: f"Answer {node.end}."}
    else:
        if node.given:
            found = {**found, ARGUMENTS[profile]: node.given}
        if node.returned and profile in RESULTS:
            found = {**found, RESULTS[profile]: node.returned}
    return found


@dataclass
class Node:
    kind: str
    failed: bool
    under: list[Node] = field(default_factory=list)
    remote: bool = False
    """Of the trace's first span: started under a caller in another service."""
    raised: str = ""
    """Of a failed span: how it records why (an exception event, an ``error.type``, only
    its status description, or no more than its class)."""
    start: int = 0
    end: int = 0
    given: str = ""
    """Of a tool call: what it was given, when captured."""
    returned: str = ""
    """Of a tool call: what it returned, when captured."""
    response: str = ""
    """Of a model call, a span adding up usage, a sub-agent or a run: the id of the
    response whose usage it reports (a sub-agent's or a run's own usage is then that
    response's)."""


@st.composite
def nodes(draw: st.DrawFn, depth: int = 0) -> Node:
    node = Node(draw(st.sampled_from(KINDS)), draw(st.booleans()),
                raised=draw(st.sampled_from(["", "exception", "error.type", "class"])))
    if node.kind in ("search", "read"):  # two calls may end at once: told by this
        node.given = draw(st.sampled_from(["", '{"q": "a"}', '{"q": "b"}']))
        node.returned = draw(st.sampled_from(
            ["", '{"status": "error", "stderr": "E1 boom"}', '{"stdout": "E2 boom"}',
             '{"error": "E3 bust"}']))
    if node.kind in ("chat", "summary", "helper"):
        node.response = draw(st.sampled_from(["", "r-1", "r-2"]))
    if depth < 3 and node.kind in ("step", "helper", "search", "summary"):
        node.under = draw(st.lists(nodes(depth + 1), max_size=3))
    return node


def lay_out(node: Node, clock: list[int], draw: st.DrawFn, ties: bool) -> None:
    """Give ``node`` and those under it times (ms): every span ends after the spans under
    it and its earlier siblings, or at the same instant (a coarse clock); a span with
    nothing under it starts up to 25 ms before it ends, so that siblings may run side by
    side. Without ``ties``, every span ends at an instant of its own."""
    for child in node.under:
        lay_out(child, clock, draw, ties)
    clock[0] += draw(st.sampled_from([10, 10, 10, 0])) if ties else 10
    node.end = clock[0]
    node.start = min([node.end - draw(st.integers(1, 25)),
                      *(child.start - 1 for child in node.under)])


@st.composite
def runs(draw: st.DrawFn) -> Node:
    """A run, or one or two runs one after another under a request span (their local
    root, which ends last); either may have been called from another service."""
    made = [Node("run", draw(st.booleans()), draw(st.lists(nodes(), min_size=1, max_size=4)),
                 response=draw(st.sampled_from(["", "", "r-1"])))
            for _ in range(draw(st.integers(1, 2)))]
    root = Node("request", False, made) if len(made) > 1 or draw(st.booleans()) else made[0]
    root.remote = draw(st.booleans())
    # two runs of one trace that end at the same instant as each other's calls are two
    # runs at the same time, whose calls serve tells apart by when they ended
    lay_out(root, [100], draw, ties=len(made) == 1)
    return root


def in_process(profile: str, root: Node) -> tuple[list[str], list[ReadableSpan]]:
    """The diaries the processor writes for ``root``, and the spans the app ended."""
    sink, exported = InMemorySink(), InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}),
                              shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[sink],
                                   conventions=CONVENTIONS.get(profile, profile))
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exported))
    tracer = provider.get_tracer("agent")
    started: list[tuple[int, Node, trace.Span]] = []

    def start(node: Node, parent: trace.Span | None) -> None:
        context = None if parent is None else trace.set_span_in_context(parent)
        span = tracer.start_span(node.kind, context, attributes=attributes(profile, node),
                                 start_time=START_NS + node.start * 1_000_000)
        started.append((node.end, node, span))
        for child in node.under:
            start(child, span)

    start(root, trace.NonRecordingSpan(trace.SpanContext(
        0x5EED, 0xCA11, is_remote=True)) if root.remote else None)
    # in the order they end: at the same instant, the span started last first (a child
    # before its parent)
    for end, node, span in sorted(reversed(started), key=lambda item: item[0]):
        if node.failed:
            if node.raised == "exception":
                span.record_exception(TimeoutError(f"{node.kind} timed out at {end}"),
                                      timestamp=START_NS + end * 1_000_000)
            elif node.raised == "error.type":
                span.set_attribute("error.type", f"{node.kind.title()}Error")
            if node.raised == "class":  # no more than the class: its result tells (ADK)
                span.set_attribute("error.type", "TOOL_ERROR")
                span.set_status(Status(StatusCode.ERROR, "TOOL_ERROR"))
            else:
                span.set_status(Status(StatusCode.ERROR, f"{node.kind} failed"))
        span.end(START_NS + end * 1_000_000)
    assert processor.force_flush(10_000)
    provider.shutdown()
    return [diary.content for diary in sink.diaries], list(exported.get_finished_spans())


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(PROFILES)), runs(), st.randoms(use_true_random=False))
def test_a_run_gives_the_same_diary_in_process_and_in_serve(profile: str, root: Node,
                                                            shuffle: Random) -> None:
    diaries, spans = in_process(profile, root)
    conventions = CONVENTIONS.get(profile, profile)
    assert serve_diaries(conventions, spans) == diaries
    assert sorted(serve_diaries(conventions, spans, shuffle)) == sorted(diaries)


def test_a_step_ended_ok_around_a_failed_sub_agent_is_no_run_going_on() -> None:
    """A chain that ended OK around a sub-agent's failed run, with nothing after, is not
    the run going on past it: no diary, in process and in ``serve`` (which read the chain
    as going on: nothing under it was looked at)."""
    helper = Node("helper", True, start=109, end=110)
    root = Node("run", False, [Node("summary", False, [helper], start=108, end=120)],
                start=107, end=130)
    diaries, spans = in_process("openinference", root)
    assert diaries == []
    assert serve_diaries("openinference", spans) == []


def test_a_chain_ended_ok_over_a_failure_after_a_failed_sub_agent_is_no_run_going_on(
        ) -> None:
    """After a sub-agent's failed run, a chain that ended OK over a failed model call,
    with nothing after, is not the run going on past it: no diary, in process and in
    ``serve`` (which read the chain as going on: nothing under it was looked at, as
    nothing was above the failed run)."""
    helper = Node("helper", True, start=109, end=110)
    chain = Node("summary", False, [Node("chat", True, start=119, end=120)], start=118,
                 end=130)
    root = Node("run", False, [helper, chain], start=108, end=140)
    diaries, spans = in_process("openinference", root)
    assert diaries == []
    assert serve_diaries("openinference", spans) == []


@pytest.mark.parametrize("profile", ["genai", "openinference"])
def test_a_tool_call_that_went_on_past_a_failure_under_it_succeeded(profile: str) -> None:
    """A tool call over a failed call and a model call that ended after it got past the
    failure: in process and in ``serve`` alike, only the failed call's tool failed
    (``serve`` once read the tool call as failed, not looking at what went on after)."""
    failed = Node("read", True, start=109, end=110)
    after = Node("reply", False, start=119, end=120)
    root = Node("run", False, [Node("search", False, [failed, after], start=108, end=130)],
                start=107, end=140)
    [diary], spans = in_process(profile, root)
    assert "After a call to the read tool failed, the agent went on without it.\n" in diary
    assert "search tool failed" not in diary
    assert serve_diaries(profile, spans) == [diary]


def after_a_restart(profile: str, spans: list[ReadableSpan], shuffle: Random) -> list[str]:
    """The diaries ``serve`` writes for ``spans``, sent in any order over two requests and
    journaled, when it ended before deciding any and took them back on its next start."""
    conventions = load_conventions(CONVENTIONS.get(profile, profile))
    spans = shuffle.sample(spans, len(spans))
    cut = shuffle.randint(0, len(spans))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "journal.sqlite3"

        def service(sink: InMemorySink, *, start: bool) -> Collector:
            pipeline = build_pipeline(Settings(dir=None, index=False), conventions,
                                      sinks=[sink])
            return Collector(TraceStore(conventions, grace=0), pipeline,
                             journal=Journal(path), start=start)

        first = service(InMemorySink(), start=False)  # nothing decides: the journal alone
        assert first.journal is not None
        first.journal.start()
        for part in (spans[:cut], spans[cut:]):
            _, durable = first.offer(decode(encode_spans(part).SerializeToString(), PROTOBUF,
                                            conventions))
            if durable is not None:  # something in it to hold
                durable.result(10)
        first.journal.close()  # as if the process had been killed
        sink = InMemorySink()
        assert service(sink, start=True).close(10)
    return [diary.content for diary in sink.diaries]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(PROFILES)), runs(), st.randoms(use_true_random=False))
def test_a_run_gives_the_same_diary_after_serve_takes_it_back_from_its_journal(
        profile: str, root: Node, shuffle: Random) -> None:
    diaries, spans = in_process(profile, root)
    assert sorted(after_a_restart(profile, spans, shuffle)) == sorted(diaries)



def test_a_call_whose_result_says_it_failed_is_a_failure_in_serve_too() -> None:
    """A tool call whose span ended OK but whose result says it failed (``{"status":
    "error"}``), under a failed step that went on past it before failing itself: two
    failed calls, in process and in ``serve`` (which once took the call's span status
    alone, and read nothing under the step)."""
    handed = Node("read", False, start=142, end=160,
                  returned='{"status": "error", "stderr": "E1 boom"}')
    step = Node("step", True, [handed, Node("reply", False, start=172, end=180)],
                raised="error.type", start=141, end=190)
    root = Node("run", False, [step, Node("reply", False, start=195, end=200)], start=140,
                end=210)
    [diary], spans = in_process("genai", root)
    assert "2 failed call(s) (StepError)" in diary
    assert serve_diaries("genai", spans) == [diary]
