"""``otel-diary serve`` against clients that stall, trickle or send an endless head."""

from __future__ import annotations

import select
import selectors
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli.test_serve import Serve
from tests.support.otlp_build import protobuf_body, task_trace

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


def _hung_up(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (readable, then end of stream or a reset)."""
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def _closed_while_trickling(connection: socket.socket, data: bytes) -> int:
    """Send ``data`` a byte every 0.05 s until the server hangs up; how many were sent."""
    for sent in range(len(data)):
        readable, _, _ = select.select([connection], [], [], 0.05)
        if readable and _hung_up(connection):
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
        assert _hung_up(connection)  # closed, not left waiting for the rest
    assert httpx.get(serve.url + "/health", timeout=10).status_code == 200


def test_a_body_trickled_a_byte_at_a_time_is_cut_off(serve: Serve) -> None:
    """A body whose bytes keep coming, but a byte every 0.05 s, is closed once its grace
    has passed: each byte resets no deadline, the body must average 500 bytes a second."""
    with _connect(serve) as connection:
        connection.sendall(HEAD + b"content-length: 100000\r\n\r\n")
        sent = _closed_while_trickling(connection, b"\x0a" * TRICKLE)
    assert sent < TRICKLE
    assert httpx.get(serve.url + "/health", timeout=10).status_code == 200
    assert serve.metrics()['otel_diary_connections_closed_total{reason="body_too_slow"}'] >= 1


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


def _answer_to(serve: Serve, head: bytes, body: bytes) -> bytes:
    """Send a whole request at once; the server's answer up to its first line's end."""
    with _connect(serve) as connection:
        connection.sendall(head + b"content-length: %d\r\n\r\n" % len(body) + body)
        answer = b""
        while b"\r\n" not in answer and (chunk := connection.recv(65536)):
            answer += chunk
    return answer


def test_a_large_head_sent_in_one_piece_gets_431(serve: Serve) -> None:
    """A complete head past the cap (8 KiB here) that arrives in one read is refused as
    one sent a piece at a time is; a head under the cap in one piece is served."""
    body = protobuf_body(task_trace("one-piece-head"))
    before = serve.metrics().get(
        'otel_diary_connections_closed_total{reason="head_too_large"}', 0)
    large = _answer_to(serve, HEAD + b"x-big: " + b"b" * 12_000 + b"\r\n", body)
    assert large.startswith(b"HTTP/1.1 431 ")
    many = _answer_to(serve, HEAD + b"".join(b"x-%d: %s\r\n" % (n, b"v" * 100)
                                             for n in range(100)), body)
    assert many.startswith(b"HTTP/1.1 431 ")
    small = _answer_to(serve, HEAD + b"x-small: " + b"s" * 6_000 + b"\r\n", body)
    assert small.startswith(b"HTTP/1.1 200 ")
    assert serve.metrics()[
        'otel_diary_connections_closed_total{reason="head_too_large"}'] == before + 2


def test_an_ordinary_keep_alive_client_is_not_disturbed(serve: Serve) -> None:
    """Two requests on one connection, each quick, are both answered."""
    with httpx.Client(timeout=10) as client:
        statuses = [client.get(serve.url + "/health").status_code for _ in range(2)]
    assert statuses == [200, 200]


SLOWLORIS = 1500


def test_slowloris_connections_past_the_cap_are_closed_and_others_get_in(
        tmp_path: Path) -> None:
    """1,500 connections that never finish their request head, with a cap of 200 and a
    head deadline far off: the server closes those waiting longest as new ones come, and
    a quick client still gets its health check and its export answered."""
    server = Serve(tmp_path, env={"OTEL_DIARY_SERVE_MAX_CONNECTIONS": "200",
                                  "OTEL_DIARY_SERVE_HEADER_TIMEOUT_S": "120"})
    selector = selectors.DefaultSelector()
    try:
        for _ in range(SLOWLORIS):
            connection = socket.create_connection(("127.0.0.1", server.http_port), timeout=15)
            connection.sendall(HEAD)  # the head never ends
            selector.register(connection, selectors.EVENT_READ)
        health = httpx.get(server.url + "/health", timeout=10).status_code
        export = httpx.post(server.url + "/v1/traces", timeout=10,
                            content=protobuf_body(task_trace("T-busy-door")),
                            headers={"content-type": "application/x-protobuf"}).status_code
        closed = 0
        for _ in range(100):  # bounded: until the server's closings have all arrived
            for key, _ in selector.select(timeout=0.1):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if _hung_up(sock):
                    selector.unregister(sock)
                    sock.close()
                    closed += 1
            if closed >= SLOWLORIS - 200:
                break
        evicted = server.metrics().get('otel_diary_connections_closed_total{reason="evicted"}', 0)
    finally:
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()
        assert server.stop() == 0
    assert health == 200 and export == 200
    assert closed >= SLOWLORIS - 200
    assert evicted >= SLOWLORIS - 200


def test_an_idle_keep_alive_connection_is_closed_at_the_idle_timeout(tmp_path: Path) -> None:
    """A connection left idle after its request is closed at the idle timeout (0.5 s
    here, well before uvicorn's own 5 s)."""
    server = Serve(tmp_path, env={"OTEL_DIARY_SERVE_IDLE_TIMEOUT_S": "0.5"})
    try:
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=15) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            answer = b""
            closed = False
            for _ in range(30):  # bounded: 3 s, six times the idle timeout
                readable, _, _ = select.select([sock], [], [], 0.1)
                if not readable:
                    continue
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    closed = True
                    break
                answer += chunk
    finally:
        assert server.stop() == 0
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert closed


@pytest.mark.parametrize("upgrade", [
    b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
    b"Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABk\r\n"],
    ids=["websocket", "h2c"])
def test_an_upgrade_is_ignored_and_the_request_served_as_http_1_1(
        serve: Serve, upgrade: bytes) -> None:
    """A WebSocket handshake or an ``h2c`` upgrade (``curl --http2``) is answered as the
    HTTP/1.1 request it also is, whatever WebSocket library is installed, and logs nothing:
    a client repeating it cannot fill the log."""
    before = serve.stderr.read_text()
    for path, status in ((b"/v1/traces", b"405"), (b"/health", b"200")):
        with _connect(serve) as sock:
            sock.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + upgrade + b"\r\n")
            line = sock.recv(4096).split(b"\r\n", 1)[0]
        assert line.startswith(b"HTTP/1.1 " + status), line
    assert serve.stderr.read_text() == before
