"""Real HTTP servers on 127.0.0.1 for tests: an ASGI app under uvicorn in a thread.

Usage::

    with serve_asgi(app) as base_url:
        httpx.get(base_url + "/health")

``ChatServer`` is a small OpenAI-compatible chat-completions endpoint whose behaviour a
test scripts (answer, status code, hang) and which records every request it received.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_asgi(app: ASGIApp, port: int | None = None, **options: Any) -> Iterator[str]:
    """Run ``app`` on 127.0.0.1 in a thread, with more ``uvicorn.Config`` options if
    given; yields its base URL; stops it on exit."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            lifespan="off", timeout_graceful_shutdown=1, **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"loopback-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"loopback server on port {port} did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(5)


async def read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def send_json(send: Send, status: int, payload: object,
                    headers: dict[str, str] | None = None) -> None:
    body = json.dumps(payload).encode()
    raw_headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(body)).encode())]
    raw_headers += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


async def send_events(send: Send, events: Iterable[str], end: str = "") -> None:
    """A server-sent event stream: each of ``events`` (its lines, with the blank line
    that ends it), then ``end``."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    for event in events:
        await send({"type": "http.response.body", "more_body": True, "body": event.encode()})
    await send({"type": "http.response.body", "body": end.encode()})


@dataclass
class Recorded:
    """One request a test server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @classmethod
    async def receive(cls, scope: Scope, receive: Receive) -> Recorded:
        """Read the whole request an ASGI app is handling."""
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        return cls(scope["method"], scope["path"], headers, await read_body(receive))


@dataclass(frozen=True)
class ToolCall:
    """A scripted answer asking the client to call tool ``name`` with ``arguments`` (JSON)."""

    name: str
    arguments: str = "{}"


