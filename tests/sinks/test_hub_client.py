"""The hub client against a real server on loopback that answers too slowly to wait for."""

from __future__ import annotations

import socket
import threading
import time

from otel_diary.sinks.hub.client import HubClient, Outcome

BODY_BYTES = 120
"""What the trickling server promises; at one byte per 0.05 s it takes 6 s to send."""


class TricklingHub:
    """Answers one POST with its headers at once, then its body one byte at a time."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.sent = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        connection, _ = self._listener.accept()
        with connection:
            request = b""
            while b"\r\n\r\n" not in request:
                request += connection.recv(65536)
            head, _, body = request.partition(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            while len(body) < length:
                body += connection.recv(65536)
            connection.sendall(f"HTTP/1.1 {self.status} X\r\ncontent-type: text/plain\r\n"
                               f"content-length: {BODY_BYTES}\r\n\r\n".encode())
            try:
                for _ in range(BODY_BYTES):
                    connection.sendall(b"x")
                    self.sent += 1
                    time.sleep(0.05)
            except OSError:
                pass  # the client hung up

    def finish(self) -> None:
        self._thread.join(30)
        self._listener.close()


def test_a_trickled_answer_is_cut_off_at_the_deadline() -> None:
    """Headers at once, then a byte at a time: the client stops at its deadline."""
    hub = TricklingHub(200)
    client = HubClient(hub.url, timeout_s=0.5)
    try:
        attempt = client.send("kh-1", {"path": "diaries/x.md"})
    finally:
        client.close()
        hub.finish()
    assert attempt.outcome is Outcome.DELIVERED  # the status came before the stall
    assert hub.sent < BODY_BYTES


def test_a_trickled_error_answer_is_cut_off_and_retried() -> None:
    """A 503 whose body trickles is still a retry, decided at the deadline."""
    hub = TricklingHub(503)
    client = HubClient(hub.url, timeout_s=0.5)
    try:
        attempt = client.send("kh-2", {"path": "diaries/y.md"})
    finally:
        client.close()
        hub.finish()
    assert attempt.outcome is Outcome.RETRY and attempt.status == 503
    assert "cut off at the deadline" in attempt.detail
    assert hub.sent < BODY_BYTES
