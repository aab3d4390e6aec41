"""The HTTP connection guard under uvicorn: stalled request bodies at the connection cap."""

from __future__ import annotations

import asyncio
import select
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from otel_diary.counters import Counters
from otel_diary.receiver.guard import guarded_protocol
from tests.support.loopback import Receive, Scope, Send, read_body, serve_asgi

CAP = 20
STALLED_HEAD = (b"POST /v1/traces HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                b"content-length: 100000\r\n\r\nx")  # one byte of the body, then nothing


async def _echo_size(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers with the body's size, after a pause as a decoder thread would take."""
    size = str(len(await read_body(receive))).encode()
    await asyncio.sleep(0.05)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"%d" % len(size))]})
    await send({"type": "http.response.body", "body": size})


@contextmanager
def _guarded(evict_after_s: float, counters: Counters,
             max_header_bytes: int = 65536) -> Iterator[tuple[str, int]]:
    protocol = guarded_protocol(header_timeout_s=120, body_timeout_s=120,
                                max_header_bytes=max_header_bytes, max_connections=CAP,
                                evict_after_s=evict_after_s, counters=counters)
    with serve_asgi(_echo_size, http=protocol) as url:
        yield url, int(url.rsplit(":", 1)[1])


def _stall_bodies(port: int, stalled: list[socket.socket]) -> bool:
    """Open connections that each stall in their body until one is refused (True); the
    server may not have read the last ones' heads yet, so a few more may be let in."""
    for _ in range(CAP + 10):
        connection = socket.create_connection(("127.0.0.1", port), timeout=10)
        readable, _, _ = select.select([connection], [], [], 0.1)
        if readable and connection.recv(1) == b"":
            connection.close()
            return True
        connection.sendall(STALLED_HEAD)
        stalled.append(connection)
    return False


def test_a_body_stalled_past_the_eviction_age_is_closed_for_a_new_client() -> None:
    """With every connection in a stalled body, a new client closes the body begun
    longest ago and has its request answered."""
    counters = Counters()
    stalled: list[socket.socket] = []
    with _guarded(0.0, counters) as (url, port):
        try:
            for _ in range(CAP):
                connection = socket.create_connection(("127.0.0.1", port), timeout=10)
                connection.sendall(STALLED_HEAD)
                stalled.append(connection)
            answer = httpx.post(url + "/v1/traces", content=b"abc", timeout=10)
            first_closed = stalled[0].recv(1) == b""
        finally:
            for connection in stalled:
                connection.close()
    assert answer.status_code == 200 and answer.text == "3"
    assert first_closed
    assert counters.get("connections_closed_total:reason", "evicted") >= 1


def test_bodies_younger_than_the_eviction_age_are_not_closed() -> None:
    """With every connection in a body begun less than ``evict_after_s`` ago, a new
    connection is refused and every body stays open."""
    counters = Counters()
    stalled: list[socket.socket] = []
    with _guarded(60.0, counters) as (_, port):
        try:
            refused = _stall_bodies(port, stalled)
            still_open = [not select.select([c], [], [], 0)[0] for c in stalled]
        finally:
            for connection in stalled:
                connection.close()
    assert refused
    assert counters.get("connections_closed_total:reason", "refused") >= 1
    assert counters.get("connections_closed_total:reason", "evicted") == len(stalled) - CAP
    assert sum(still_open) == CAP


def test_a_client_that_half_closes_after_its_request_gets_the_answer() -> None:
    """A request sent whole, then the client's side shut for writing: the answer comes,
    then the server closes. A half-close mid-body closes at once."""
    with _guarded(60.0, Counters()) as (_, port):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
            connection.sendall(b"POST /v1/traces HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                               b"content-length: 3\r\n\r\nabc")
            connection.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
            connection.sendall(STALLED_HEAD)
            connection.shutdown(socket.SHUT_WR)
            cut = connection.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"\r\n\r\n3")
    assert cut == b""


def test_a_url_that_comes_in_pieces_is_counted_once() -> None:
    """A 2,000-character URL sent two bytes at a time (the parser reports each piece) is
    counted as 2,000 characters against an 8 KiB head cap, not 16 more per piece."""
    request_line = b"POST /" + b"u" * 2_000 + b" HTTP/1.1\r\n"
    with _guarded(60.0, Counters(), max_header_bytes=8192) as (_, port):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for start in range(0, len(request_line), 2):
                connection.sendall(request_line[start:start + 2])
                time.sleep(0.0005)
            connection.sendall(b"host: 127.0.0.1\r\ncontent-length: 3\r\n\r\nabc")
            answer = connection.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 ")
