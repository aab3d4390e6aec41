"""The `openinference` profile with the real OpenInference instrumentations: the ``openai``
client and the OpenAI Agents SDK, against an OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import agents
import openai
import pytest
from openinference.instrumentation import using_session
from openinference.instrumentation.openai import OpenAIInstrumentor
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from openinference.instrumentation.openai_agents._processor import (
    OpenInferenceTracingProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from otel_diary import Diary, DiarySpanProcessor
from otel_diary.conventions import OPENINFERENCE
from otel_diary.pipeline.render import parse_front_matter
from otel_diary.testing import InMemorySink
from tests.cli.test_serve import Serve
from tests.support.build_run import CALL_TOKENS, MODEL
from tests.support.loopback import ChatServer, ToolCall, serve_asgi
from tests.support.serve_path import SameInServe


class Harness:
    """A provider whose diary processor uses the `openinference` profile (or another);
    after each test, ``serve`` must write the same diaries from the spans it ended."""

    def __init__(self, conventions: str = "openinference") -> None:
        self.sink = InMemorySink()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "svc"}),
                                       shutdown_on_exit=False)
        self.processor = DiarySpanProcessor(enabled=True, sinks=[self.sink],
                                            conventions=conventions)
        self.provider.add_span_processor(self.processor)
        self.serve = SameInServe(self.provider, conventions)

    def diaries(self) -> list[Diary]:
        assert self.processor.force_flush(10_000)
        return self.sink.diaries


@pytest.fixture
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    made = Harness(getattr(request, "param", "openinference"))
    yield made
    made.provider.shutdown()
    made.serve.check(made.sink.diaries)


@pytest.fixture(autouse=True)
def dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """No real key and no real endpoint: every client here is given the local server."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def error_section(diary: Diary) -> str:
    return diary.body.split("## Error encountered\n", 1)[1].split("\n## ", 1)[0]


def test_profile_is_selected_by_name(harness: Harness) -> None:
    """`conventions="openinference"` selects the OpenInference profile."""
    assert harness.processor.conventions is OPENINFERENCE


# -- openinference-instrumentation-openai with the openai client ----------------------


def ask(client: openai.OpenAI, question: str) -> str:
    """One model call, retried once by the app after a server error."""
    for attempt in (1, 2):
        try:
            reply = client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": question}])
            return reply.choices[0].message.content or ""
        except openai.APIError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def run_agent(harness: Harness, client: openai.OpenAI, session: str) -> None:
    """The app's own AGENT span around ask, a TOOL span, ask again."""
    tracer = harness.provider.get_tracer("app")
    with tracer.start_as_current_span("researcher", attributes={
            "openinference.span.kind": "AGENT", "agent.name": "researcher",
            "session.id": session}):
        draft = ask(client, "What changed?")
        with tracer.start_as_current_span("lookup", attributes={
                "openinference.span.kind": "TOOL", "tool.name": "lookup"}):
            notes = f"notes about {draft}"
        ask(client, notes)


@pytest.fixture
def instrumented_openai(harness: Harness) -> Iterator[None]:
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=harness.provider)
    yield
    instrumentor.uninstrument()


@pytest.mark.usefixtures("instrumented_openai")
def test_openai_client_runs_give_one_diary_each(harness: Harness) -> None:
    """Each agent run over the instrumented client is one diary with the model, the summed
    tokens and the tool call; the run whose call failed once is recovered, naming the error."""
    server = ChatServer(script=["draft", "final", "draft", 500, "final"], model=MODEL)
    with serve_asgi(server) as url:
        client = openai.OpenAI(base_url=url + "/v1", max_retries=0)
        run_agent(harness, client, "conv-1")
        run_agent(harness, client, "conv-2")
    found = {diary.task_id: diary for diary in harness.diaries()}
    assert sorted(found) == ["conv-1", "conv-2"]
    assert {task: diary.outcome for task, diary in found.items()} == {
        "conv-1": "completed", "conv-2": "recovered"}
    for diary in found.values():
        front = parse_front_matter(diary.content)
        assert (diary.agent, front["model"]) == ("researcher", MODEL)
        assert front["tokens"] == 2 * CALL_TOKENS
        assert "Made 1 tool call(s): lookup (1)." in diary.body
        assert diary.title == "What changed?"  # the first user message the client sent
        assert 'The final answer began: "final"' in diary.body
    assert "1 failed call(s) (openai.InternalServerError)" in error_section(found["conv-2"])
    assert len(server.requests) == 5


