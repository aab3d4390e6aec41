"""``otel-diary mcp`` driven by the official MCP client SDK, over stdio and streamable HTTP."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, MCPError
from mcp.types import CallToolResult, TextContent, TextResourceContents

from otel_diary import Diary
from otel_diary.readers import Document, Found, LessonsAnswer
from tests.support.kb import kb_pipeline, task_record, write
from tests.support.knowledge import NEW_TS_ERROR, build_knowledge_base, snapshot, write_lesson
from tests.support.loopback import free_port
from tests.support.mcp_client import SERVER, http_server, http_session, stdio_session

TOKEN = "s3cret-token-for-tests"
Connect = Callable[[], AbstractAsyncContextManager[ClientSession]]


class World:
    """The knowledge base the server reads, what it holds, and the HTTP server's URL."""

    def __init__(self, root: Path, diaries: dict[str, Diary], lesson: str, url: str) -> None:
        self.root = root
        self.diaries = diaries
        self.lesson = lesson
        self.url = url


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("kb")
    diaries = build_knowledge_base(root)
    lesson = write_lesson(root, "code:TS2345", "Narrow optional values before the call",
                          [diaries["types"].id])
    with http_server(root, TOKEN) as url:
        yield World(root, diaries, lesson, url)


@pytest.fixture(params=["stdio", "http"])
def connect(request: pytest.FixtureRequest, world: World) -> Connect:
    """Opens a session with the server over one transport."""
    if request.param == "stdio":
        return lambda: stdio_session([*SERVER, "--dir", str(world.root)])
    return lambda: http_session(world.url, TOKEN)


