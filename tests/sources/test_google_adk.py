"""Google ADK's own OpenTelemetry spans (GenAI conventions) with the `genai` profile, against
the local server's Gemini API: a run is one diary, a sequential agent's too, a run that got
past a failed tool call (its error handed back to the model, or returned as a value by
ADK's own shell and MCP tools) is recovered, and ``serve`` writes the same.

ADK installs into a folder of its own (``make`` puts it in ``<venv>/google_adk``; it needs
Python 3.11). It traces to the global tracer provider, which a process sets once: each test
here gives ADK's tracer its own provider instead, with the README's settings.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

from otel_diary.index.lessons import sighting
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

LABEL = "Google ADK"
README_LINE = readme_snippet(LABEL, "sh").strip()
SETTINGS = dict(re.findall(r"(OTEL_(?:SEMCONV|INSTRUMENTATION)\w+)=(\S+)", README_LINE))
"""OpenTelemetry's GenAI settings the README gives: messages, tool arguments and results
on ADK's spans."""


@pytest.fixture(scope="module", autouse=True)
def adk_on_path() -> Iterator[None]:
    if sys.version_info < (3, 11):
        pytest.skip("Google ADK needs Python 3.11")
    yield from on_path("google_adk")


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> Iterator[GenAIHarness]:
    """The `genai` harness, with ADK's tracer (one, shared by its modules) on its provider
    and the README's settings."""
    from google.adk.telemetry import tracing

    assert isinstance(tracing.tracer, trace.ProxyTracer)  # no global provider was set
    made = GenAIHarness()
    for name, value in SETTINGS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    monkeypatch.setattr(tracing.tracer, "_real_tracer", made.provider.get_tracer("google.adk"))
    yield made
    made.provider.shutdown()
    made.serve.check(made.sink.diaries)


def builder(url: str, name: str = "builder") -> Any:
    """An ADK agent with the ``build`` tool, its model the local server at ``url``."""
    from google.adk.agents import LlmAgent
    from google.adk.models.google_llm import Gemini

    return LlmAgent(name=name, model=Gemini(model=MODEL, base_url=url),
                    instruction="You build the app.", tools=[build])


def run(agent: Any, *, retry: bool = True) -> str | None:
    """What ``agent`` finally answers the question with, run as ADK runs it (with the
    plugin that hands a failed tool call's error back to the model, unless not
    ``retry``)."""
    from google.adk.apps import App
    from google.adk.plugins import ReflectAndRetryToolPlugin
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    async def answer() -> str | None:
        runner = InMemoryRunner(app=App(name="orders", root_agent=agent, plugins=[
            ReflectAndRetryToolPlugin()] if retry else []))
        session = await runner.session_service.create_session(app_name="orders",
                                                               user_id="me")
        asked = types.Content(role="user", parts=[types.Part(text=QUESTION)])
        final = None
        try:
            async for event in runner.run_async(user_id="me", session_id=session.id,
                                                new_message=asked):
                if event.is_final_response() and event.content and event.content.parts:
                    final = event.content.parts[0].text
        finally:
            await runner.close()  # its toolsets too (an MCP server's process)
        return final

    return asyncio.run(answer())


def test_an_agent_that_got_past_a_failed_tool_is_recovered(harness: GenAIHarness) -> None:
    """An agent whose build failed (the plugin handing the error back to the model, the
    call's span ending OK) and built the next target is one recovered diary: titled by the
    question, with each call's tokens, the tool's error, what each call was given and the
    answer."""
    with serve_asgi(ChatServer(script=SCRIPT, model=MODEL)) as url:
        assert run(builder(url)) == ANSWER
    [diary] = harness.diaries()
    assert_recovered(diary)


def test_a_run_whose_tool_raised_writes_nothing_and_the_next_run_its_diary(
        harness: GenAIHarness) -> None:
    """Without the plugin, the tool's error ends the run: nothing is written. The next run
    writes its own diary."""
    with serve_asgi(ChatServer(script=SCRIPT, model=MODEL)) as url, \
            pytest.raises(RuntimeError, match="TS2345"):
        run(builder(url), retry=False)
    assert harness.diaries() == []
    with serve_asgi(ChatServer(script=[ANSWER], model=MODEL)) as url:
        assert run(builder(url)) == ANSWER
    [diary] = harness.diaries()
    assert (diary.agent, diary.outcome, diary.title) == ("builder", "completed", QUESTION)


def test_a_sequential_agent_is_one_diary_by_its_name(harness: GenAIHarness) -> None:
    """A sequential agent whose planner planned, then whose builder built (failing once),
    is one recovered diary of the whole run, by the sequential agent, with every call's
    tokens and the builder's answer."""
    from google.adk.agents import SequentialAgent

    with serve_asgi(ChatServer(script=["Plan: build orders.", *SCRIPT], model=MODEL)) as url:
        with pytest.warns(DeprecationWarning):  # in favour of workflows, which nest none
            fix = SequentialAgent(name="fix", sub_agents=[builder(url, "planner"),
                                                          builder(url)])
        assert run(fix) == ANSWER
    [diary] = harness.diaries()
    assert (diary.agent, diary.outcome, diary.title) == ("fix", "recovered", QUESTION)
    assert parse_front_matter(diary.content)["tokens"] == 4 * CALL_TOKENS
    assert f'The final answer began: "{ANSWER}"' in diary.content


