"""The `genai` profile with traceloop's OpenLLMetry instrumentations (``openai`` and
``openai-agents``), against an OpenAI-compatible server on 127.0.0.1.

They install into a folder of their own (``make`` puts them in ``<venv>/traceloop``): in
the virtual environment their ``openai`` entry point would instrument the client a second
time in every ``opentelemetry-instrument`` run next to ``opentelemetry-instrumentation-openai-v2``.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import agents
import openai
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from otel_diary import Diary, DiarySpanProcessor
from otel_diary.pipeline.render import parse_front_matter
from otel_diary.testing import InMemorySink
from tests.sources.test_openinference import (
    agent_run,
    error_section,
    handoff_run,
    handoff_script,
    readme_lines_run,
    readme_snippet,
)
from tests.support.apart import folder, on_path
from tests.support.apps import genai_agent
from tests.support.build_run import CALL_TOKENS, MODEL
from tests.support.loopback import ChatServer, ToolCall, serve_asgi
from tests.support.serve_path import SameInServe
from tests.support.zero_code import run_agent_app


@pytest.fixture(scope="module", autouse=True)
def traceloop_on_path() -> Iterator[None]:
    yield from on_path("traceloop")


def client_methods() -> dict[tuple[type, str], Any]:
    """Every method of the OpenAI client's resource classes, by class and name."""
    import openai.resources

    for found in pkgutil.walk_packages(openai.resources.__path__, "openai.resources."):
        importlib.import_module(found.name)
    return {(cls, name): method
            for module_name, module in list(sys.modules.items())
            if module_name.startswith("openai.resources.")
            for cls in vars(module).values()
            if isinstance(cls, type) and cls.__module__ == module_name
            for name, method in vars(cls).items() if callable(method)}


@pytest.fixture(autouse=True)
def client_unwrapped() -> Iterator[None]:
    """traceloop's ``uninstrument`` leaves the client wrapped: its ``unwrap`` calls pass a
    module's path where this ``opentelemetry-instrumentation`` takes a class's, so none
    unwraps anything. The methods it wrapped are put back after each test; the tests after
    it in the same process would otherwise see each call two more times."""
    before = client_methods()
    yield
    for (cls, name), method in before.items():
        if vars(cls).get(name) is not method:
            setattr(cls, name, method)
    assert client_methods() == before


@pytest.fixture(autouse=True)
def dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """No real key and no real endpoint: every client here is given the local server."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


class Harness:
    """A provider whose diary processor uses the `genai` profile (or ``profile``); after
    each test, ``serve`` must write the same diaries from the spans it ended."""

    def __init__(self, profile: str = "genai") -> None:
        self.sink = InMemorySink()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "svc"}),
                                       shutdown_on_exit=False)
        self.provider.add_span_processor(
            DiarySpanProcessor(enabled=True, sinks=[self.sink], conventions=profile))
        self.serve = SameInServe(self.provider, profile)

    def diaries(self) -> list[Diary]:
        assert self.provider.force_flush(10_000)
        return self.sink.diaries


@pytest.fixture
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    made = Harness(getattr(request, "param", "genai"))
    yield made
    made.provider.shutdown()
    made.serve.check(made.sink.diaries)


def instrumented(instrumentor: Any, harness: Harness) -> Iterator[None]:
    instrumentor.instrument(tracer_provider=harness.provider)
    yield
    instrumentor.uninstrument()


@pytest.fixture
def instrumented_openai(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor  # type: ignore[import-not-found]

    monkeypatch.setattr(genai_agent, "tracer", harness.provider.get_tracer("example-agent"))
    yield from instrumented(OpenAIInstrumentor(), harness)


@pytest.mark.usefixtures("instrumented_openai")
def test_openai_client_runs_give_one_diary_each(harness: Harness) -> None:
    """The app's own ``invoke_agent`` spans over traceloop's ``chat`` spans: one diary per
    conversation with the model, the summed tokens and the tool; the run whose first model
    call failed (and was retried) is recovered, naming the client's error."""
    with serve_asgi(ChatServer(script=[500, "Draft.", "Done."], model=MODEL)) as url:
        client = openai.OpenAI(base_url=url + "/v1", max_retries=0)
        genai_agent.run_agent(client, "conv-1", "What changed in the release?")
        genai_agent.run_agent(client, "conv-2", "Summarize the incident.")
    diaries = {d.task_id: d for d in harness.diaries()}
    assert sorted(diaries) == ["conv-1", "conv-2"]
    for diary in diaries.values():
        front = parse_front_matter(diary.content)
        assert (front["model"], front["tokens"]) == (MODEL, 2 * CALL_TOKENS)
        assert diary.agent == "researcher"
        assert "Made 1 tool call(s): lookup (1)." in diary.body
    assert (diaries["conv-1"].outcome, diaries["conv-2"].outcome) == ("recovered", "completed")
    assert "1 failed call(s) (InternalServerError)" in error_section(diaries["conv-1"])
    assert diaries["conv-1"].title == "What changed in the release?"


