"""LlamaIndex agents with OpenInference's instrumentation (the `openinference` profile),
against the local OpenAI-compatible server: a run is one diary, titled by what it was
asked and answered as the model answered, and ``serve`` writes the same.

That instrumentation records an agent's run and its steps as ``CHAIN`` spans whose input
is the workflow's state and whose output is a Python repr (``StopEvent(result=…)``): the
question and the answer are only in the model calls' flattened messages
(``llm.input_messages.<i>.message.*``). LlamaIndex installs into a folder of its own
(``make`` puts it in ``<venv>/llamaindex``): in the environment, its instrumentation's
entry point would import it in every ``opentelemetry-instrument`` run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from otel_diary.pipeline.render import parse_front_matter
from tests.sources.test_openinference import Harness, readme_lines_run
from tests.support.apart import on_path
from tests.support.build_run import (
    ANSWER,
    CALL_TOKENS,
    MODEL,
    QUESTION,
    SCRIPT,
    assert_recovered,
    build,
)
from tests.support.loopback import ChatServer, ToolCall, serve_asgi

# That instrumentation reads LlamaIndex's events' attributes through deprecated Pydantic
# accessors (inspect.getmembers, .json()): hundreds of warnings of its own per run.
pytestmark = pytest.mark.filterwarnings(
    "ignore::pydantic.warnings.PydanticDeprecatedSince20",
    "ignore::pydantic.warnings.PydanticDeprecatedSince211")


@pytest.fixture(scope="module", autouse=True)
def llamaindex_on_path() -> Iterator[None]:
    yield from on_path("llamaindex")


@pytest.fixture
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """The OpenInference harness (or another profile's), with LlamaIndex instrumented on
    its provider."""
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    made = Harness(getattr(request, "param", "openinference"))
    LlamaIndexInstrumentor().instrument(tracer_provider=made.provider)
    yield made
    LlamaIndexInstrumentor().uninstrument()
    made.provider.shutdown()
    made.serve.check(made.sink.diaries)


def local_model(url: str, usage: Mapping[str, object] | None = None) -> Any:
    """LlamaIndex's client of the local server at ``url`` (``usage``: its
    ``additional_kwargs``)."""
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(model=MODEL, api_base=url + "/v1", api_key="test-key",
                      is_chat_model=True, is_function_calling_model=True, max_retries=0,
                      additional_kwargs=dict(usage or {}))


def answer(agent: Any, question: str = QUESTION) -> str:
    """What an agent or workflow answers ``question`` with (its ``run`` needs a loop)."""
    async def run() -> str:
        return str(await agent.run(user_msg=question))

    return asyncio.run(run())


def build_tool() -> Any:
    """The ``build`` tool, as LlamaIndex calls it."""
    from llama_index.core.tools import FunctionTool

    return FunctionTool.from_defaults(build, name="build")


def run_agent(script: list[str | int | ToolCall], question: str = QUESTION, *,
              streaming: bool = False, usage: Mapping[str, object] | None = None) -> str:
    """What a LlamaIndex ``FunctionAgent`` with a ``build`` tool answers ``question``
    with, its model a local server answering ``script``."""
    from llama_index.core.agent.workflow import FunctionAgent

    with serve_asgi(ChatServer(script=script, model=MODEL)) as url:
        return answer(FunctionAgent(name="builder", system_prompt="You build the app.",
                                    streaming=streaming, tools=[build_tool()],
                                    llm=local_model(url, usage)), question)


@pytest.mark.parametrize("harness", ["openinference", "auto"], indirect=True)
def test_an_agent_that_got_past_a_failed_tool_is_recovered(harness: Harness) -> None:
    """A function agent whose build failed on the first target and built the next is one
    recovered diary, titled by its question and answered as its model answered (its own
    spans hold a workflow's state and reprs), with every model call's tokens, the tool's
    error and what each call was given (its arguments, out of the call's record)."""
    assert run_agent(SCRIPT) == ANSWER
    [diary] = harness.diaries()
    assert_recovered(diary, "svc")  # what the calls were given, out of {"kwargs": …}
    assert "StopEvent" not in diary.content and "ChatMessage" not in diary.content


def test_a_workflow_that_handed_off_is_one_diary(harness: Harness) -> None:
    """An ``AgentWorkflow`` whose planner handed off to a builder, whose build failed
    once, is one recovered diary of the whole run, titled by its question."""
    from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent

    handoff = ToolCall("handoff", '{"to_agent": "builder", "reason": "a build"}')
    with serve_asgi(ChatServer(script=[handoff, *SCRIPT], model=MODEL)) as url:
        llm = local_model(url)
        workflow = AgentWorkflow(root_agent="planner", agents=[
            FunctionAgent(name="planner", description="Plans.", system_prompt="Plan.",
                          llm=llm, can_handoff_to=["builder"], streaming=False),
            FunctionAgent(name="builder", description="Builds.", system_prompt="Build.",
                          llm=llm, tools=[build_tool()], streaming=False)])
        assert answer(workflow) == ANSWER
    [diary] = harness.diaries()
    assert (diary.outcome, diary.title) == ("recovered", QUESTION)
    assert parse_front_matter(diary.content)["tokens"] == 4 * CALL_TOKENS
    assert "Made 3 tool call(s): build (2), handoff (1)." in diary.content
    assert f'The final answer began: "{ANSWER}"' in diary.content


@pytest.mark.parametrize("usage", [{}, {"stream_options": {"include_usage": True}}])
def test_a_streamed_run_is_titled_and_answered_the_same(harness: Harness,
                                                        usage: dict[str, object]) -> None:
    """Streaming (the agent's default) records the same messages on the model calls: the
    same title and answer. Its tokens are counted when the model asks for usage in the
    stream, as the README says."""
    assert run_agent([ANSWER], streaming=True, usage=usage) == ANSWER
    [diary] = harness.diaries()
    assert (diary.outcome, diary.title) == ("completed", QUESTION)
    assert f'The final answer began: "{ANSWER}"' in diary.content
    tokens = parse_front_matter(diary.content).get("tokens")
    assert tokens == (CALL_TOKENS if usage else None)


def test_a_run_that_raised_writes_nothing_and_the_next_run_its_diary(
        harness: Harness) -> None:
    """A run whose model answered 500 raises and writes nothing; the next run in the same
    thread writes its own diary."""
    with pytest.raises(Exception, match="500"):
        run_agent([500])
    assert harness.diaries() == []
    assert run_agent([ANSWER]) == ANSWER
    [diary] = harness.diaries()
    assert (diary.outcome, diary.title) == ("completed", QUESTION)


def test_the_readme_lines_give_one_diary_per_run(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's LlamaIndex lines, run as written on an app's provider with diaries
    enabled, give one diary per run in the folder, titled by the question."""
    with readme_lines_run("LlamaIndex", tmp_path, monkeypatch):
        run_agent(["Nothing changed."], "What changed?")
