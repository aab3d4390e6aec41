"""AutoGen AgentChat's own spans (``invoke_agent``, ``execute_tool``) with the OpenTelemetry
OpenAI instrumentation's, under the `genai` profile, run as the README says: unmodified apps
under ``opentelemetry-instrument`` (AutoGen traces to the global tracer provider), against
the local OpenAI-compatible server; ``serve``, sent the same spans by the SDK's OTLP
exporter, writes the same diaries.

AutoGen installs into a folder of its own (``make`` puts it in ``<venv>/autogen``, see the
Makefile).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.sources.test_openinference import readme_snippet
from tests.support.apart import folder, on_path
from tests.support.build_run import CALL_TOKENS, QUESTION
from tests.support.loopback import ToolCall
from tests.support.zero_code import APPS, run_agent_app

pytestmark = pytest.mark.slow  # each test starts an instrumented app

LABEL = "AutoGen AgentChat"
MODEL = "gpt-4o"  # a model AutoGen's client knows


@pytest.fixture(scope="module", autouse=True)
def autogen_installed() -> Iterator[None]:
    yield from on_path("autogen")  # for the check alone: the apps get it on PYTHONPATH


def run_app(mode: str, script: list[str | int | ToolCall], tmp_path: Path) -> \
        dict[str, dict[str, Any]]:
    """The diaries (front matter by task id) of the app in ``mode``, run with the README's
    command against a server answering ``script``."""
    command = readme_snippet(LABEL, "sh").strip().replace("agent.py", f"agent.py {mode}")
    return run_agent_app("autogen_team.py", command, script, MODEL, tmp_path,
                         PYTHONPATH=str(folder("autogen")),
                         OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="openai_agents")


def test_the_app_runs_the_readme_lines() -> None:
    """The team app opens the README's span around the team's run, as written."""
    lines = readme_snippet(LABEL)
    app = (APPS / "autogen_team.py").read_text(encoding="utf-8")
    imports, block = lines.split("\n\n", 1)
    assert imports in app
    assert textwrap.indent(block, "    ") in app


def test_a_team_run_in_the_readme_span_is_one_diary(tmp_path: Path) -> None:
    """Two agents taking turns inside the README's span are one diary (not one per turn):
    by the agent that spoke first, titled by the task, with both turns' tokens and the
    last one's answer."""
    found = run_app("team", ["Plan: fix the types.", "Fixed the types."], tmp_path)
    [front] = found.values()
    assert (front["agent"], front["outcome"], front["title"]) == ("planner", "completed", QUESTION)
    assert (front["model"], front["tokens"]) == (MODEL, 2 * CALL_TOKENS)
    assert 'The final answer began: "Fixed the types."' in front["body"]


def test_an_agent_that_got_past_a_failed_tool_is_recovered(tmp_path: Path) -> None:
    """An agent whose tool raised (AutoGen hands the error back to the model), then
    answered, is one recovered diary: titled by the task, with the tool's error."""
    found = run_app("agent", [ToolCall("build", '{"target": "orders"}'), "Fixed the types."],
                    tmp_path)
    [front] = found.values()
    assert (front["agent"], front["outcome"], front["title"]) == ("builder", "recovered", QUESTION)
    assert front["tokens"] == 2 * CALL_TOKENS
    assert "First error: RuntimeError: TS2345" in front["body"]
