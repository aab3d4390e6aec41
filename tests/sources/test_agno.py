"""Agno with OpenInference's instrumentation (the `openinference` profile), against the local
OpenAI-compatible server: an agent's run is one diary, a team's too, a failed run none, and
``serve`` writes the same.

That instrumentation records an agent's (or a team's) ``run`` as an ``AGENT`` span named
after it, with the question and the answer as its input and output, and its model and
tool calls under it. A failed tool call's span names no error class (its status carries
the message alone). Agno installs into a folder of its own (``make`` puts it in
``<venv>/agno``): in the environment, its instrumentation's entry point would import it in
every ``opentelemetry-instrument`` run.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterator
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

DELEGATE = ToolCall("delegate_task_to_member",
                    json.dumps({"member_id": "builder", "task": QUESTION}))
"""The team leader's call handing the task to its builder."""


@pytest.fixture(scope="module", autouse=True)
def agno_on_path() -> Iterator[None]:
    yield from on_path("agno")


@pytest.fixture
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """The OpenInference harness (or another profile's), with Agno instrumented on its
    provider."""
    from openinference.instrumentation.agno import AgnoInstrumentor

    made = Harness(getattr(request, "param", "openinference"))
    AgnoInstrumentor().instrument(tracer_provider=made.provider)
    yield made
    AgnoInstrumentor().uninstrument()
    made.provider.shutdown()
    made.serve.check(made.sink.diaries)


def model(url: str) -> Any:
    """Agno's client of the local server at ``url``."""
    from agno.models.openai import OpenAIChat

    return OpenAIChat(id=MODEL, base_url=url + "/v1", api_key="test-key", max_retries=0)


def run_agent(script: list[str | int | ToolCall], question: str = QUESTION) -> Any:
    """What an Agno agent with a ``build`` tool answers ``question`` with (its run's
    output), its model a local server answering ``script``."""
    from agno.agent import Agent

    with serve_asgi(ChatServer(script=script, model=MODEL)) as url:
        return Agent(name="builder", model=model(url), tools=[build]).run(question)


@pytest.mark.parametrize("harness", ["openinference", "auto"], indirect=True)
def test_an_agent_that_got_past_a_failed_tool_is_recovered(harness: Harness) -> None:
    """An agent whose build failed on the first target and built the next is one
    recovered diary, by its name, titled by its question, with every model call's tokens,
    the tool's error (its message: the span names no class), what each call was given,
    and the answer."""
    assert run_agent(SCRIPT).content == ANSWER
    [diary] = harness.diaries()
    assert_recovered(diary, error="TS2345: Argument of type 'string' is not assignable")


def test_a_team_is_one_diary_by_its_name(harness: Harness) -> None:
    """A team whose leader delegated to its builder (whose build failed once), then
    answered, is one recovered diary of the whole run, by the team, with every call's
    tokens and the leader's answer. That instrumentation leaves a team's run span current
    after it ended, so every later run in the same thread would be part of it, and write
    nothing: run in a context of its own, as the README says, the next run writes its
    diary."""
    from agno.agent import Agent
    from agno.team import Team

    with serve_asgi(ChatServer(script=[DELEGATE, *SCRIPT, "Done: fixed."],
                               model=MODEL)) as url:
        team = Team(name="fixers", model=model(url),
                    members=[Agent(name="builder", model=model(url), tools=[build])])
        ran = contextvars.copy_context().run(team.run, QUESTION)
        assert ran.content == "Done: fixed."
    [diary] = harness.diaries()
    assert (diary.agent, diary.outcome, diary.title) == ("fixers", "recovered", QUESTION)
    assert parse_front_matter(diary.content)["tokens"] == 5 * CALL_TOKENS
    assert "Made 3 tool call(s): build (2), delegate_task_to_member (1)." in diary.content
    assert 'The final answer began: "Done: fixed."' in diary.content
    assert run_agent([ANSWER]).content == ANSWER
    assert [diary.agent for diary in harness.diaries()] == ["fixers", "builder"]


def test_a_run_that_failed_writes_nothing_and_the_next_run_its_diary(
        harness: Harness) -> None:
    """A run whose model answered 500 ends in error (Agno returns it, raising nothing) and
    writes nothing; the next run writes its own diary."""
    assert run_agent([500]).status.value == "ERROR"
    assert harness.diaries() == []
    assert run_agent([ANSWER]).content == ANSWER
    [diary] = harness.diaries()
    assert (diary.agent, diary.outcome, diary.title) == ("builder", "completed", QUESTION)


def test_the_readme_lines_give_one_diary_per_run(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's Agno lines, run as written on an app's provider with diaries enabled,
    give one diary per run in the folder, titled by the question."""
    with readme_lines_run("Agno", tmp_path, monkeypatch):
        run_agent(["Nothing changed."], "What changed?")