# -- openinference-instrumentation-openai-agents with openai-agents --------------------


@pytest.fixture
def instrumented_agents(harness: Harness) -> Iterator[None]:
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=harness.provider)
    yield
    instrumentor.uninstrument()


@pytest.mark.usefixtures("instrumented_agents")
def test_agents_sdk_exports_nowhere_else() -> None:
    """Instrumented, the Agents SDK's only trace processor is OpenInference's: its own
    exporter (to api.openai.com) is replaced, so no run leaves the machine."""
    processors = agents.tracing.get_trace_provider()._multi_processor._processors  # type: ignore[attr-defined]
    assert [type(p) for p in processors] == [OpenInferenceTracingProcessor]


def agent_run(url: str, lookups: list[str], stream: bool = False) -> str:
    """An Agents SDK agent with one tool that fails on its first call; the model call that
    meets a server error is retried by the runner. With ``stream``, the run and its model
    calls stream (asking for their usage)."""

    @agents.function_tool
    def lookup(term: str) -> str:
        """Look a term up."""
        lookups.append(term)
        if len(lookups) == 1:
            raise TimeoutError("lookup timed out")
        return f"notes about {term}"

    client = openai.AsyncOpenAI(base_url=url + "/v1", max_retries=0)
    retry = agents.ModelRetrySettings(
        max_retries=1, backoff={"initial_delay": 0},
        policy=agents.retry_policies.http_status([500]))
    agent = agents.Agent(
        name="researcher", instructions="Be brief.", tools=[lookup],
        model=agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        model_settings=agents.ModelSettings(retry=retry, include_usage=True if stream else None))
    if not stream:
        return str(agents.Runner.run_sync(agent, "What changed?").final_output)

    async def streamed() -> str:
        result = agents.Runner.run_streamed(agent, "What changed?")
        async for _ in result.stream_events():
            pass
        return str(result.final_output)

    return asyncio.run(streamed())


def handoff_run(url: str) -> str:
    """A triage agent that hands the question over to a specialist, which answers."""
    client = openai.AsyncOpenAI(base_url=url + "/v1", max_retries=0)
    model = agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    specialist = agents.Agent(name="specialist", instructions="Answer.", model=model)
    triage = agents.Agent(name="triage", instructions="Hand over.", model=model,
                          handoffs=[specialist])
    return str(agents.Runner.run_sync(triage, "What changed?").final_output)


def handoff_script() -> ChatServer:
    return ChatServer(script=[ToolCall("transfer_to_specialist", "{}"), "The release moved."],
                      model=MODEL)


@pytest.mark.usefixtures("instrumented_agents")
def test_a_handoff_is_one_diary(harness: Harness) -> None:
    """That instrumentation makes the run's workflow an ``AGENT`` span over both agents'
    spans: a triage agent handing over to a specialist is one diary."""
    with serve_asgi(handoff_script()) as url:
        assert handoff_run(url) == "The release moved."
    [diary] = harness.diaries()
    front = parse_front_matter(diary.content)
    assert (diary.outcome, front["model"], front["tokens"]) == ("completed", MODEL,
                                                                2 * CALL_TOKENS)
    assert (diary.agent, diary.title) == ("triage", "What changed?")
    assert 'The final answer began: "The release moved."' in diary.body


