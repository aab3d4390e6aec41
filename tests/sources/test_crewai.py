"""CrewAI with OpenInference's instrumentation (the `openinference` profile), its model
calls traced by OpenInference's OpenAI instrumentation, against the local
OpenAI-compatible server: a crew's run is one diary, titled by its first task and
answered as its last agent answered, and ``serve`` writes the same.

That instrumentation records a crew's ``kickoff`` as a ``CHAIN`` span whose input is the
crew's inputs and whose output is the crew's output (``{"raw": …, "tasks_output":
[{"description": …, "messages": […]}, …]}``); each task is an ``AGENT`` span under it. The
model calls are the OpenAI client's. CrewAI installs into a folder of its own (``make``
puts it in ``<venv>/crewai``): in the environment, its instrumentation's entry point would
import it (and chromadb) in every ``opentelemetry-instrument`` run.
"""

from __future__ import annotations

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

# CrewAI reads its own deprecated fields (``function_calling_llm`` and others) on every run.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:crewai")

TEMPLATE = "Fix the types in the {service} api"
"""The task's description as written, filled in from the crew's inputs."""


@pytest.fixture(scope="module", autouse=True)
def crewai_on_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """CrewAI on the path, with its own telemetry and tracing off (they would send to
    crewai.com) and its files (a database of the last run's outputs, a key) in a
    folder of the test's, not the user's home."""
    home = tmp_path_factory.mktemp("crewai-home")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CREWAI_DISABLE_TELEMETRY", "true")
        env.setenv("CREWAI_TRACING_ENABLED", "false")
        env.setenv("HOME", str(home))
        env.setenv("XDG_DATA_HOME", str(home / "share"))
        yield from on_path("crewai")


@pytest.fixture
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """The OpenInference harness (or another profile's), with CrewAI and the OpenAI client
    instrumented on its provider."""
    from openinference.instrumentation.crewai import CrewAIInstrumentor
    from openinference.instrumentation.openai import OpenAIInstrumentor

    made = Harness(getattr(request, "param", "openinference"))
    CrewAIInstrumentor().instrument(tracer_provider=made.provider)
    OpenAIInstrumentor().instrument(tracer_provider=made.provider)
    yield made
    OpenAIInstrumentor().uninstrument()
    CrewAIInstrumentor().uninstrument()
    made.provider.shutdown()
    made.serve.check(made.sink.diaries)


def agent(url: str, role: str = "builder") -> Any:
    """A CrewAI agent with the ``build`` tool, its model the local server at ``url``."""
    from crewai import LLM, Agent
    from crewai.tools import tool

    return Agent(role=role, goal="Build the app", backstory="You build.", verbose=False,
                 llm=LLM(model="openai/" + MODEL, base_url=url + "/v1", api_key="test-key",
                         max_retries=0),
                 tools=[tool("build")(build)])


def kickoff(tasks: list[tuple[str, Any]], **named: str) -> str:
    """What a crew of the tasks (each a description and its agent, run in order) answers,
    with ``orders`` as its ``service`` input."""
    from crewai import Crew, Task

    crew = Crew(agents=list({id(doer): doer for _, doer in tasks}.values()),
                tasks=[Task(description=description, expected_output="What changed.",
                            agent=doer) for description, doer in tasks],
                verbose=False, **named)
    return str(crew.kickoff(inputs={"service": "orders"}))


def run_crew(script: list[str | int | ToolCall], description: str = TEMPLATE) -> str:
    """What a crew of one builder answers its task with, its model answering ``script``."""
    with serve_asgi(ChatServer(script=script, model=MODEL)) as url:
        return kickoff([(description, agent(url))])


