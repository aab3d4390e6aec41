"""Strands Agents' own OpenTelemetry spans (GenAI conventions) with the `genai` profile,
against the local OpenAI-compatible server: an agent, a swarm and a graph of agents each
give one diary per run, and ``serve`` the same.

Strands installs into a folder of its own (``make`` puts it in ``<venv>/strands``, see the
Makefile). It traces to the global tracer provider, which a process sets once: each test
here gives Strands' tracer its own provider instead, with the README's settings.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from otel_diary.pipeline.render import parse_front_matter
from tests.sources.test_genai import GenAIHarness
from tests.sources.test_openinference import readme_snippet
from tests.support.apart import folder, on_path
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

README_LINE = readme_snippet("Strands Agents", "sh").strip()
OPT_IN = re.search(r"OTEL_SEMCONV_STABILITY_OPT_IN=(\S+)", README_LINE)[1]  # type: ignore[index]
"""Strands' own settings the README gives: messages on its spans, each run's own tokens."""
HANDOFF = ToolCall("handoff_to_agent", json.dumps({"agent_name": "specialist",
                                                  "message": "fix the types"}))
"""The triage agent's call handing a swarm's task to the specialist."""


@pytest.fixture(scope="module", autouse=True)
def strands_on_path() -> Iterator[None]:
    yield from on_path("strands")
    threading = sys.modules.get("opentelemetry.instrumentation.threading")
    if threading is not None:  # Strands' tracer turns it on for the process
        threading.ThreadingInstrumentor().uninstrument()


class Harness(GenAIHarness):
    """The `genai` harness, with Strands' tracer on its provider."""

    @contextmanager
    def models(self, script: list[str | int | ToolCall]) -> Iterator[Callable[[], Any]]:
        """Makes Strands models of a local server answering ``script`` (in request order,
        whichever agent asks)."""
        from strands.models.openai import OpenAIModel

        with serve_asgi(ChatServer(script=script, model=MODEL)) as url:
            yield lambda: OpenAIModel(model_id=MODEL, client_args={
                "base_url": url + "/v1", "api_key": "test-key", "max_retries": 0})


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    from strands.telemetry import tracer

    made = Harness()
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", OPT_IN)
    bound = tracer.Tracer()  # reads the settings
    bound.tracer_provider = made.provider
    bound.tracer = made.provider.get_tracer(tracer.__name__)
    monkeypatch.setattr(tracer, "_tracer_instance", bound)
    yield made
    made.provider.shutdown()
    made.serve.check(made.sink.diaries)


def team(kind: str, model: Callable[[], Any]) -> Any:
    """A swarm (triage, which may hand over to specialist) or a graph (triage, then
    specialist) of two agents."""
    from strands import Agent
    from strands.multiagent import GraphBuilder, Swarm

    triage = Agent(model=model(), name="triage", callback_handler=None)
    specialist = Agent(model=model(), name="specialist", callback_handler=None)
    if kind == "swarm":
        return Swarm([triage, specialist])
    graph = GraphBuilder()
    graph.add_node(triage, "plan")
    graph.add_node(specialist, "fix")
    graph.add_edge("plan", "fix")
    return graph.set_max_node_executions(2).build()


def test_an_agent_that_got_past_a_failed_tool_is_recovered(harness: Harness) -> None:
    """An agent whose tool raised, then succeeded when the model called it again, is one
    recovered diary: titled by the question, with each call's tokens once (the agent span
    also carries their sum), the tool's error and the answer."""
    from strands import Agent, tool

    with harness.models(SCRIPT) as model:
        agent = Agent(model=model(), tools=[tool(build)], name="builder", callback_handler=None)
        assert str(agent(QUESTION)).strip() == ANSWER
    [diary] = harness.diaries()
    assert_recovered(diary)


@pytest.mark.parametrize(("kind", "script"), [
    ("swarm", [HANDOFF, "Handed over.", ANSWER]),  # triage calls the model twice
    ("graph", ["Plan: fix the types.", ANSWER])], ids=["swarm", "graph"])
def test_a_team_of_agents_is_one_diary(harness: Harness, kind: str,
                                       script: list[str | int | ToolCall]) -> None:
    """A swarm whose triage agent hands over to a specialist, or a graph running one
    agent after the other, is one diary (not one per agent): by the agent that ran first,
    titled by the team's task, with every agent's calls."""
    with harness.models(script) as model:
        result = team(kind, model)(QUESTION)
    assert result.status.value == "completed"
    [diary] = harness.diaries()
    front = parse_front_matter(diary.content)
    assert (diary.agent, diary.outcome, diary.title) == ("triage", "completed", QUESTION)
    assert front["tokens"] == len(script) * CALL_TOKENS
    assert f'The final answer began: "{ANSWER}"' in diary.content


@pytest.mark.parametrize(("kind", "script"), [
    ("swarm", [HANDOFF, 400]), ("graph", ["Plan: fix the types.", 400])],
    ids=["swarm", "graph"])
def test_a_team_whose_agent_failed_writes_nothing(harness: Harness, kind: str,
                                                  script: list[str | int | ToolCall]) -> None:
    """The last agent of a swarm or a graph failing (its model answered 400) fails the
    team's run: no diary (the graph's first agent, which ended OK, writes none either)."""
    with harness.models(script) as model:
        try:
            result = team(kind, model)(QUESTION)
        except Exception as error:  # a graph raises its node's error
            assert "400" in str(error)
        else:
            assert result.status.value == "failed"
    assert harness.diaries() == []


def test_each_run_of_an_agent_has_its_own_tokens(harness: Harness) -> None:
    """An agent asked twice gives a diary per run, each with its own run's tokens (with the
    README's settings Strands' agent span carries those, not the agent's total so far)."""
    from strands import Agent

    with harness.models(["One.", "Two."]) as model:
        agent = Agent(model=model(), name="builder", callback_handler=None)
        agent(QUESTION)
        agent("And the tests?")
    found = {diary.title: parse_front_matter(diary.content)["tokens"]
             for diary in harness.diaries()}
    assert found == {QUESTION: CALL_TOKENS, "And the tests?": CALL_TOKENS}


@pytest.mark.slow
def test_the_readme_line_gives_one_diary_per_run(tmp_path: Path) -> None:
    """The README's line, run as written on an unmodified Strands app (a swarm), gives one
    diary in the folder, titled by the task, with every call's tokens."""
    found = run_agent_app("strands_team.py", README_LINE, [HANDOFF, "Handed over.", ANSWER],
                          MODEL, tmp_path, PYTHONPATH=str(folder("strands")))
    [front] = found.values()
    assert (front["agent"], front["outcome"], front["title"]) == ("triage", "completed",
                                                                  QUESTION)
    assert front["tokens"] == 3 * CALL_TOKENS
