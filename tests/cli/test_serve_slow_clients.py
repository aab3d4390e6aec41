"""``otel-diary serve`` against clients that stall, trickle or send an endless head."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator

import httpx
import pytest

from tests.cli.test_serve import Serve

HEAD = b"POST /v1/traces HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-protobuf\r\n"
TRICKLE = 400
"""Bytes a trickling client offers, one per 0.05 s: 20 s if nobody stops it."""


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    server = Serve(tmp_path_factory.mktemp("slow"), env={
        "OTEL_DIARY_SERVE_HEADER_TIMEOUT_S": "0.5", "OTEL_DIARY_SERVE_BODY_TIMEOUT_S": "0.5",
        "OTEL_DIARY_SERVE_MAX_HEADER_BYTES": "8192"})
    yield server
    assert server.stop() == 0


def _connect(server: Serve) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.http_port), timeout=15)


def _closed_while_trickling(connection: socket.socket, data: bytes) -> int:
    """Send ``data`` a byte every 0.05 s until the server hangs up; how many were sent."""
    for sent in range(len(data)):
        readable, _, _ = select.select([connection], [], [], 0.05)
        if readable and connection.recv(65536) == b"":
            return sent
        try:
            connection.sendall(data[sent:sent + 1])
        except OSError:
            return sent
    return len(data)


def test_a_trickled_head_is_cut_off(serve: Serve) -> None:
    """A request head sent a byte at a time is closed at the head deadline."""
    with _connect(serve) as connection:
        sent = _closed_while_trickling(connection, HEAD + b"x-slow: " + b"a" * TRICKLE)
    assert sent < len(HEAD) + TRICKLE
    assert httpx.get(serve.url + "/health", timeout=10).status_code == 200


def test_a_stalled_body_is_cut_off(serve: Serve) -> None:
    """A body that stops arriving closes the connection; the server goes on answering."""
    with _connect(serve) as connection:
        connection.sendall(HEAD + b"content-length: 100000\r\n\r\n" + b"\x0a" * 100)
        assert connection.recv(65536) == b""  # closed, not left waiting for the rest
    assert httpx.get(serve.url + "/health", timeout=10).status_code == 200


def test_an_endless_head_gets_431(serve: Serve) -> None:
    """A head past the cap is answered 431 and closed, not buffered without end."""
    with _connect(serve) as connection:
        answer = b""
        try:
            connection.sendall(HEAD)
            for _ in range(64):  # 4 MiB if it were all taken
                connection.sendall(b"x-big: " + b"b" * 65_000 + b"\r\n")
        except OSError:
            pass
        while chunk := connection.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 431 ")


def test_an_ordinary_keep_alive_client_is_not_disturbed(serve: Serve) -> None:
    """Two requests on one connection, each quick, are both answered."""
    with httpx.Client(timeout=10) as client:
        statuses = [client.get(serve.url + "/health").status_code for _ in range(2)]
    assert statuses == [200, 200]