@pytest.mark.parametrize("harness", ["openinference", "auto"], indirect=True)
def test_a_crew_that_got_past_a_failed_tool_is_recovered(harness: Harness) -> None:
    """A crew whose builder's build failed on the first target and built the next is one
    recovered diary, titled by its task as the crew's inputs filled it in (not the span's
    name, nor CrewAI's prompt around the task), with every model call's tokens, the tool's
    error and what each call was given."""
    assert run_crew(SCRIPT) == ANSWER
    [diary] = harness.diaries()
    assert_recovered(diary, "svc")
    assert "Current Task" not in diary.content and "{service}" not in diary.content


def test_a_crew_of_two_agents_is_one_diary_titled_by_its_first_task(
        harness: Harness) -> None:
    """A crew whose planner planned, then whose builder built (failing once), is one
    recovered diary of the whole run, titled by its first task, answered as its last."""
    with serve_asgi(ChatServer(script=["Build orders, then orders-fixed.", *SCRIPT],
                               model=MODEL)) as url:
        answered = kickoff([("Plan the fix of the {service} api", agent(url, "planner")),
                            (TEMPLATE, agent(url))])
    assert answered == ANSWER
    [diary] = harness.diaries()
    assert (diary.outcome, diary.title) == ("recovered", "Plan the fix of the orders api")
    assert parse_front_matter(diary.content)["tokens"] == 4 * CALL_TOKENS
    assert "Made 2 tool call(s): build (2)." in diary.content
    assert f'The final answer began: "{ANSWER}"' in diary.content


def test_an_agents_own_kickoff_is_one_diary_titled_by_what_it_was_asked(
        harness: Harness) -> None:
    """An agent's own ``kickoff``, outside a crew (an ``AGENT`` span whose input is
    ``{"messages": …}`` as given), is one recovered diary titled by what it was asked, not
    by CrewAI's prompt around it."""
    with serve_asgi(ChatServer(script=SCRIPT, model=MODEL)) as url:
        assert str(agent(url).kickoff(QUESTION)) == ANSWER
    [diary] = harness.diaries()
    assert_recovered(diary, "svc")


def test_a_run_that_raised_writes_nothing_and_the_next_run_its_diary(
        harness: Harness) -> None:
    """A crew whose model answered 500 raises and writes nothing; the next run in the same
    thread writes its own diary."""
    with pytest.raises(Exception, match="500"):
        run_crew([500])
    assert harness.diaries() == []
    assert run_crew([ANSWER]) == ANSWER
    [diary] = harness.diaries()
    assert (diary.outcome, diary.title) == ("completed", QUESTION)


@pytest.mark.parametrize(("named", "expected"), [({}, "Crew"), ({"name": "orders-crew"},
                                                               "orders-crew")])
def test_with_no_service_name_the_crew_names_the_agent(named: dict[str, str], expected: str,
                                                       tmp_path: Path) -> None:
    """With no ``service.name``, the diary's agent is the crew's name, or ``Crew`` for an
    unnamed crew (whose span is ``Crew_<uuid>.kickoff``: another folder each run)."""
    from openinference.instrumentation.crewai import CrewAIInstrumentor
    from opentelemetry.sdk.trace import TracerProvider

    from otel_diary import DiarySpanProcessor
    from otel_diary.testing import InMemorySink

    sink = InMemorySink()
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[sink], conventions="openinference")
    provider.add_span_processor(processor)
    CrewAIInstrumentor().instrument(tracer_provider=provider)
    try:
        with serve_asgi(ChatServer(script=[ANSWER], model=MODEL)) as url:
            kickoff([(TEMPLATE, agent(url))], **named)
    finally:
        CrewAIInstrumentor().uninstrument()
    assert processor.force_flush(10_000)
    provider.shutdown()
    [diary] = sink.diaries
    assert (diary.agent, diary.title) == (expected, QUESTION)
    assert diary.path.startswith(f"diaries/agents/{expected}/")


def test_the_readme_lines_give_one_diary_per_run(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's CrewAI lines, run as written on an app's provider with diaries enabled,
    give one diary per run in the folder, titled by the crew's task."""
    with readme_lines_run("CrewAI", tmp_path, monkeypatch):
        run_crew(["Nothing changed."], "What changed?")
