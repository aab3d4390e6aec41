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
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

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
def serve_asgi(app: ASGIApp, port: int | None = None) -> Iterator[str]:
    """Run ``app`` on 127.0.0.1 in a thread; yields its base URL; stops it on exit."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            lifespan="off", timeout_graceful_shutdown=1)
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


@dataclass
class Recorded:
    """One request a test server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class ChatServer:
    """An OpenAI-compatible ``POST /v1/chat/completions`` endpoint scripted by a test.

    Each request takes the next entry of ``script`` (the last one repeats): a string is
    the answer's content, an int an error status, ``"hang"`` sleeps ``hang_s`` seconds.
    """

    script: list[str | int] = field(default_factory=lambda: ["A useful insight."])
    model: str = "test-model"
    hang_s: float = 30.0
    requests: list[Recorded] = field(default_factory=list)
    input_tokens: int = 11
    output_tokens: int = 7

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.requests.append(Recorded(scope["method"], scope["path"], headers, body))
        step = self.script[min(len(self.requests) - 1, len(self.script) - 1)]
        if not scope["path"].endswith("/chat/completions"):
            await send_json(send, 404, {"error": {"message": "not found"}})
        elif step == "hang":
            await asyncio.sleep(self.hang_s)
            await send_json(send, 504, {"error": {"message": "hung"}})
        elif isinstance(step, int):
            await send_json(send, step, {"error": {"message": f"status {step}",
                                                   "type": "server_error"}})
        else:
            await send_json(send, 200, {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": step}}],
                "usage": {"prompt_tokens": self.input_tokens,
                          "completion_tokens": self.output_tokens,
                          "total_tokens": self.input_tokens + self.output_tokens},
            })