@dataclass
class ChatServer:
    """An OpenAI-compatible ``POST /v1/chat/completions`` endpoint scripted by a test, and
    on the same script the Gemini API's ``POST /<version>/models/<model>:generateContent``
    and the Anthropic Messages API's ``POST /v1/messages``.

    Each request takes the next entry of ``script`` (the last one repeats): a string is
    the answer's content, an int an error status, ``"hang"`` sleeps ``hang_s`` seconds,
    a :class:`ToolCall` asks for a tool call. Every answer comes ``delay_s`` seconds
    after its request (a slow model). A request with ``"stream": true`` gets its answer as
    server-sent chunks, the usage in a last chunk when asked (``stream_options``).
    """

    script: list[str | int | ToolCall] = field(default_factory=lambda: ["A useful insight."])
    model: str = "test-model"
    hang_s: float = 30.0
    delay_s: float = 0.0
    requests: list[Recorded] = field(default_factory=list)
    input_tokens: int = 11
    output_tokens: int = 7
    in_flight: int = 0
    max_in_flight: int = 0
    """The most requests this server was answering at one time."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.requests.append(await Recorded.receive(scope, receive))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self._answer(scope, send)
        finally:
            self.in_flight -= 1

    async def _answer(self, scope: Scope, send: Send) -> None:
        step = self.script[min(len(self.requests) - 1, len(self.script) - 1)]
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        path = scope["path"]
        gemini, anthropic = path.endswith(":generateContent"), path.endswith("/v1/messages")
        if not (gemini or anthropic or path.endswith("/chat/completions")):
            await send_json(send, 404, {"error": {"message": "not found"}})
        elif step == "hang":
            await asyncio.sleep(self.hang_s)
            await send_json(send, 504, {"error": {"message": "hung"}})
        elif isinstance(step, int):
            await send_json(send, step, {"error": {"message": f"status {step}",
                                                   "type": "server_error"}})
        elif gemini:
            await send_json(send, 200, self._gemini(step))
        elif anthropic:
            await self._anthropic(send, step)
        else:
            message: dict[str, Any] = {"role": "assistant", "content": step}
            finish = "stop"
            if isinstance(step, ToolCall):
                finish = "tool_calls"
                message = {"role": "assistant", "content": None, "tool_calls": [{
                    "id": f"call-{len(self.requests)}", "type": "function",
                    "function": {"name": step.name, "arguments": step.arguments}}]}
            usage = {"prompt_tokens": self.input_tokens,
                     "completion_tokens": self.output_tokens,
                     "total_tokens": self.input_tokens + self.output_tokens}
            answer = {"id": f"chatcmpl-{len(self.requests)}", "created": int(time.time()),
                      "model": self.model}
            asked = self.requests[-1].json()
            if asked.get("stream"):
                with_usage = (asked.get("stream_options") or {}).get("include_usage")
                await self._stream(send, answer, message, finish, usage if with_usage else None)
                return
            await send_json(send, 200, {
                **answer, "object": "chat.completion",
                "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                "usage": usage,
            })

    def _gemini(self, step: str | ToolCall) -> dict[str, Any]:
        """The Gemini API's answer: the content's text, or a function call."""
        part: dict[str, Any] = {"text": step}
        if isinstance(step, ToolCall):
            part = {"functionCall": {"id": f"call-{len(self.requests)}", "name": step.name,
                                     "args": json.loads(step.arguments)}}
        return {"candidates": [{"index": 0, "finishReason": "STOP",
                                "content": {"role": "model", "parts": [part]}}],
                "usageMetadata": {"promptTokenCount": self.input_tokens,
                                  "candidatesTokenCount": self.output_tokens,
                                  "totalTokenCount": self.input_tokens + self.output_tokens},
                "modelVersion": self.model, "responseId": f"response-{len(self.requests)}"}

    async def _anthropic(self, send: Send, step: str | ToolCall) -> None:
        """The Anthropic Messages API's answer (the text, or a tool use), as server-sent
        events when the request streams."""
        n = len(self.requests)
        block: dict[str, Any] = {"type": "text", "text": step}
        opened: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": step}
        stop = "end_turn"
        if isinstance(step, ToolCall):
            block = {"type": "tool_use", "id": f"toolu_{n}", "name": step.name,
                     "input": json.loads(step.arguments)}
            opened = {**block, "input": {}}
            delta, stop = {"type": "input_json_delta", "partial_json": step.arguments}, "tool_use"
        message: dict[str, Any] = {"id": f"msg_{n}", "type": "message", "role": "assistant",
                                   "model": self.model, "stop_sequence": None}
        usage = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}
        if not self.requests[-1].json().get("stream"):
            await send_json(send, 200, {**message, "content": [block], "stop_reason": stop,
                                        "usage": usage})
            return
        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                  "usage": {**usage, "output_tokens": 0}}},
            {"type": "content_block_start", "index": 0, "content_block": opened},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
             "usage": {"output_tokens": self.output_tokens}},
            {"type": "message_stop"}]
        await send_events(send, (f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                                 for event in events))

    @staticmethod
    async def _stream(send: Send, answer: dict[str, Any], message: dict[str, Any],
                      finish: str, usage: dict[str, int] | None) -> None:
        chunk = {**answer, "object": "chat.completion.chunk"}
        if message.get("tool_calls"):  # a delta's calls say where they go
            message = {**message, "tool_calls": [{"index": n, **call} for n, call
                                                 in enumerate(message["tool_calls"])]}
        events = [{**chunk, "choices": [{"index": 0, "delta": message,
                                         "finish_reason": None}]},
                  {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}]
        if usage is not None:
            events.append({**chunk, "choices": [], "usage": usage})
        await send_events(send, (f"data: {json.dumps(event)}\n\n" for event in events),
                          "data: [DONE]\n\n")


HubStep = int | str | tuple[int, dict[str, str]]


@dataclass
class HubServer:
    """A knowledge hub's ``POST /v1/kb/edit`` scripted by a test, like a real hub would be.

    Each request takes the next entry of ``script`` (the last one repeats): an int is the
    status answered, ``(status, headers)`` adds headers (e.g. ``Retry-After``), ``"hang"``
    sleeps ``hang_s`` seconds without answering. A 2xx answer stores the document under
    its ``Idempotency-Key``, so a redelivery replaces it instead of adding a second one.
    """

    script: list[HubStep] = field(default_factory=lambda: [200])
    hang_s: float = 30.0
    requests: list[Recorded] = field(default_factory=list)
    received_at: list[float] = field(default_factory=list)
    """``time.monotonic()`` at which each request arrived."""
    documents: dict[str, Any] = field(default_factory=dict)
    """Stored documents by idempotency key."""
    acknowledged: list[str] = field(default_factory=list)
    """The idempotency key of every request answered 2xx, in order (duplicates included)."""
    released: bool = False
    """Set by :meth:`release`: hanging requests end now (so the server can stop)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = await Recorded.receive(scope, receive)
        self.received_at.append(time.monotonic())
        self.requests.append(request)
        step = self.script[min(len(self.requests) - 1, len(self.script) - 1)]
        if scope["method"] != "POST" or scope["path"] != "/v1/kb/edit":
            await send_json(send, 404, {"error": "not found"})
            return
        if step == "hang":
            deadline = time.monotonic() + self.hang_s
            while not self.released and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            return  # the client gave up long ago; closing without an answer
        status, extra = (step, {}) if isinstance(step, int) else (
            step if isinstance(step, tuple) else (500, {}))
        if 200 <= status < 300:
            key = request.headers.get("idempotency-key", f"anonymous-{len(self.requests)}")
            self.documents[key] = request.json()
            self.acknowledged.append(key)
            await send_json(send, status, {"ok": True, "id": key}, extra)
        else:
            await send_json(send, status, {"error": f"hub says {status}"}, extra)

    def posts(self) -> list[Recorded]:
        """Requests that reached the edit endpoint."""
        return [r for r in self.requests if r.path == "/v1/kb/edit"]

    def release(self) -> None:
        """End every hanging request (before stopping the server)."""
        self.released = True


@pytest.fixture
def hub() -> Iterator[tuple[HubServer, str]]:
    """A :class:`HubServer` on 127.0.0.1, and its base URL."""
    server = HubServer()
    with serve_asgi(server) as url:
        try:
            yield server, url
        finally:
            server.release()


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass; returns its last value."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return predicate()
        time.sleep(0.01)
    return True
