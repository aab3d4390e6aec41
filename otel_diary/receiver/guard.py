"""Slow and oversized HTTP clients: uvicorn's httptools protocol with deadlines and a cap.

uvicorn closes an idle keep-alive connection, but a client that sends a byte now and
then never is idle: it can hold a connection, and a request's memory, forever. The
protocol here closes a connection whose request head is not complete within
``header_timeout_s`` of its start (or of the connection's, for the first request), whose
body stops arriving for ``body_timeout_s``, and answers 431 to a head larger than
``max_header_bytes``. Its work per read is a comparison and an addition: no timer is
re-armed per chunk.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_HEAD_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                   b"content-type: text/plain; charset=utf-8\r\ncontent-length: 32\r\n"
                   b"connection: close\r\n\r\nrequest header fields too large\n")


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` that closes slow requests and refuses huge heads."""

    header_timeout_s = 10.0
    body_timeout_s = 30.0
    max_header_bytes = 64 * 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._head_bytes = 0
        self._in_body = False
        self._last_body = 0.0
        self._guard: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_timeout_s, self._head_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        elif self._in_body:
            self._last_body = self.loop.time()
        super().data_received(data)
        if self._in_head and self._head_bytes > self.max_header_bytes:
            if not self.transport.is_closing():
                self.transport.write(_HEAD_TOO_LARGE)
                self.transport.close()
            self._disarm()

    # -- parser callbacks -------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if not self._in_head:  # the next request on a kept-alive connection
            self._in_head = True
            self._head_bytes = 0
            self._arm(self.header_timeout_s, self._head_late)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._in_body = True
        self._last_body = self.loop.time()
        self._arm(self.body_timeout_s, self._body_late)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_body = False
        self._disarm()
        super().on_message_complete()

    # -- deadlines --------------------------------------------------------------------------

    def _arm(self, delay: float, callback: Any) -> None:
        self._disarm()
        self._guard = self.loop.call_later(delay, callback)

    def _disarm(self) -> None:
        if self._guard is not None:
            self._guard.cancel()
            self._guard = None

    def _head_late(self) -> None:
        self._guard = None
        if self._in_head and not self.transport.is_closing():
            self.transport.close()

    def _body_late(self) -> None:
        self._guard = None
        if not self._in_body or self.transport.is_closing():
            return
        idle = self.loop.time() - self._last_body
        if idle < self.body_timeout_s:
            self._arm(self.body_timeout_s - idle, self._body_late)
        else:
            self.transport.close()


def guarded_protocol(*, header_timeout_s: float, body_timeout_s: float,
                     max_header_bytes: int) -> type[GuardedHttpToolsProtocol]:
    """The protocol class with these limits, for ``uvicorn.Config(http=...)``."""
    return type("GuardedHttpToolsProtocol", (GuardedHttpToolsProtocol,), {
        "header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s,
        "max_header_bytes": max_header_bytes})
