"""smolagents with OpenInference's instrumentation (the `openinference` profile), against
the local OpenAI-compatible server: a run is one diary, titled by its task, and ``serve``
writes the same.

smolagents installs into a folder of its own (``make`` puts it in ``<venv>/smolagents``):
in the environment, its instrumentation's entry point would import smolagents in every
``opentelemetry-instrument`` run.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from otel_diary import DiarySpanProcessor
from otel_diary.pipeline.render import parse_front_matter
from otel_diary.testing import InMemorySink
from tests.sources.test_openinference import Harness, readme_lines_run
from tests.support.apart import on_path
from tests.support.build_run import ANSWER, CALL_TOKENS, MODEL, QUESTION, build
from tests.support.loopback import ChatServer, ToolCall, serve_asgi
from tests.support.serve_path import SameInServe


@pytest.fixture(scope="module", autouse=True)
def smolagents_on_path() -> Iterator[None]:
    yield from on_path("smolagents")


@pytest.fixture
def harness() -> Iterator[Harness]:
    """The OpenInference harness, with smolagents instrumented on its provider."""
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    made = Harness()
    SmolagentsInstrumentor().instrument(tracer_provider=made.provider)
    yield made
    SmolagentsInstrumentor().uninstrument()
    made.provider.shutdown()
    made.serve.check(made.sink.diaries)


def run_agent(script: list[str | int | ToolCall], task: str = QUESTION) -> Any:
    """What a smolagents tool-calling agent with a ``build`` tool answers ``task`` with,
    its model a local server answering ``script``."""
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    @tool  # type: ignore[untyped-decorator]  # (installed apart: no types)
    def build_tool(target: str) -> str:
        """Build a target.

        Args:
            target: What to build.
        """
        return build(target)

    build_tool.name = "build"
    with serve_asgi(ChatServer(script=script, model=MODEL)) as url:
        model = OpenAIServerModel(model_id=MODEL, api_base=url + "/v1", api_key="test-key")
        agent = ToolCallingAgent(tools=[build_tool], model=model, name="builder",
                                 verbosity_level=0, max_steps=4)
        return agent.run(task)


def test_an_agent_that_got_past_a_failed_tool_is_recovered(harness: Harness) -> None:
    """A tool-calling agent whose build failed on the first target and built the next is
    one recovered diary: titled by its task (the run's arguments hold no message), with
    every model call's tokens, the tool's error, what each call was given, and the answer."""
    answer = ToolCall("final_answer", f'{{"answer": "{ANSWER}"}}')
    assert run_agent([ToolCall("build", '{"target": "orders"}'),
                      ToolCall("build", '{"target": "orders-fixed"}'), answer]) == ANSWER
    [diary] = harness.diaries()
    front = parse_front_matter(diary.content)
    assert (diary.outcome, diary.title) == ("recovered", QUESTION)
    assert (front["model"], front["tokens"]) == (MODEL, 3 * CALL_TOKENS)
    assert "Made 3 tool call(s): build (2), final_answer (1)." in diary.content
    assert ('The call to the build tool that failed was given `{"target": "orders"}`; the '
            'one that succeeded, `{"target": "orders-fixed"}`.') in diary.content
    assert "First error: RuntimeError: TS2345" in diary.content
    assert "A call to the build tool failed; a later one succeeded." in diary.content
    assert f'The final answer began: "{ANSWER}"' in diary.content


def test_without_a_service_name_the_agent_names_the_diary() -> None:
    """With no service name (the SDK's stand-in ``unknown_service``), the run's span name
    names the agent: ``builder``, not ``builder.run``; ``serve`` agrees."""
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    sink = InMemorySink()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(DiarySpanProcessor(enabled=True, sinks=[sink],
                                                   conventions="openinference"))
    serve = SameInServe(provider, "openinference")
    SmolagentsInstrumentor().instrument(tracer_provider=provider)
    try:
        run_agent([ToolCall("final_answer", f'{{"answer": "{ANSWER}"}}')])
    finally:
        SmolagentsInstrumentor().uninstrument()
    provider.shutdown()
    [diary] = sink.diaries
    assert (diary.agent, diary.title) == ("builder", QUESTION)
    assert diary.path.startswith("diaries/agents/builder/")
    serve.check(sink.diaries)


def test_a_run_that_raised_writes_nothing_and_the_next_run_its_diary(
        harness: Harness) -> None:
    """A run whose model answered 500 each time raises and writes nothing. That
    instrumentation leaves the span of a run that raised open and current, so every later
    run in the same thread would be part of it, and write nothing: run in a context of
    its own each, as the README says, the next run writes its diary."""
    from smolagents.utils import AgentGenerationError

    with pytest.raises(AgentGenerationError):
        contextvars.copy_context().run(run_agent, [500] * 4)
    assert harness.diaries() == []
    contextvars.copy_context().run(
        run_agent, [ToolCall("final_answer", f'{{"answer": "{ANSWER}"}}')])
    [diary] = harness.diaries()
    assert (diary.outcome, diary.title) == ("completed", QUESTION)


def test_the_readme_lines_give_one_diary_per_run(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's smolagents lines, run as written on an app's provider with diaries
    enabled, give one diary per run in the folder, titled by the task."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with readme_lines_run("smolagents", tmp_path, monkeypatch):
        run_agent([ToolCall("final_answer", '{"answer": "Nothing changed."}')],
                  "What changed?")
