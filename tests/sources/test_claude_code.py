"""Claude Code (the CLI itself: its Linux x64 build from npm, cached outside the checkout)
exporting its traces (beta) with the README's settings to ``otel-diary serve`` under the
`claude-code` profile, its model the local server's Anthropic Messages API.

Each prompt is a ``claude_code.interaction`` span over ``claude_code.llm_request`` spans
(``model``, ``input_tokens``, ``output_tokens``) and ``claude_code.tool`` spans (``tool_name``;
with ``OTEL_LOG_TOOL_DETAILS=1`` a Bash call's ``full_command``), each over its
``claude_code.tool.execution``, which fails when the tool did (``error_class``).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_diary.pipeline.render import parse_front_matter
from tests.cli.test_serve import Serve
from tests.sources.test_openinference import readme_snippet
from tests.support.build_run import ANSWER, CALL_TOKENS, QUESTION
from tests.support.claude_code import claude_binary, offline
from tests.support.loopback import ChatServer, ToolCall, serve_asgi

pytestmark = pytest.mark.slow  # starts serve and Claude Code

SETTINGS = dict(re.findall(r"(\w+)=(\S+)", readme_snippet("Claude Code", "sh")))
"""The README's settings for Claude Code (its endpoint is the test's ``serve``)."""


def bash(command: str) -> ToolCall:
    return ToolCall("Bash", f'{{"command": "{command}", "description": "Build"}}')


@pytest.fixture(scope="module")
def claude() -> Path:
    return claude_binary()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path, env={"OTEL_DIARY_CONVENTIONS": "claude-code"})
    yield server
    if server.process.poll() is None:
        server.stop()


def prompt(claude: Path, serve: Serve, answers: list[str | int | ToolCall],
           **settings: str) -> tuple[str, str, dict[str, object], str]:
    """What Claude Code printed for the question (``-p``, Bash allowed), its model a local
    server answering ``answers``, with the README's settings (and ``settings``); the
    model it asked for, and the one diary ``serve`` wrote (front matter, text)."""
    work = serve.root / "work"
    work.mkdir()
    model = ChatServer(script=answers, model="claude-test")
    with serve_asgi(model) as url:
        # its exporter gets 2 s at exit by default: ample, but not on a starved machine
        env = {**offline(serve.root / "home", url), **SETTINGS,
               "OTEL_EXPORTER_OTLP_ENDPOINT": serve.url,
               "CLAUDE_CODE_OTEL_SHUTDOWN_TIMEOUT_MS": "20000", **settings}
        done = subprocess.run([str(claude), "-p", QUESTION, "--allowedTools", "Bash"],
                              cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    serve.wait_for_diaries(1)
    assert serve.stop() == 0
    [path] = (serve.root / "kb" / "diaries" / "agents").rglob("*.md")
    text = path.read_text("utf-8")
    asked = str(model.requests[0].json()["model"])
    return done.stdout.strip(), asked, parse_front_matter(text), text


def test_a_prompt_that_got_past_a_failed_command_is_recovered(claude: Path,
                                                              serve: Serve) -> None:
    """A prompt whose first Bash command failed and whose next one succeeded is one
    recovered diary: titled by the prompt, by ``claude-code``, with the model it asked for
    and its three requests' tokens, the failed execution's error class, the command each
    call was given, and how it got past."""
    printed, asked, front, text = prompt(claude, serve,
                                         [bash("exit 3"), bash("echo built"), ANSWER])
    assert printed == ANSWER
    assert (front["agent"], front["outcome"], front["title"]) == ("claude-code", "recovered",
                                                                  QUESTION)
    assert (front["model"], front["tokens"]) == (asked, 3 * CALL_TOKENS)
    assert ("Made 2 tool call(s): Bash (2). The call to the Bash tool that failed was given "
            "`exit 3`; the one that succeeded, `echo built`.") in text
    assert "1 failed call(s) (ShellError)" in text and "First error: ShellError" in text
    assert "A call to the Bash tool failed; a later one succeeded." in text


def test_a_prompt_whose_sub_agent_ran_is_one_diary(claude: Path, serve: Serve) -> None:
    """A prompt whose model handed work to a sub-agent (the ``Agent`` tool), which ran a
    command and answered, is one diary of the prompt: every request's tokens, the main
    agent's tool and the sub-agent's."""
    agent = ToolCall("Agent", '{"description": "Build", "prompt": "Build the orders api.", '
                              '"subagent_type": "general-purpose"}')
    printed, _, front, text = prompt(claude, serve,
                                     [agent, bash("echo built"), "Built.", ANSWER])
    assert printed == ANSWER
    assert (front["outcome"], front["title"], front["tokens"]) == ("completed", QUESTION,
                                                                   4 * CALL_TOKENS)
    assert "Made 2 tool call(s): Agent (1), Bash (1)." in text


def test_a_prompt_not_logged_is_no_title(claude: Path, serve: Serve) -> None:
    """Without ``OTEL_LOG_USER_PROMPTS=1`` Claude Code sends the prompt as ``<REDACTED>``:
    the diary is titled by the span name instead."""
    printed, _, front, _ = prompt(claude, serve, [ANSWER], OTEL_LOG_USER_PROMPTS="0")
    assert printed == ANSWER
    assert (front["outcome"], front["title"]) == ("completed", "claude_code.interaction")