def run(connect: Connect, body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """``body(session)`` in a fresh session; its result."""
    async def main() -> Any:
        async with connect() as session:
            return await body(session)
    return anyio.run(main)


async def call(session: ClientSession, tool: str, **arguments: Any) -> CallToolResult:
    return await session.call_tool(tool, arguments)


def ids(result: CallToolResult) -> list[tuple[str, str]]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return [(found["kind"], found["id"]) for found in result.structured_content["results"]]


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    inner: list[BaseException] | None = getattr(exc, "exceptions", None)
    return [leaf for one in inner for leaf in leaves(one)] if inner else [exc]


def test_tools_are_listed_read_only_with_input_and_output_schemas(connect: Connect) -> None:
    """The three tools are listed, each marked read-only, with their argument schemas."""
    tools = {tool.name: tool for tool in run(connect, lambda s: s.list_tools()).tools}
    assert set(tools) == {"kb_search", "kb_fetch", "kb_lessons"}
    for tool in tools.values():
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        assert tool.annotations.destructive_hint is False
        assert tool.output_schema is not None
        assert ("front_matter" if tool.name == "kb_fetch" else "results") in \
            tool.output_schema["properties"]
    search = tools["kb_search"].input_schema
    assert set(search["properties"]) == {"query", "agent", "outcome", "since", "limit"}
    assert search["properties"]["query"]["maxLength"] == 2000
    assert tools["kb_fetch"].input_schema["required"] == ["id"]
    assert tools["kb_lessons"].input_schema["required"] == ["error"]


def test_output_schemas_describe_the_answers_fields_and_defaults(connect: Connect) -> None:
    """Each answer's schema has the answer's description, its fields in order, and marks
    as required exactly the fields without a default (a list defaulting to empty is not)."""
    tools = {tool.name: tool for tool in run(connect, lambda s: s.list_tools()).tools}
    lessons = tools["kb_lessons"].output_schema
    assert lessons is not None and lessons["title"] == "LessonsAnswer"
    assert lessons["description"] == LessonsAnswer.__doc__
    assert list(lessons["properties"]) == [f.name for f in dataclasses.fields(LessonsAnswer)]
    assert lessons["required"] == ["signatures", "first_line", "results"]
    assert lessons["properties"]["template"]["default"] == ""
    found = lessons["$defs"]["Found"]
    assert found["description"] == Found.__doc__
    assert "matched" not in found["required"] and found["properties"]["matched"]["default"] == []
    assert found["properties"]["kind"]["enum"] == ["lesson", "diary"]
    fetch = tools["kb_fetch"].output_schema
    assert fetch is not None and fetch["required"] == [f.name for f in dataclasses.fields(Document)]


def test_search_by_an_error_code_lists_the_lesson_then_the_diary(
        connect: Connect, world: World) -> None:
    """``kb_search("TS2345")`` finds the lesson for that code first, then the diary that met it."""
    result = run(connect, lambda s: call(s, "kb_search", query="TS2345"))
    assert ids(result) == [("lesson", world.lesson), ("diary", world.diaries["types"].id)]
    first = result.structured_content["results"][1]
    assert first["path"] == world.diaries["types"].path
    assert first["outcome"] == "recovered" and first["agent"] == "coder"


def test_a_question_in_plain_words_lists_the_lesson_of_the_diary_it_finds(
        connect: Connect, world: World) -> None:
    """An agent's question, which no lesson has every word of, gets the lesson gathering
    the diary it finds first, its ``matched`` naming that diary."""
    result = run(connect, lambda s: call(s, "kb_search",
                                         query="how did we tighten the types in orders"))
    found = ids(result)
    assert found[0] == ("lesson", world.lesson)
    assert ("diary", world.diaries["types"].id) in found
    assert result.structured_content["results"][0]["matched"] == [world.diaries["types"].id]


def test_search_by_a_word_of_a_reflection_with_filters(connect: Connect, world: World) -> None:
    """A stemmed word of "What was learned" finds its diary; a filter that excludes it, nothing."""
    async def body(session: ClientSession) -> tuple[CallToolResult, CallToolResult]:
        return (await call(session, "kb_search", query="defensive"),
                await call(session, "kb_search", query="defensive", agent="coder"))

    found, filtered = run(connect, body)
    assert ids(found) == [("diary", world.diaries["parsing"].id)]
    assert ids(filtered) == []


def test_fetch_returns_the_whole_document(connect: Connect, world: World) -> None:
    """``kb_fetch`` by id gives the front matter and body of the diary file."""
    diary = world.diaries["types"]
    result = run(connect, lambda s: call(s, "kb_fetch", id=diary.id))
    assert not result.is_error
    document = result.structured_content
    assert document is not None
    assert document["front_matter"]["id"] == diary.id
    assert document["front_matter"]["outcome"] == "recovered"
    assert document["content"] == (world.root / diary.path).read_text(encoding="utf-8")
    assert document["body"] == diary.body


def test_lessons_match_a_new_error(connect: Connect, world: World) -> None:
    """A new run's TS2345 in another file gets its signature, the lesson, then the diary."""
    result = run(connect, lambda s: call(s, "kb_lessons", error=NEW_TS_ERROR))
    assert ids(result) == [("lesson", world.lesson), ("diary", world.diaries["types"].id)]
    assert result.structured_content["signatures"] == ["code:TS2345"]
    assert [f["matched"] for f in result.structured_content["results"]] == [
        ["code:TS2345"], ["code:TS2345"]]


def test_an_error_of_few_words_gets_its_own_lesson_and_no_other(
        connect: Connect, world: World) -> None:
    """A terse error (``error TS2345``, ``error CS0103``) is matched by its code: the words
    every failure's lesson and diary has (error, failed, build) match nothing on their own."""
    async def body(session: ClientSession) -> list[CallToolResult]:
        return [await call(session, "kb_lessons", error=error)
                for error in ("error TS2345", "error CS0103", "Error: build failed")]

    known, unknown, generic = run(connect, body)
    assert ids(known) == [("lesson", world.lesson), ("diary", world.diaries["types"].id)]
    assert ids(unknown) == ids(generic) == []


def test_optional_filters_left_empty_filter_nothing(connect: Connect, world: World) -> None:
    """A client that fills every optional argument sends ``""`` for ``agent`` and
    ``since``: the answer is the one without them."""
    async def body(session: ClientSession) -> tuple[CallToolResult, CallToolResult]:
        return (await call(session, "kb_search", query="TS2345", agent="", since=" "),
                await call(session, "kb_search", query="TS2345"))

    filled, bare = run(connect, body)
    assert ids(filled) == ids(bare) == [("lesson", world.lesson),
                                        ("diary", world.diaries["types"].id)]


def test_a_resource_reads_a_diary_by_id(connect: Connect, world: World) -> None:
    """``diary://<id>`` reads the markdown of a diary; the template is listed."""
    diary = world.diaries["parsing"]

    async def body(session: ClientSession) -> tuple[Any, Any]:
        return (await session.list_resource_templates(),
                await session.read_resource(f"diary://{diary.id}"))

    templates, read = run(connect, body)
    assert [t.uri_template for t in templates.resource_templates] == ["diary://{id}"]
    [content] = read.contents
    assert isinstance(content, TextResourceContents)
    assert content.text == (world.root / diary.path).read_text(encoding="utf-8")
    assert content.mime_type == "text/markdown"


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("kb_fetch", {"id": "kh-00000000000000000000"}, "no diary or lesson has the id"),
    ("kb_fetch", {"id": "../../../etc/passwd"}, "no diary or lesson has the id"),
    ("kb_fetch", {"id": "diaries/../../secret.md"}, "outside the knowledge base"),
    ("kb_fetch", {"id": "/etc/hosts.md"}, "outside the knowledge base"),
    ("kb_search", {"query": '"(" ) * ^ :'}, "no words to search for"),
    ("kb_search", {"query": "word " * 1000}, "at most 2000 characters"),
    ("kb_search", {"query": "orders", "limit": 10_000}, "less than or equal to 50"),
    ("kb_search", {"query": "orders", "outcome": "failed"}, "outcome"),
    ("kb_search", {"query": "orders", "since": "last tuesday"}, "since"),
    ("kb_search", {"query": "orders", "since": "0001-01-01T00:00+01:00"}, "out of range"),
    ("kb_lessons", {"error": "x" * 70_000}, "at most 64000 characters"),
    ("kb_lessons", {"error": "   "}, "the error text is empty"),
    ("kb_lessons", {}, "error"),
    ("kb_nothing", {}, "kb_nothing"),
]


