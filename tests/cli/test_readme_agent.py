"""README "Use it from an agent": every snippet is parsed and its command run for real."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from otel_diary import Diary
from tests.support.claude_code import claude_binary, offline
from tests.support.knowledge import build_knowledge_base
from tests.support.loopback import ChatServer, ToolCall, free_port, serve_asgi
from tests.support.mcp_client import http_process, http_session, stdio_session

README = Path(__file__).resolve().parents[2] / "README.md"
BIN = Path(sys.executable).parent
SESSION_START = json.dumps({"session_id": "s-1", "hook_event_name": "SessionStart",
                            "source": "startup", "cwd": "/work"})


def snippets() -> list[tuple[str, str]]:
    """The fenced blocks of the section, in order, as (language, text)."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Use it from an agent"):]
    section = section[:section.index("\n## ", 3)]
    return re.findall(r"```(\w+)\n(.*?)```", section, re.DOTALL)


def block(language: str, containing: str) -> str:
    found = [text for lang, text in snippets() if lang == language and containing in text]
    assert len(found) == 1, (language, containing)
    return found[0]


def executable(name: str) -> str:
    """``name`` as the shell would find it, with this environment's scripts on the PATH."""
    found = shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    assert found is not None, name
    return found


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Diary]]:
    root = tmp_path_factory.mktemp("kb")
    return root, build_knowledge_base(root)


def search_over_stdio(command: list[str], env: dict[str, str]) -> tuple[set[str], list[str]]:
    """Tool names and the ids ``kb_search("TS2345")`` finds, through the MCP client."""
    async def main() -> tuple[set[str], list[str]]:
        async with stdio_session(command, env) as session:
            tools = {tool.name for tool in (await session.list_tools()).tools}
            result = await session.call_tool("kb_search", {"query": "TS2345"})
            assert result.structured_content is not None
            return tools, [found["id"] for found in result.structured_content["results"]]
    return anyio.run(main)


def test_the_claude_code_command_adds_a_working_stdio_server(
        kb: tuple[Path, dict[str, Diary]]) -> None:
    """``claude mcp add … -- otel-diary mcp``: the command after ``--`` serves the tools."""
    root, diaries = kb
    words = shlex.split(block("sh", "claude mcp add --transport stdio").strip())
    assert words[:4] == ["claude", "mcp", "add", "--transport"]
    command = words[words.index("--") + 1:]
    env = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--env")
    assert set(env) == {"OTEL_DIARY_DIR"}
    tools, ids = search_over_stdio([executable(command[0]), *command[1:]],
                                   {"OTEL_DIARY_DIR": str(root)})
    assert tools == {"kb_search", "kb_fetch", "kb_lessons"}
    assert ids == [diaries["types"].id]


@pytest.mark.slow  # runs Claude Code
def test_claude_code_takes_the_server_and_the_hook_as_written(tmp_path: Path) -> None:
    """Claude Code itself adds the README's stdio server as written and, with the README's
    hook in the project's settings, starts on a branch named for the task: its model reads
    the hook's digest in the first request, and what ``kb_search`` found once it called
    it. Both go to the knowledge base where the README's line puts it (the hook gets none
    of Claude Code's ``OTEL_*`` variables, so it reads the default folder)."""
    claude = claude_binary()
    home, repo, bin_dir = tmp_path / "home", tmp_path / "repo", tmp_path / "bin"
    diaries = build_knowledge_base(home / ".local" / "share" / "otel-diary")
    wanted = diaries["types"].id
    subprocess.run(["git", "init", "-q", "-b", "tighten-orders-types", str(repo)], check=True)
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(block("json", '"SessionStart"'))
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(claude)
    model = ChatServer(script=[ToolCall("mcp__otel-diary__kb_search", '{"query": "TS2345"}'),
                               "Tightened."], model="claude-test")
    with serve_asgi(model) as url:
        env = offline(home, url)
        env["PATH"] = os.pathsep.join((str(bin_dir), str(BIN), env["PATH"]))
        added = subprocess.run(block("sh", "claude mcp add --transport stdio").strip(),
                               shell=True, cwd=repo, env=env, capture_output=True, text=True,
                               timeout=60)
        assert added.returncode == 0, added.stdout + added.stderr
        done = subprocess.run([str(claude), "-p", "Tighten the orders types",
                               "--allowedTools", "mcp__otel-diary__kb_search"], cwd=repo,
                              env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "Tightened."), done.stderr
    first, then = (request.json() for request in model.requests)
    assert wanted in json.dumps(first)  # the hook's digest, before the first answer
    [found] = [part for message in then["messages"] if isinstance(message["content"], list)
               for part in message["content"] if part.get("type") == "tool_result"]
    assert [hit["id"] for hit in json.loads(found["content"])["results"]] == [wanted]