@pytest.fixture
def instrumented_agents(harness: Harness) -> Iterator[None]:
    from opentelemetry.instrumentation.openai_agents import (  # type: ignore[import-not-found]
        OpenAIAgentsInstrumentor,
    )

    # The line the README gives: the SDK's own exporter (to api.openai.com) is replaced.
    yield from instrumented(OpenAIAgentsInstrumentor(replace_existing_processors=True),
                            harness)


@pytest.mark.usefixtures("instrumented_agents")
def test_agents_sdk_run_is_one_recovered_diary(harness: Harness) -> None:
    """An Agents SDK run with a failed model call retried and a failed tool call repeated
    is one diary: the agent, the model, the question, two tool calls, recovered."""
    processors = agents.tracing.get_trace_provider()._multi_processor._processors  # type: ignore[attr-defined]
    assert [type(p).__name__ for p in processors] == ["OpenTelemetryTracingProcessor"]
    lookup = ToolCall("lookup", '{"term": "release"}')
    server = ChatServer(script=[500, lookup, lookup, "final"], model=MODEL)
    with serve_asgi(server) as url:
        assert agent_run(url, []) == "final"
    [diary] = harness.diaries()
    front = parse_front_matter(diary.content)
    assert (diary.agent, diary.outcome, front["model"]) == ("researcher", "recovered", MODEL)
    assert diary.title == "What changed?"  # the first user message it captured
    assert "Made 2 tool call(s): lookup (2)." in diary.body
    assert "2 failed call(s)" in error_section(diary)
    # that instrumentation records no usage for a Chat Completions model: no tokens, not 0
    assert "tokens" not in front and "Tokens:" not in diary.body


@pytest.mark.parametrize("harness", ["auto"], indirect=True)
@pytest.mark.usefixtures("instrumented_agents")
def test_a_handoff_under_auto_is_one_diary(harness: Harness) -> None:
    """That instrumentation puts the agents of a run under a workflow span of its own
    (``traceloop.span.kind: workflow``), with no GenAI operation: ``auto`` takes it for the
    run, so a handoff is one diary, by the agent that ran first (``genai`` gives one per
    agent)."""
    with serve_asgi(handoff_script()) as url:
        assert handoff_run(url) == "The release moved."
    [diary] = harness.diaries()
    front = parse_front_matter(diary.content)
    assert (diary.agent, diary.outcome, front["model"]) == ("triage", "completed", MODEL)
    assert diary.title == "What changed?"  # the first user message it captured


@pytest.mark.parametrize("label", ["traceloop's OpenLLMetry",
                                   "traceloop with the OpenAI Agents SDK"])
def test_readme_snippets_give_one_diary_per_run(label: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's traceloop lines, run as written on an app's provider with diaries
    enabled, give one diary per run in the folder, with the model and the question."""
    with readme_lines_run(label, tmp_path, monkeypatch) as provider:
        if label == "traceloop's OpenLLMetry":
            monkeypatch.setattr(genai_agent, "tracer", provider.get_tracer("example-agent"))
            with serve_asgi(ChatServer(script=["draft", "final"], model=MODEL)) as url:
                genai_agent.run_agent(openai.OpenAI(base_url=url + "/v1", max_retries=0),
                                      "c-1", "What changed?")
        else:
            lookup = ToolCall("lookup", '{"term": "release"}')
            with serve_asgi(ChatServer(script=[lookup, lookup, "final"], model=MODEL)) as url:
                agent_run(url, [])


@pytest.mark.slow  # runs an app under opentelemetry-instrument, and serve
def test_a_langgraph_run_is_one_recovered_diary(tmp_path: Path) -> None:
    """A LangGraph agent instrumented with traceloop's LangChain instrumentation, as the
    README's lines do (in an app of its own: that instrumentation leaves its patches in
    when it is uninstrumented), is one recovered diary under ``auto``: by the graph's
    name, with every call's tokens, the tool's error, and what each call to the tool was
    given (the tool's input, not the callback's tags and metadata around it)."""
    snippet = readme_snippet("traceloop with LangGraph")
    assert 'conventions="auto"' in snippet and "LangchainInstrumentor()" in snippet
    lookup = ToolCall("lookup", '{"term": "release"}')
    found = run_agent_app(
        "traceloop_langgraph.py",
        "KB_DIARIES_ENABLED=1 OTEL_DIARY_CONVENTIONS=auto opentelemetry-instrument python agent.py",
        [lookup, lookup, "The release moved."], MODEL, tmp_path,
        PYTHONPATH=str(folder("traceloop")),
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="openai,openai_agents,langchain")
    [front] = found.values()
    assert (front["agent"], front["outcome"], front["title"]) == (
        "researcher", "recovered", "What changed in the release?")
    assert (front["model"], front["tokens"]) == (MODEL, 3 * CALL_TOKENS)
    body = str(front["body"])
    assert "1 failed call(s) (TimeoutError)\nFirst error: TimeoutError: lookup timed out" in body
    assert ('Made 2 tool call(s): lookup (2). The call to the lookup tool that failed was '
            'given `{"term": "release"}`; the one that succeeded was given the same.') in body
    assert 'The final answer began: "The release moved."' in body