def test_bad_arguments_are_tool_errors_and_the_server_keeps_serving(
        connect: Connect, world: World) -> None:
    """Unknown ids, paths outside, no-word queries, oversized or mistyped arguments are tool
    errors with a message, and a good call right after each one still answers."""
    async def body(session: ClientSession) -> list[tuple[str, list[tuple[str, str]]]]:
        seen = []
        for tool, arguments, _ in BAD_CALLS:
            bad = await call(session, tool, **arguments)
            good = await call(session, "kb_search", query="TS2345")
            seen.append((error_text(bad), ids(good)))
        return seen

    seen = run(connect, body)
    for (tool, _, expected), (message, after) in zip(BAD_CALLS, seen, strict=True):
        assert expected in message, (tool, message)
        assert "could not answer" not in message, (tool, message)  # the caller's mistake
        assert after == [("lesson", world.lesson), ("diary", world.diaries["types"].id)]


def test_an_unknown_resource_is_an_error_and_the_server_keeps_serving(
        connect: Connect, world: World) -> None:
    """Reading ``diary://`` of an unknown id fails with a protocol error; the next read works."""
    async def body(session: ClientSession) -> tuple[str, str]:
        with pytest.raises(MCPError) as raised:
            await session.read_resource("diary://kh-00000000000000000000")
        read = await session.read_resource(f"diary://{world.diaries['types'].id}")
        content = read.contents[0]
        assert isinstance(content, TextResourceContents)
        return str(raised.value), content.text

    message, text = run(connect, body)
    assert "no diary or lesson" in message
    assert world.diaries["types"].id in text


def test_a_session_writes_nothing_to_the_knowledge_base(connect: Connect, world: World) -> None:
    """Searches, fetches, error matches and reads leave every file of the root unchanged."""
    before = snapshot(world.root)

    async def body(session: ClientSession) -> None:
        await call(session, "kb_search", query="orders")
        await call(session, "kb_fetch", id=world.diaries["types"].id)
        await call(session, "kb_lessons", error=NEW_TS_ERROR)
        await session.read_resource(f"diary://{world.lesson}")

    run(connect, body)
    assert snapshot(world.root) == before


