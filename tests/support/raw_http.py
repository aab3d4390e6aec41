"""An HTTP server on loopback that answers in raw bytes, part of them a byte at a time:
for clients that must not wait on a server that stalls, or believe what it sends."""

from __future__ import annotations

import socket
import threading
import time

TRICKLE_EVERY_S = 0.05
"""The pause before each trickled byte."""


class RawServer:
    """Answers one request (read whole) with ``at_once``, then ``trickled`` a byte at a
    time (stopping when the client hangs up), then ``then``. ``request`` is what came."""

    def __init__(self, at_once: bytes, trickled: bytes = b"", then: bytes = b"") -> None:
        self.answer = (at_once, trickled, then)
        self.trickled = 0
        self.request = b""
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
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                body += connection.recv(65536)
            self.request = head + b"\r\n\r\n" + body
            at_once, trickled, then = self.answer
            try:
                connection.sendall(at_once)
                for byte in trickled:
                    time.sleep(TRICKLE_EVERY_S)
                    connection.sendall(bytes([byte]))
                    self.trickled += 1
                connection.sendall(then)
            except OSError:
                pass  # the client hung up

    def finish(self) -> None:
        self._thread.join(30)
        self._listener.close()


def head(status: int, **headers: str | int) -> bytes:
    """A status line and headers (``content_length=3`` is ``content-length: 3``)."""
    lines = [f"HTTP/1.1 {status} X"] + [f"{name.replace('_', '-')}: {value}"
                                        for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()