@pytest.mark.usefixtures("instrumented_agents")
def test_an_agent_another_uses_as_a_tool_is_part_of_its_diary(harness: Harness) -> None:
    """A lead agent calling a translator agent as its tool (``as_tool``) is one diary, by
    the lead: the agent that started first, not the translator, whose run ended first."""
    script = ChatServer(script=[ToolCall("translate", '{"input": "What changed?"}'),
                                "Qu'est-ce qui a change ?", "Translated."], model=MODEL)
    with serve_asgi(script) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", max_retries=0)
        model = agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
        translator = agents.Agent(name="translator", instructions="Translate.", model=model)
        lead = agents.Agent(name="lead", instructions="Use your tools.", model=model,
                            tools=[translator.as_tool(tool_name="translate",
                                                      tool_description="Translate.")])
        assert agents.Runner.run_sync(lead, "What changed?").final_output == "Translated."
    [diary] = harness.diaries()
    front = parse_front_matter(diary.content)
    assert (diary.agent, diary.outcome, diary.title) == ("lead", "completed", "What changed?")
    assert front["tokens"] == 3 * CALL_TOKENS
    assert "translate (1)" in diary.body


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
@pytest.mark.usefixtures("instrumented_agents")
def test_agents_sdk_run_is_one_recovered_diary(harness: Harness, stream: bool) -> None:
    """An agent loop with a failed model call retried, a failed tool call repeated and a
    final answer is one diary: the session, the model, the summed tokens, two tool calls,
    recovered; the same when the run streams."""
    lookup = ToolCall("lookup", '{"term": "release"}')
    server = ChatServer(script=[500, lookup, lookup, "final"], model=MODEL)
    lookups: list[str] = []
    with serve_asgi(server) as url, using_session("s-1"):
        assert agent_run(url, lookups, stream) == "final"
    assert lookups == ["release", "release"]
    [diary] = harness.diaries()
    front = parse_front_matter(diary.content)
    assert (diary.task_id, diary.outcome, front["model"]) == ("s-1", "recovered", MODEL)
    assert front["tokens"] == 3 * CALL_TOKENS  # the failed call reported none
    assert "Made 2 tool call(s): lookup (2)." in diary.body
    assert (diary.agent, diary.title) == ("researcher", "What changed?")
    assert "2 failed call(s)" in error_section(diary), diary.body
    # that instrumentation records only a status description: it is the first error
    doing = "streaming" if stream else "getting"
    assert (f"First error: Error {doing} response: {{'error': 'Error code: 500 - status 500'}}"
            in error_section(diary))


def assert_counted_once(content: str) -> None:
    """What :func:`agent_run` must say when each model call is an LLM span of the Agents
    SDK over an LLM span of the client's, both reporting its tokens."""
    front = parse_front_matter(content)
    assert (front["outcome"], front["model"]) == ("recovered", MODEL)
    assert front["tokens"] == 3 * CALL_TOKENS, content  # not 6 (each call twice)
    # the failed model call is one failure in both spans, the failed tool call another
    assert "2 failed call(s)" in content, content
    assert ("Made 2 tool call(s): lookup (2). The call to the lookup tool that failed was "
            'given `{"term": "release"}`; the one that succeeded was given the same.') in content
    recovery = content.split("## How it was recovered\n", 1)[1].split("\n\n", 1)[0]
    assert recovery == ("A call to gpt-test failed; a later one succeeded. "
                        "A call to the lookup tool failed; a later one succeeded.")


@pytest.mark.usefixtures("instrumented_agents", "instrumented_openai")
def test_agents_sdk_over_an_instrumented_client_counts_each_call_once(
        harness: Harness) -> None:
    """With both instrumentations on (``opentelemetry-instrument`` loads every one
    installed), a model call is the Agents SDK's LLM span with the client's inside it,
    both with the call's tokens: the run counts them, and the failed call, once."""
    lookup = ToolCall("lookup", '{"term": "release"}')
    server = ChatServer(script=[500, lookup, lookup, "final"], model=MODEL)
    with serve_asgi(server) as url:
        assert agent_run(url, []) == "final"
    [diary] = harness.diaries()
    assert_counted_once(diary.content)


def test_agents_sdk_over_an_instrumented_client_through_serve_counts_each_call_once(
        tmp_path: Path) -> None:
    """The same run exported to a real ``otel-diary serve``: the LLM spans above others
    are found through the parent links of the spans between them."""
    server = Serve(tmp_path, env={"OTEL_DIARY_CONVENTIONS": "openinference"})
    provider = server.exporting_provider()
    instrumentors = (OpenAIAgentsInstrumentor(), OpenAIInstrumentor())
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=provider)
    lookup = ToolCall("lookup", '{"term": "release"}')
    try:
        with serve_asgi(ChatServer(script=[500, lookup, lookup, "final"],
                                   model=MODEL)) as url:
            assert agent_run(url, []) == "final"
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()
    assert provider.force_flush(30_000)
    provider.shutdown()
    server.wait_for_diaries(1)
    assert server.stop() == 0
    [path] = (tmp_path / "kb" / "diaries" / "agents").rglob("*.md")
    assert_counted_once(path.read_text())