@pytest.mark.parametrize("header", [None, "Bearer wrong-token", f"Basic {TOKEN}", TOKEN])
def test_http_without_the_token_gets_401(world: World, header: str | None) -> None:
    """A request to /mcp without ``Authorization: Bearer <token>`` is refused with 401."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if header is not None:
        headers["Authorization"] = header
    response = httpx.post(world.url, headers=headers, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_the_bearer_scheme_is_read_in_any_case(world: World) -> None:
    """``Authorization: bearer <token>`` is the token too: a scheme's name is
    case-insensitive (RFC 9110)."""
    async def tools() -> list[str]:
        async with http_session(world.url, None,
                                headers={"Authorization": f"bearer {TOKEN}"}) as session:
            return sorted(tool.name for tool in (await session.list_tools()).tools)

    assert "kb_search" in anyio.run(tools)


def test_an_mcp_client_without_the_token_cannot_connect(world: World) -> None:
    """The SDK client with no token fails to initialize; with the token it lists the tools."""
    async def without() -> None:
        async with http_session(world.url, None):
            pass

    with pytest.raises(Exception) as raised:
        anyio.run(without)
    assert any(isinstance(leaf, MCPError) for leaf in leaves(raised.value))

    async def with_token() -> list[str]:
        async with http_session(world.url, TOKEN) as session:
            return [tool.name for tool in (await session.list_tools()).tools]

    assert "kb_lessons" in anyio.run(with_token)


def test_an_upgrade_is_served_as_http_1_1_and_logs_nothing(tmp_path: Path) -> None:
    """A WebSocket handshake or an ``h2c`` upgrade, with the token or without, gets the
    answer its plain request would (401 without the token) whatever WebSocket library is
    installed, and no log line: a client repeating one cannot fill the log."""
    port = free_port()
    log = tmp_path / "mcp.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen([*SERVER, "--transport", "http", "--port", str(port),
                                    "--dir", str(tmp_path)], stdout=subprocess.DEVNULL,
                                   stderr=stderr,
                                   env={**os.environ, "OTEL_DIARY_MCP_TOKEN": TOKEN})
    host = f"Host: 127.0.0.1:{port}\r\n".encode()
    try:
        for _ in range(600):  # bounded: 30 s
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        for upgrade in (b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                        b"Sec-WebSocket-Version: 13\r\n"
                        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
                        b"Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                        b"HTTP2-Settings: AAMAAABk\r\n"):
            for token, status in ((b"", b"401"),
                                  (f"Authorization: Bearer {TOKEN}\r\n".encode(), b"406")):
                with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
                    sock.sendall(b"GET /mcp HTTP/1.1\r\n" + host + token + upgrade + b"\r\n")
                    line = sock.recv(4096).split(b"\r\n", 1)[0]
                assert line.startswith(b"HTTP/1.1 " + status), (upgrade, token, line)
    finally:
        process.terminate()
        process.wait(30)
    logged = log.read_text().splitlines()
    assert [line for line in logged if not line.startswith("otel-diary mcp is listening")] == []


def test_over_stdio_it_says_on_standard_error_what_it_reads(tmp_path: Path) -> None:
    """An MCP host keeps a stdio server's standard error in its logs: one line there says
    which knowledge base the server reads (the host's environment may not be the shell's),
    and nothing reaches standard output, the protocol's, before a client speaks."""
    done = subprocess.run([*SERVER, "--dir", str(tmp_path)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == f"otel-diary mcp is serving over stdio; it reads {tmp_path}\n"


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_folder_that_is_not_there_is_warned_of(tmp_path: Path, kind: str) -> None:
    """A ``--dir`` or ``OTEL_DIARY_DIR`` that names no folder (a typo in a host's
    settings) is said on standard error, since every answer would be empty; the server
    still starts, for a knowledge base not written yet."""
    root = tmp_path / "nowhere"
    if kind == "file":
        root.write_text("x")
    done = subprocess.run([*SERVER, "--dir", str(root)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "")
    said = "a file" if kind == "file" else "it does not exist yet"
    assert f"warning: {root} is not a folder ({said})" in done.stderr


def test_over_http_it_says_where_it_listens_once_it_does(tmp_path: Path) -> None:
    """Started with ``--transport http``, the server says on standard error, once it
    accepts connections, its URL and the knowledge base it reads."""
    port = free_port()
    process = subprocess.Popen([*SERVER, "--transport", "http", "--port", str(port),
                                "--dir", str(tmp_path)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE,
                               env={**os.environ, "OTEL_DIARY_MCP_TOKEN": TOKEN})
    try:
        assert process.stderr is not None
        ready, _, _ = select.select([process.stderr], [], [], 30)
        line = process.stderr.readline().decode() if ready else "(nothing in 30 s)"
        assert line == (f"otel-diary mcp is listening on http://127.0.0.1:{port}/mcp; "
                        f"it reads {tmp_path}\n")
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        process.terminate()
        process.wait(30)


def test_over_http_a_request_never_finished_is_cut_off_and_agents_get_in(
        world: World) -> None:
    """A client that sends part of a request head and stops is closed at the head deadline
    (10 s), and meanwhile an agent's session is answered; an endless head gets 431."""
    port = int(world.url.split(":")[2].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=15) as stalled:
        stalled.sendall(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")

        async def body(session: ClientSession) -> list[tuple[str, str]]:
            return ids(await call(session, "kb_search", query="TS2345"))

        assert run(lambda: http_session(world.url, TOKEN), body)
        readable, _, _ = select.select([stalled], [], [], 60)  # bounded: 6 times the deadline
        assert readable and stalled.recv(4096) == b"", "a stalled request head was kept open"
    with socket.create_connection(("127.0.0.1", port), timeout=15) as endless:
        endless.sendall(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        with contextlib.suppress(OSError):  # the server may hang up before all is sent
            endless.sendall(b"x-long: " + b"a" * 70_000 + b"\r\n")
        assert endless.recv(4096).startswith(b"HTTP/1.1 431 ")


def test_http_needs_a_token_to_start(tmp_path: Path) -> None:
    """``--transport http`` without OTEL_DIARY_MCP_TOKEN refuses to start, naming the variable."""
    done = subprocess.run([*SERVER, "--transport", "http", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "OTEL_DIARY_MCP_TOKEN" in done.stderr


def test_over_http_a_port_in_use_is_named_and_it_exits_1(tmp_path: Path) -> None:
    """A port another process listens on: one line of the command's own names the address,
    after uvicorn's saying why, and the exit code is 1, as for ``serve``."""
    with socket.create_server(("127.0.0.1", 0)) as other:
        port = other.getsockname()[1]
        done = subprocess.run([*SERVER, "--transport", "http", "--port", str(port),
                               "--dir", str(tmp_path)], capture_output=True, text=True,
                              env={**os.environ, "OTEL_DIARY_MCP_TOKEN": "t" * 24},
                              timeout=60)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert "address already in use" in lines[0]
    assert lines[-1] == f"otel-diary mcp: cannot listen on 127.0.0.1 port {port}"
    assert "is listening" not in done.stderr


def test_without_the_mcp_extra_the_command_says_which_to_install(tmp_path: Path) -> None:
    """With the SDK and the web server it brings not importable (``pip install otel-diary``
    alone), ``otel-diary mcp`` names the extra to install."""
    code = ("import sys; sys.modules['mcp'] = sys.modules['uvicorn'] = None\n"
            "from otel_diary.cli import main\n"
            f"sys.exit(main(['mcp', '--dir', {str(tmp_path)!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "otel-diary[mcp]" in done.stderr


def test_a_diary_written_while_the_server_runs_is_found(tmp_path: Path) -> None:
    """A server started on a live app's folder finds a diary the app writes afterwards."""
    root = tmp_path / "live"
    build_knowledge_base(root)

    async def body() -> tuple[list[tuple[str, str]], list[tuple[str, str]], str]:
        async with stdio_session([*SERVER, "--dir", str(root)]) as session:
            before = ids(await call(session, "kb_search", query="frobnicator"))
            pipeline = kb_pipeline(root)
            late = write(pipeline, task_record(9, "T-900", title="Polish the frobnicator"))
            pipeline.close()
            after = ids(await call(session, "kb_search", query="frobnicator"))
            return before, after, late.id

    before, after, late = anyio.run(body)
    assert before == []
    assert after == [("diary", late)]