def test_a_command_that_failed_is_told_by_its_output(harness: GenAIHarness,
                                                    tmp_path: Path) -> None:
    """ADK's own shell tool (``Execute``, of its ``EnvironmentToolset``) returns a failed
    command as a value, its span marked only ``TOOL_ERROR``: a run that got past it is
    recovered, told by the command's output (its stderr), and files under the compiler's
    error code, as a build that failed with it does."""
    from google.adk.agents import LlmAgent
    from google.adk.environment import LocalEnvironment
    from google.adk.models.google_llm import Gemini
    from google.adk.tools.environment import EnvironmentToolset

    error = "src/orders/api.ts(42,17): error TS2345: Argument of type 'string' is not assignable"
    failing = f'echo "> tsc --noEmit"; echo "{error}" >&2; exit 2'
    script: list[str | int | ToolCall] = [
        ToolCall("Execute", json.dumps({"command": failing})),
        ToolCall("Execute", json.dumps({"command": "echo built"})), ANSWER]
    with serve_asgi(ChatServer(script=script, model=MODEL)) as url, \
            pytest.warns(UserWarning, match="EXPERIMENTAL"):
        agent = LlmAgent(name="builder", model=Gemini(model=MODEL, base_url=url),
                         instruction="You build the app.", tools=[EnvironmentToolset(
                             environment=LocalEnvironment(working_dir=tmp_path))])
        assert run(agent, retry=False) == ANSWER
    [diary] = harness.diaries()
    assert (diary.outcome, diary.title) == ("recovered", QUESTION)
    assert f"First error: TOOL_ERROR: {error}" in diary.content
    assert f"End of the failed call's output:\n```text\n{error}\n```" in diary.content
    found = sighting(diary.path, parse_front_matter(diary.content), diary.content)
    assert found is not None and found[0] == "code:TS2345"
    assert found[1].error_line == error


def test_a_function_tool_that_returned_an_error_is_a_failed_call(
        harness: GenAIHarness) -> None:
    """A function tool of the app's own that reports a failure as ADK's guide has it,
    ``{"status": "error", "error_message": …}`` (its span ends OK): a run that got past it
    is recovered, told by that message, and files under the compiler's error code."""
    error = "error TS2345: Argument of type 'string' is not assignable"

    def build(target: str) -> dict[str, str]:
        """Build a target."""
        if target == "orders":
            return {"status": "error", "error_message": error}
        return {"status": "success", "report": "built"}

    with serve_asgi(ChatServer(script=SCRIPT, model=MODEL)) as url:
        agent = builder(url)
        agent.tools = [build]
        assert run(agent, retry=False) == ANSWER
    [diary] = harness.diaries()
    assert (diary.outcome, diary.title) == ("recovered", QUESTION)
    assert f"1 failed call(s)\nFirst error: {error}\n" in diary.content
    assert "A call to the build tool failed; a later one succeeded." in diary.content
    found = sighting(diary.path, parse_front_matter(diary.content), diary.content)
    assert found is not None and found[0] == "code:TS2345"


def test_a_failed_mcp_call_is_told_by_its_result(harness: GenAIHarness,
                                                tmp_path: Path) -> None:
    """An agent reading the knowledge base through ADK's MCP toolset (``otel-diary mcp``
    over stdio) whose first call failed (an id no document has: the result says so,
    ADK's span only ``MCP_TOOL_ERROR``) and whose search then answered is recovered, told
    by what the server answered."""
    from google.adk.agents import LlmAgent
    from google.adk.models.google_llm import Gemini
    from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
    from mcp import StdioServerParameters

    script: list[str | int | ToolCall] = [
        ToolCall("kb_fetch", json.dumps({"id": "kh-0000000000000000dead"})),
        ToolCall("kb_search", json.dumps({"query": "TS2345"})), ANSWER]
    toolset = McpToolset(connection_params=StdioConnectionParams(
        server_params=StdioServerParameters(command=sys.executable, args=[
            "-m", "otel_diary.cli", "mcp", "--dir", str(tmp_path / "kb")]), timeout=60))
    with serve_asgi(ChatServer(script=script, model=MODEL)) as url:
        agent = LlmAgent(name="reader", model=Gemini(model=MODEL, base_url=url),
                         instruction="You read the knowledge base.", tools=[toolset])
        assert run(agent, retry=False) == ANSWER
    [diary] = harness.diaries()
    assert (diary.outcome, diary.title) == ("recovered", QUESTION)
    assert ("First error: MCP_TOOL_ERROR: Error executing tool kb_fetch: no diary or lesson "
            "has the id 'kh-0000000000000000dead'") in diary.content
    assert "After a call to the kb_fetch tool failed, the agent went on" in diary.content


@pytest.mark.slow  # starts an instrumented app
def test_the_readme_line_runs_an_unmodified_agent(tmp_path: Path) -> None:
    """The README's command on an ADK app that knows nothing of otel-diary writes its run's
    recovered diary, titled by what it was asked."""
    found = run_agent_app("adk_agent.py", README_LINE,
                          [ToolCall("build", '{"target": "orders"}'),
                           ToolCall("build", '{"target": "orders-fixed"}'), "Nothing changed."],
                          "gemini-2.5-flash", tmp_path,
                          PYTHONPATH=str(folder("google_adk")))
    [front] = found.values()
    assert (front["agent"], front["outcome"], front["title"]) == ("builder", "recovered",
                                                                  "What changed?")
    assert (front["model"], front["tokens"]) == ("gemini-2.5-flash", 3 * CALL_TOKENS)
    assert "First error: RuntimeError: TS2345" in front["body"]