@pytest.mark.usefixtures("instrumented_agents")
def test_a_failed_agents_sdk_run_writes_no_diary(harness: Harness) -> None:
    """A run whose model call fails past its retry raises in the app. That
    instrumentation ends the outer workflow span OK and only the agent's span in error:
    the agent run that ended last failed, so the task failed and writes nothing (it read
    as recovered)."""
    server = ChatServer(script=[500, 500], model=MODEL)
    with serve_asgi(server) as url, using_session("s-2"), \
            pytest.raises(openai.InternalServerError):
        agent_run(url, [])
    assert harness.diaries() == []


def guardrail_run(url: str) -> None:
    """An Agents SDK run an input guardrail stops: the app gets the tripwire's exception."""

    @agents.input_guardrail
    def refuse(context: object, agent: object, given: object) -> agents.GuardrailFunctionOutput:
        return agents.GuardrailFunctionOutput(output_info="no", tripwire_triggered=True)

    client = openai.AsyncOpenAI(base_url=url + "/v1", max_retries=0)
    agent = agents.Agent(
        name="researcher", input_guardrails=[refuse],
        model=agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=client))
    with pytest.raises(agents.InputGuardrailTripwireTriggered):
        agents.Runner.run_sync(agent, "What changed?")


@pytest.mark.usefixtures("instrumented_agents")
def test_an_agents_sdk_run_a_guardrail_stops_writes_no_diary(harness: Harness) -> None:
    """That instrumentation ends the agent's span and the workflow's OK and only the
    agent's turn in error: a run under the task failed and nothing went on after it, so
    the task failed (it read as recovered)."""
    with serve_asgi(ChatServer(script=["final"], model=MODEL)) as url:
        guardrail_run(url)
    assert harness.diaries() == []
    assert harness.processor.stats.failed_runs == 1


def test_an_agents_sdk_run_a_guardrail_stops_writes_no_diary_through_serve(
        tmp_path: Path) -> None:
    """The same run exported to a real ``otel-diary serve``."""
    server = Serve(tmp_path, env={"OTEL_DIARY_CONVENTIONS": "openinference"})
    provider = server.exporting_provider()
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with serve_asgi(ChatServer(script=["final"], model=MODEL)) as url:
            guardrail_run(url)
    finally:
        instrumentor.uninstrument()
    assert provider.force_flush(30_000)
    provider.shutdown()
    metrics = server.wait_for_runs(1, "otel_diary_task_runs_failed_total",
                                   "otel_diary_diaries_written_total")  # decided
    assert server.stop() == 0
    assert metrics.get("otel_diary_task_runs_failed_total") == 1, metrics
    assert not list((tmp_path / "kb").rglob("*.md"))


# -- openinference-instrumentation-langchain with LangGraph ------------------------------


def langgraph_run(url: str, lookups: list[str], question: str = "What changed?",
                  stream: bool = False) -> str:
    """A LangGraph ReAct agent with one tool that fails on its first call; the tool node
    hands the error to the model, which calls the tool again. With ``stream``, the model
    streams its answers (with their usage) and the app streams the graph's messages."""
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import ToolNode, create_react_agent

    @tool
    def lookup(term: str) -> str:
        """Look a term up."""
        lookups.append(term)
        if len(lookups) == 1:
            raise TimeoutError("lookup timed out")
        return f"notes about {term}"

    model = ChatOpenAI(model=MODEL, base_url=url + "/v1", max_retries=0, streaming=stream,
                       stream_usage=stream)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to langchain.agents
        graph = create_react_agent(model, ToolNode([lookup], handle_tool_errors=True),
                                   name="researcher")
    if stream:
        from langchain_core.messages import AIMessageChunk

        return "".join(str(message.content) for message, _ in graph.stream(
            {"messages": [("user", question)]}, stream_mode="messages")
            if isinstance(message, AIMessageChunk))
    result = graph.invoke({"messages": [("user", question)]})
    return str(result["messages"][-1].content)


