"""Microsoft Agent Framework's own OpenTelemetry spans (GenAI conventions) against the
local OpenAI-compatible server: an agent's run is one diary under `genai` and `auto`, and a
workflow of agents (its ``workflow.run`` span has no GenAI operation) one diary under
`auto`; ``serve`` writes the same.

The framework traces to the global tracer provider, which a process sets once: each test
here gives the framework its harness's provider instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, WorkflowBuilder, observability, tool
from agent_framework.openai import OpenAIChatCompletionClient

from otel_diary.pipeline.render import parse_front_matter
from tests.sources.test_genai import GenAIHarness
from tests.sources.test_openinference import readme_snippet
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
from tests.support.zero_code import run_agent_app

PLAN = "Plan: fix the types."


class Harness(GenAIHarness):
    """The `genai` harness (or ``profile``'s), with the framework's clients."""

    @contextmanager
    def clients(self, script: list[str | int | ToolCall]) -> \
            Iterator[Callable[[], OpenAIChatCompletionClient]]:
        """Makes chat clients of a local server answering ``script`` (in request order,
        whichever agent asks)."""
        with serve_asgi(ChatServer(script=script, model=MODEL)) as url:
            yield lambda: OpenAIChatCompletionClient(model=MODEL, base_url=url + "/v1",
                                                     api_key="test-key")


@pytest.fixture
def harness(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    made = Harness(getattr(request, "param", "auto"))
    monkeypatch.setattr(observability, "get_tracer",
                        lambda *args, **kwargs: made.provider.get_tracer("agent_framework"))
    # What ENABLE_SENSITIVE_DATA=true gives: the messages on the spans.
    monkeypatch.setattr(observability.OBSERVABILITY_SETTINGS, "enable_sensitive_data", True)
    yield made
    made.provider.shutdown()
    made.serve.check(made.sink.diaries)


async def answer(agent: Agent, question: str) -> str:
    return (await agent.run(question)).text


def workflow(client: Callable[[], OpenAIChatCompletionClient], name: str | None = None) -> Any:
    """A planner agent, then a fixer agent (``name``: the workflow's, else its own)."""
    planner = Agent(client=client(), name="planner", instructions="Plan the change.")
    fixer = Agent(client=client(), name="fixer", instructions="Make the change.")
    return WorkflowBuilder(start_executor=planner, name=name).add_edge(planner, fixer).build()


@pytest.mark.parametrize("harness", ["genai", "auto"], indirect=True)
def test_an_agent_that_got_past_a_failed_tool_is_recovered(harness: Harness) -> None:
    """An agent whose tool raised, then succeeded when the model called it again, is one
    recovered diary: titled by the question, with each call's tokens once (the agent span
    also carries their sum), the tool's error and the answer."""
    with harness.clients(SCRIPT) as client:
        agent = Agent(client=client(), name="builder", tools=[tool(build)])
        assert asyncio.run(answer(agent, QUESTION)) == ANSWER
    [diary] = harness.diaries()
    assert_recovered(diary)


def test_a_workflow_of_agents_is_one_diary(harness: Harness) -> None:
    """A workflow running one agent after the other is one diary under `auto` (not one per
    agent): by the agent that ran first, of the workflow's name, titled by the task, with
    both agents' calls and the last one's answer."""
    with harness.clients([PLAN, ANSWER]) as client:
        outputs = asyncio.run(workflow(client, name="orders-fix").run(QUESTION)).get_outputs()
    assert [output.text for output in outputs] == [PLAN, ANSWER]
    [diary] = harness.diaries()
    front = parse_front_matter(diary.content)
    assert (diary.agent, diary.outcome, diary.title) == ("planner", "completed", QUESTION)
    assert front["workflow"] == "orders-fix" and "workflow:orders-fix" in front["tags"]
    assert (front["model"], front["tokens"]) == (MODEL, 2 * CALL_TOKENS)
    assert f'The final answer began: "{ANSWER}"' in diary.content


def test_a_workflow_whose_last_agent_failed_writes_nothing(harness: Harness) -> None:
    """A workflow whose second agent failed (its model answered 400) failed: no diary, not
    even of the first agent, which ended OK."""
    with harness.clients([PLAN, 400]) as client, pytest.raises(Exception, match="400"):
        asyncio.run(workflow(client).run(QUESTION))
    assert harness.diaries() == []


@pytest.mark.slow
def test_the_readme_line_gives_one_diary_per_run(tmp_path: Path) -> None:
    """The README's line, run as written on an unmodified app (a workflow of two agents),
    gives one diary in the folder, titled by the task, with every call's tokens."""
    found = run_agent_app("agent_framework_flow.py",
                          readme_snippet("Microsoft Agent Framework", "sh").strip(),
                          [PLAN, ANSWER], MODEL, tmp_path)
    [front] = found.values()
    assert (front["agent"], front["outcome"], front["title"]) == ("planner", "completed",
                                                                  QUESTION)
    assert front["tokens"] == 2 * CALL_TOKENS