@pytest.mark.slow  # runs Claude Code
def test_claude_code_adds_the_http_server_as_written(tmp_path: Path) -> None:
    """Claude Code itself takes the README's line for the HTTP server as written: the
    server's URL and its bearer token, from the environment."""
    claude = claude_binary()
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    for made in (bin_dir, work):
        made.mkdir()
    (bin_dir / "claude").symlink_to(claude)
    env = {**offline(tmp_path / "home", "http://127.0.0.1:9"),
           "OTEL_DIARY_MCP_TOKEN": "readme-token"}
    env["PATH"] = os.pathsep.join((str(bin_dir), env["PATH"]))
    line = next(line for line in block("sh", "--transport http").splitlines()
                if line.startswith("claude mcp add"))
    added = subprocess.run(line, shell=True, cwd=work, env=env, capture_output=True,
                           text=True, timeout=60)
    assert added.returncode == 0, added.stdout + added.stderr
    shown = subprocess.run([str(claude), "mcp", "get", "otel-diary"], cwd=work, env=env,
                           capture_output=True, text=True, timeout=60)
    assert "URL: http://127.0.0.1:8765/mcp" in shown.stdout, shown.stdout + shown.stderr
    assert "Authorization: Bearer readme-token" in shown.stdout


def test_the_session_start_hook_prints_the_digest_for_the_branch(
        kb: tuple[Path, dict[str, Diary]], tmp_path: Path) -> None:
    """The hook's command, run by a shell in a repository on a branch named for the task,
    with Claude Code's event on standard input, prints the matching diary; off a repository
    it prints nothing and succeeds."""
    root, diaries = kb
    settings: dict[str, Any] = json.loads(block("json", '"SessionStart"'))
    [entry] = settings["hooks"]["SessionStart"]
    [hook] = entry["hooks"]
    assert hook["type"] == "command"
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "tighten-orders-types", str(repo)], check=True)
    env = {**os.environ, "OTEL_DIARY_DIR": str(root),
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(hook["command"], shell=True, cwd=repo, env=env, input=SESSION_START,
                          capture_output=True, text=True, timeout=hook["timeout"] * 6)
    assert done.returncode == 0, done.stderr
    assert diaries["types"].id in done.stdout
    assert str(root / diaries["types"].path) in done.stdout
    elsewhere = tmp_path / "plain"
    elsewhere.mkdir()
    quiet = subprocess.run(hook["command"], shell=True, cwd=elsewhere, env=env,
                           input=SESSION_START, capture_output=True, text=True,
                           timeout=hook["timeout"] * 6)
    assert (quiet.returncode, quiet.stdout) == (0, "")


def test_the_mcp_servers_json_starts_a_working_server(kb: tuple[Path, dict[str, Diary]]) -> None:
    """The Cursor / generic ``mcpServers`` entry's command, args and env serve the tools."""
    root, diaries = kb
    config: dict[str, Any] = json.loads(block("json", '"command": "otel-diary"'))
    server = config["mcpServers"]["otel-diary"]
    assert set(server["env"]) == {"OTEL_DIARY_DIR"}
    tools, ids = search_over_stdio([executable(server["command"]), *server["args"]],
                                   {**server["env"], "OTEL_DIARY_DIR": str(root)})
    assert "kb_lessons" in tools
    assert ids == [diaries["types"].id]


@pytest.fixture
def http_snippet(kb: tuple[Path, dict[str, Diary]]) -> Iterator[tuple[str, int, str]]:
    """The README's HTTP server command, on a free port; yields (URL, port, token)."""
    root, _ = kb
    lines = block("sh", "--transport http").strip().splitlines()
    serve = shlex.split(next(line for line in lines if line.startswith("otel-diary mcp")))
    port = free_port()
    serve[serve.index("--port") + 1] = str(port)
    token = "readme-token"
    with http_process([executable(serve[0]), *serve[1:]],
                      {"OTEL_DIARY_MCP_TOKEN": token, "OTEL_DIARY_DIR": str(root)}, port) as url:
        yield url, port, token


def test_the_http_snippets_serve_with_the_bearer_token(
        kb: tuple[Path, dict[str, Diary]], http_snippet: tuple[str, int, str]) -> None:
    """The HTTP server command serves the URL the JSON names, with its Authorization header;
    without the header the server answers 401."""
    _, diaries = kb
    url, port, token = http_snippet
    config: dict[str, Any] = json.loads(block("json", '"type": "http"'))
    server = config["mcpServers"]["otel-diary"]
    configured = server["url"].replace(":8765/", f":{port}/")
    assert configured == url
    headers = {name: value.replace("${OTEL_DIARY_MCP_TOKEN}", token)
               for name, value in server["headers"].items()}
    claude = shlex.split(next(line for line in block("sh", "--transport http").splitlines()
                              if line.startswith("claude mcp add")))
    assert claude[claude.index("--header") + 1] == "Authorization: Bearer $OTEL_DIARY_MCP_TOKEN"
    assert claude[claude.index("otel-diary") + 1] == server["url"]

    async def main() -> list[str]:
        async with http_session(configured, None, headers) as session:
            result = await session.call_tool("kb_fetch", {"id": diaries["types"].id})
            assert result.structured_content is not None
            return [result.structured_content["id"]]

    assert anyio.run(main) == [diaries["types"].id]
    assert httpx.post(configured, json={}).status_code == 401