def langgraph_script() -> ChatServer:
    lookup = ToolCall("lookup", '{"term": "release"}')
    return ChatServer(script=[lookup, lookup, "The release moved. Details follow."],
                      model=MODEL)


@pytest.fixture
def instrumented_langchain(harness: Harness) -> Iterator[None]:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=harness.provider)
    yield
    instrumentor.uninstrument()


def assert_langgraph_diary(diary: Diary) -> None:
    """What a LangGraph run with a failed-then-retried tool step must say."""
    front = parse_front_matter(diary.content)
    assert (diary.outcome, front["model"], front["tokens"]) == ("recovered", MODEL,
                                                                3 * CALL_TOKENS)
    assert diary.title == "What changed?"
    assert "Made 2 tool call(s): lookup (2)." in diary.body
    section = error_section(diary)
    assert "1 failed call(s) (TimeoutError)" in section
    assert "First error: TimeoutError: lookup timed out" in section
    assert ("## How it was recovered\nA call to the lookup tool failed; a later one "
            "succeeded.\n") in diary.body
    assert 'The final answer began: "The release moved."' in diary.body


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
@pytest.mark.usefixtures("instrumented_langchain")
def test_langgraph_run_is_one_recovered_diary(harness: Harness, stream: bool) -> None:
    """A LangGraph run (a CHAIN root over nested AGENT and CHAIN node spans) is one diary
    with the model, the summed tokens, the tool counts, recovered, naming the error; the
    same when the model and the graph stream."""
    lookups: list[str] = []
    with serve_asgi(langgraph_script()) as url:
        assert langgraph_run(url, lookups, stream=stream) == "The release moved. Details follow."
    assert lookups == ["release", "release"]
    [diary] = harness.diaries()
    assert_langgraph_diary(diary)


@pytest.mark.parametrize("harness", ["openinference", "auto"], indirect=True)
@pytest.mark.parametrize("node", ["polish", "agent"])
@pytest.mark.usefixtures("instrumented_langchain")
def test_a_langgraph_run_whose_last_node_got_past_a_failed_chain_is_recovered(
        harness: Harness, node: str) -> None:
    """A run whose last step catches a failed runnable (a CHAIN span in error that nothing
    follows) and keeps what it had is got past: the graph answered, so the run is
    recovered. OpenInference makes a node named ``agent`` an ``AGENT`` span: an agent's
    run that recorded its answer got past what failed under it."""
    from typing import TypedDict

    from langchain_core.runnables import RunnableLambda
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict, total=False):
        question: str
        answer: str

    def unavailable(text: str) -> str:
        raise ValueError("polisher unavailable")

    polisher = RunnableLambda(unavailable).with_config(run_name="polish")
    with serve_asgi(ChatServer(script=["draft"], model=MODEL)) as url:
        model = ChatOpenAI(model=MODEL, base_url=url + "/v1", max_retries=0)

        def answer(state: State) -> State:
            return {"answer": str(model.invoke(state["question"]).content)}

        def polish(state: State) -> State:
            try:
                return {"answer": polisher.invoke(state["answer"])}
            except ValueError:
                return {"answer": state["answer"]}  # keep the draft

        graph = StateGraph(State)
        graph.add_node("answer", answer)
        graph.add_node(node, polish)
        graph.add_edge(START, "answer")
        graph.add_edge("answer", node)
        graph.add_edge(node, END)
        assert graph.compile().invoke({"question": "What changed?"})["answer"] == "draft"
    [diary] = harness.diaries()
    assert diary.outcome == "recovered"
    assert "1 failed call(s)" in error_section(diary)


@pytest.mark.usefixtures("instrumented_langchain")
def test_a_langgraph_run_whose_input_holds_no_message_is_titled_by_its_first_question(
        harness: Harness) -> None:
    """A graph whose state is not messages (``{"question", "audience"}``) records it as
    the run's input and output: the diary's title is then the first user message the run
    captured, the question its model call was asked, not the graph's name, and its answer
    the model's last."""
    from typing import TypedDict

    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict, total=False):
        question: str
        audience: str
        answer: str

    with serve_asgi(ChatServer(script=["The release moved."], model=MODEL)) as url:
        model = ChatOpenAI(model=MODEL, base_url=url + "/v1", max_retries=0)

        def answer(state: State) -> State:
            return {"answer": str(model.invoke(state["question"]).content)}

        graph = StateGraph(State)
        graph.add_node("answer", answer)
        graph.add_edge(START, "answer")
        graph.add_edge("answer", END)
        graph.compile().invoke({"question": "What changed in the release?",
                                "audience": "support"})
    [diary] = harness.diaries()
    assert diary.title == "What changed in the release?"
    assert 'The final answer began: "The release moved."' in diary.body  # the model's


