"""MCP sessions with ``otel-diary mcp`` through the official client SDK, for tests.

Usage::

    async with stdio_session([sys.executable, "-m", "otel_diary.cli", "mcp", "--dir", root]) as s:
        tools = await s.list_tools()

    with http_server(root, token="t") as url:      # a real server process on 127.0.0.1
        async with http_session(url, token="t") as s: ...
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx
import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.support.loopback import free_port

SERVER = [sys.executable, "-m", "otel_diary.cli", "mcp"]
"""The server command, as a client configuration would name it (``otel-diary mcp``)."""


@asynccontextmanager
async def stdio_session(command: Sequence[str],
                        env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """A session with the server ``command`` starts, over its standard input and output."""
    params = StdioServerParameters(command=command[0], args=list(command[1:]),
                                   env={**os.environ, **(env or {})})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(url: str, token: str | None,
                       headers: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """A session over streamable HTTP at ``url``, sending ``token`` as a bearer token (or
    the ``headers`` given)."""
    if headers is None:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as client, \
            streamable_http_client(url, http_client=client) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextmanager
def http_server(root: Path, token: str) -> Iterator[str]:
    """``otel-diary mcp --transport http`` over ``root`` in a process; yields its MCP URL."""
    port = free_port()
    with http_process([*SERVER, "--transport", "http", "--port", str(port), "--dir", str(root)],
                      {"OTEL_DIARY_MCP_TOKEN": token}, port) as url:
        yield url


@contextmanager
def http_process(command: Sequence[str], env: dict[str, str], port: int) -> Iterator[str]:
    """The HTTP server ``command`` starts (listening on ``port``); yields its MCP URL."""
    process = subprocess.Popen(list(command), env={**os.environ, **env},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                error = process.stderr.read() if process.stderr else b""
                raise RuntimeError(f"the MCP server exited: {error!r}")
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the MCP server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
