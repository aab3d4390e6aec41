"""OpenLIT (``openlit.init()``) instrumenting OpenAI Agents SDK agents (one of them handing
over to another) and a LangGraph agent, with the `genai` profile: the README's line run
as written on an app that knows nothing of otel-diary, against the local OpenAI-compatible
server. Each run is one diary, and ``serve``, sent the same spans, writes the same files.

OpenLIT installs into a folder of its own (``make`` puts it in ``<venv>/openlit``, see the
Makefile): it asks for an older ``openai``. It instruments whatever it finds in the
process, so it runs in the app's process alone.
"""

from __future__ import annotations

import pytest

from tests.sources.test_openinference import readme_snippet
from tests.support.apart import folder
from tests.support.build_run import CALL_TOKENS, MODEL
from tests.support.loopback import ToolCall
from tests.support.zero_code import run_agent_app

pytestmark = pytest.mark.slow  # runs an app under opentelemetry-instrument, and serve

README_LINE = readme_snippet("OpenLIT", "sh").strip()
LOOKUP = ToolCall("lookup", '{"term": "release"}')
SCRIPT: list[str | int | ToolCall] = [
    500, LOOKUP, LOOKUP, "The release moved.",  # the Agents SDK's run
    ToolCall("transfer_to_specialist", "{}"), "The platform team.",  # the handoff
    LOOKUP, LOOKUP, "Fixed the types."]  # the graph's
"""The model's answers, in the order the app asks: the Agents SDK's first call meets a
server error (the runner retries it), and each run's first tool call fails."""


@pytest.fixture(scope="module")
def diaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """The app's diaries by agent, the README's line run as written (only OpenLIT's
    instrumentations: the environment's own for the OpenAI client, the Agents SDK and
    LangChain are turned off, as in an app that has OpenLIT alone)."""
    found = run_agent_app("openlit_agents.py", README_LINE, SCRIPT, MODEL,
                          tmp_path_factory.mktemp("openlit"),
                          PYTHONPATH=str(folder("openlit")),
                          OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="openai,openai_agents,langchain")
    by_agent = {str(front["agent"]): front for front in found.values()}
    assert len(by_agent) == len(found) == 3, found
    return by_agent


def section(front: dict[str, object], heading: str) -> str:
    return str(front["body"]).split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_an_agents_sdk_run_is_one_recovered_diary(diaries: dict[str, dict[str, object]]) -> None:
    """The run's ``invoke_workflow`` span (``Agent workflow``) is the run: by its agent,
    titled by the question, with every answered call's tokens; its failed model call and
    failed tool call are the errors got past, the first quoted with its stack trace."""
    front = diaries["researcher"]
    assert (front["outcome"], front["title"], front["workflow"]) == (
        "recovered", "What changed in the release?", "Agent workflow")
    assert (front["model"], front["tokens"]) == (MODEL, 3 * CALL_TOKENS)
    assert "Made 2 tool call(s): lookup (2)." in str(front["body"])
    error = section(front, "Error encountered")
    assert error.startswith("2 failed call(s) (InternalServerError, Error running tool")
    assert "First error: InternalServerError: Error code: 500" in error
    assert "End of the failed call's stack trace:" in error
    assert section(front, "How it was recovered") == (
        "A call to gpt-test failed; a later one succeeded. A call to the lookup tool "
        "failed; a later one succeeded.\n")
    assert 'The final answer began: "The release moved."' in str(front["body"])


def test_a_handoff_is_one_diary_by_the_agent_that_ran_first(
        diaries: dict[str, dict[str, object]]) -> None:
    """A triage agent handing the question over to a specialist, which answers, is one
    diary: the run's workflow span holds both agents' spans."""
    front = diaries["triage"]
    assert (front["outcome"], front["title"]) == ("completed", "Who owns the orders api?")
    assert front["tokens"] == 2 * CALL_TOKENS
    assert 'The final answer began: "The platform team."' in str(front["body"])


def test_a_langgraph_run_is_one_recovered_diary(diaries: dict[str, dict[str, object]]) -> None:
    """The graph's ``invoke_workflow`` span is the run, its workflow the graph's name, its
    agent the node OpenLIT names, with each call's tokens once: OpenLIT reports each call's
    usage on the model call's span and again on its node's span beside it, both with the
    call's response id, and the last call's on the graph's span; the tool that failed once
    is the error got past."""
    front = diaries["agent"]
    assert (front["outcome"], front["title"], front["workflow"]) == (
        "recovered", "Fix the types in the orders api", "orders-graph")
    assert (front["model"], front["tokens"]) == (MODEL, 3 * CALL_TOKENS)
    assert "Made 2 tool call(s): lookup (2)." in str(front["body"])
    error = section(front, "Error encountered")
    assert "1 failed call(s) (TimeoutError)" in error
    assert "First error: TimeoutError: lookup timed out" in error
    assert section(front, "How it was recovered") == (
        "A call to the lookup tool failed; a later one succeeded.\n")
    assert 'The final answer began: "Fixed the types."' in str(front["body"])