@pytest.mark.usefixtures("instrumented_langchain")
def test_a_chain_called_with_an_input_is_titled_by_it(harness: Harness) -> None:
    """A LangChain chain (a prompt template, then a model) called with ``{"input": …}``:
    the run's title is that input, which the template made into the model's question."""
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_openai import ChatOpenAI

    with serve_asgi(ChatServer(script=["The release moved."], model=MODEL)) as url:
        model = ChatOpenAI(model=MODEL, base_url=url + "/v1", max_retries=0)
        chain = ChatPromptTemplate.from_messages([("system", "Answer for support."),
                                                  ("user", "{input}")]) | model
        chain.invoke({"input": "What changed in the release?"})
    [diary] = harness.diaries()
    assert diary.title == "What changed in the release?"
    assert 'The final answer began: "The release moved."' in diary.body


@pytest.fixture
def genai_semconv(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenInference's own switch (read when an instrumentor is made) for GenAI attributes."""
    monkeypatch.setenv("OPENINFERENCE_ENABLE_GENAI_SEMCONV", "true")


@pytest.mark.parametrize("harness", ["auto"], indirect=True)
@pytest.mark.usefixtures("genai_semconv", "instrumented_langchain")
def test_langgraph_with_genai_semconv_under_auto_is_one_diary(harness: Harness) -> None:
    """With ``OPENINFERENCE_ENABLE_GENAI_SEMCONV`` the node spans also carry GenAI
    attributes (``invoke_agent``): under ``auto`` the root CHAIN is still the one run, the
    agent nodes inside it."""
    lookups: list[str] = []
    with serve_asgi(langgraph_script()) as url:
        langgraph_run(url, lookups)
    [diary] = harness.diaries()
    assert_langgraph_diary(diary)


@pytest.mark.parametrize("harness", ["auto"], indirect=True)
@pytest.mark.usefixtures("genai_semconv", "instrumented_agents")
def test_an_agents_sdk_run_a_guardrail_stops_with_genai_semconv_writes_no_diary(
        harness: Harness) -> None:
    """With GenAI attributes too, ``auto`` reads the agent's span as an ``invoke_agent``
    run and its turn as a step of it (a CHAIN): the agent's run got past nothing, so the
    task failed. (``genai`` alone does not know the turn for a step.)"""
    with serve_asgi(ChatServer(script=["final"], model=MODEL)) as url:
        guardrail_run(url)
    assert harness.diaries() == []
    assert harness.processor.stats.failed_runs == 1


@pytest.mark.parametrize("harness", ["genai"], indirect=True)
@pytest.mark.usefixtures("genai_semconv", "instrumented_agents")
def test_agents_sdk_with_genai_semconv_under_genai_is_one_diary(harness: Harness) -> None:
    """With ``OPENINFERENCE_ENABLE_GENAI_SEMCONV`` the Agents SDK's spans carry GenAI
    attributes, and the ``genai`` profile gives its run one recovered diary."""
    lookup = ToolCall("lookup", '{"term": "release"}')
    server = ChatServer(script=[lookup, lookup, "final"], model=MODEL)
    with serve_asgi(server) as url:
        assert agent_run(url, []) == "final"
    [diary] = harness.diaries()
    front = parse_front_matter(diary.content)
    assert (diary.outcome, front["model"], front["tokens"]) == ("recovered", MODEL,
                                                                3 * CALL_TOKENS)
    assert (diary.agent, diary.title) == ("researcher", "What changed?")
    assert "Made 2 tool call(s): lookup (2)." in diary.body


@pytest.mark.parametrize("profile", ["openinference", "auto"])
def test_langgraph_run_through_serve_is_one_recovered_diary(tmp_path: Path,
                                                            profile: str) -> None:
    """The same LangGraph run exported over OTLP to a real ``otel-diary serve``: one diary,
    the nested node spans followed up through the plain spans between them."""
    from openinference.instrumentation.langchain import LangChainInstrumentor

    server = Serve(tmp_path, env={"OTEL_DIARY_CONVENTIONS": profile})
    provider = server.exporting_provider()
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with serve_asgi(langgraph_script()) as url:
            langgraph_run(url, [])
    finally:
        instrumentor.uninstrument()
    assert provider.force_flush(30_000)
    provider.shutdown()
    server.wait_for_diaries(1)
    assert server.stop() == 0
    paths = list((tmp_path / "kb" / "diaries" / "agents").rglob("*.md"))
    assert len(paths) == 1
    content = paths[0].read_text()
    front = parse_front_matter(content)
    assert (front["outcome"], front["model"], front["tokens"]) == ("recovered", MODEL,
                                                                   3 * CALL_TOKENS)
    assert "Made 2 tool call(s): lookup (2)." in content
    assert "1 failed call(s) (TimeoutError)" in content
    assert "First error: TimeoutError: lookup timed out" in content
    assert ("## How it was recovered\nA call to the lookup tool failed; a later one "
            "succeeded.\n") in content
    assert front["title"] == "What changed?"  # the root CHAIN span's captured input
    assert 'The final answer began: "The release moved."' in content


# -- the README's snippets, run as written -----------------------------------------------


def readme_snippet(label: str, language: str = "python") -> str:
    """The ``language`` block after ``**<label>**`` in the README's "Agent frameworks"
    section."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Agent frameworks\n")
    section = readme[start:readme.index("\n## ", start + 1)]
    after = section[section.index(f"**{label}**"):]
    return after.split(f"```{language}\n", 1)[1].split("```", 1)[0]


@contextmanager
def readme_lines_run(label: str, tmp_path: Path,
                     monkeypatch: pytest.MonkeyPatch) -> Iterator[TracerProvider]:
    """An app's provider with the README's lines for ``label`` run on it as written
    (diaries enabled, to ``tmp_path``); afterwards the instrumentations are removed and the
    one diary the run gave is checked: the model, and the question as title."""
    import otel_diary

    monkeypatch.setenv("KB_DIARIES_ENABLED", "1")
    monkeypatch.setenv("OTEL_DIARY_DIR", str(tmp_path))
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}),
                              shutdown_on_exit=False)
    namespace: dict[str, object] = {"provider": provider, "otel_diary": otel_diary}
    exec(readme_snippet(label), namespace)  # the README's own lines
    instrumentors = [value for name, value in namespace.items()
                     if name.endswith("Instrumentor")]
    try:
        yield provider
    finally:
        for instrumentor in instrumentors:
            instrumentor().uninstrument()  # type: ignore[operator]
    assert provider.force_flush(10_000)
    provider.shutdown()
    paths = list((tmp_path / "diaries" / "agents").rglob("*.md"))
    assert len(paths) == 1, paths
    front = parse_front_matter(paths[0].read_text())
    assert (front["model"], front["title"]) == (MODEL, "What changed?")


@pytest.mark.parametrize("label", ["The OpenAI client", "The OpenAI Agents SDK", "LangGraph",
                                   "OpenInference with GenAI attributes"])
def test_readme_snippets_give_one_diary_per_run(label: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Each framework's README lines, run on an app's provider with diaries enabled, give
    one diary per run in the folder, with the model and the question as title."""
    if label == "OpenInference with GenAI attributes":
        monkeypatch.setenv("OPENINFERENCE_ENABLE_GENAI_SEMCONV", "true")
    with readme_lines_run(label, tmp_path, monkeypatch) as provider:
        harness = Harness.__new__(Harness)
        harness.provider = provider
        if label == "The OpenAI client":
            with serve_asgi(ChatServer(script=["draft", "final"], model=MODEL)) as url:
                run_agent(harness, openai.OpenAI(base_url=url + "/v1", max_retries=0), "c-1")
        elif label == "The OpenAI Agents SDK":
            lookup = ToolCall("lookup", '{"term": "release"}')
            with serve_asgi(ChatServer(script=[lookup, lookup, "final"], model=MODEL)) as url:
                agent_run(url, [])
        else:
            with serve_asgi(langgraph_script()) as url:
                langgraph_run(url, [])
