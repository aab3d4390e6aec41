"""Slow, idle and oversized HTTP clients: uvicorn's httptools protocol with deadlines and caps.

uvicorn closes an idle keep-alive connection, but a client that sends a byte now and
then never is idle: it can hold a connection, and a request's memory, forever. The
protocol here closes a connection whose request head is not complete within
``header_timeout_s`` of its start (or of the connection's, for the first request), whose
body stops arriving for ``body_timeout_s`` or arrives slower than :data:`MIN_BODY_RATE`
once ``body_timeout_s`` has passed (as Apache's ``mod_reqtimeout`` does: a byte now and
then does not keep a body open), and answers 431 to a head larger than
``max_header_bytes``, whether it arrives a byte at a time or in one read (the parser
counts the request line and each header field as it reads them). Its work per read is a
comparison and an addition: no timer is re-armed per chunk.

Past ``max_connections`` open connections, a new one closes the connection that has
waited longest without a request in progress (its head not complete yet, or idle between
requests), so many slow or idle clients cannot lock a quick one out. When every
connection has a request in progress, it closes the one whose body began longest ago,
once that was ``evict_after_s`` (:data:`EVICT_AFTER_S`) ago, as the gRPC receiver
cancels the call waiting longest for its message: clients that send a head and then
stall their bodies cannot lock others out either. Only when every body began less than
that ago is the new connection refused. The cap stays under the process's open-file
limit: out of descriptors, a server could accept no one at all.
Each closing is counted (``connections_closed_total`` by reason) and logged at most
every few seconds.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from otel_diary.counters import Counters

logger = logging.getLogger("otel_diary")

_HEAD_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                   b"content-type: text/plain; charset=utf-8\r\ncontent-length: 32\r\n"
                   b"connection: close\r\n\r\nrequest header fields too large\n")
LOG_EVERY_S = 10.0
"""Closings are logged at most this often (each is counted)."""
EVICT_AFTER_S = 1.0
"""At the cap, a request body that began this long ago may be cut off to make room; its
client is told nothing and sends it again (an exporter's retry is then the newest)."""
MIN_BODY_RATE = 500
"""Bytes per second a request body must average once ``body_timeout_s`` has passed: each
500 bytes received gives it a second more (a 20 MiB body may take 11.6 hours at that
rate; a body trickled a byte a second is closed soon after ``body_timeout_s``)."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` that closes slow requests, refuses huge heads and keeps
    the connections open under a cap."""

    header_timeout_s = 10.0
    body_timeout_s = 30.0
    max_header_bytes = 64 * 1024
    max_connections = 1000
    evict_after_s = EVICT_AFTER_S
    counters: ClassVar[Counters] = Counters()
    waiting: ClassVar[dict[GuardedHttpToolsProtocol, None]] = {}
    """Connections without a request in progress, longest waiting first (per class made
    by :func:`guarded_protocol`, so per server)."""
    reading: ClassVar[dict[GuardedHttpToolsProtocol, None]] = {}
    """Connections whose request body is arriving, in the order their bodies began."""
    _logged_at: ClassVar[list[float]] = [0.0]
    counted = ""
    """Where the closings are counted, for the log line: "" when nowhere to be seen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._head_bytes = 0
        self._head_parsed = 0
        self._in_body = False
        self._last_body = 0.0
        self._body_start = 0.0
        self._body_bytes = 0
        self._guard: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_timeout_s, self._head_late)
        if len(self.connections) > self.max_connections and not self._make_room():
            return
        self.waiting[self] = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.waiting.pop(self, None)
        self.reading.pop(self, None)
        super().connection_lost(exc)

    def eof_received(self) -> bool | None:  # type: ignore[override]
        """A client may half-close once its request is sent (``shutdown(SHUT_WR)``): the
        connection stays open for the answer, then closes. Otherwise nothing more can
        come, and it closes now."""
        cycle = self.cycle
        if self._in_head or self._in_body or cycle is None or cycle.response_complete:
            return None
        cycle.keep_alive = False
        return True

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        elif self._in_body:
            self._last_body = self.loop.time()
            self._body_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > self.max_header_bytes:
            self._refuse_head()

    def _unsupported_upgrade_warning(self) -> None:
        """An ``Upgrade`` (``h2c``, ``websocket``: the server is given no WebSocket
        protocol) is ignored, as HTTP lets a server do, and the request is served as
        HTTP/1.1: not two warnings logged for each such request a client sends."""

    def send_400_response(self, msg: str) -> None:
        if self._head_parsed > self.max_header_bytes:  # raised by on_url or on_header
            self._refuse_head()
        else:
            super().send_400_response(msg)

    def _refuse_head(self) -> None:
        if not self.transport.is_closing():
            self.transport.write(_HEAD_TOO_LARGE)
            self._close("head_too_large")
        self._disarm()

    # -- parser callbacks -------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_parsed = 16  # the method, the version and the line ends around the URL
        if not self._in_head:  # the next request on a kept-alive connection
            self._in_head = True
            self._head_bytes = 0
            self._arm(self.header_timeout_s, self._head_late)

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))  # called once per piece of a URL that came in pieces
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)  # with ": " and CRLF
        super().on_header(name, value)

    def _count_head(self, size: int) -> None:
        """Count a part of the head parsed; past the cap, stop the parser (uvicorn then
        calls :meth:`send_400_response`, which answers 431)."""
        self._head_parsed += size
        if self._head_parsed > self.max_header_bytes:
            raise httptools.HttpParserError("request head too large")

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._in_body = True
        self._last_body = self._body_start = self.loop.time()
        self._body_bytes = 0
        self.waiting.pop(self, None)
        self.reading[self] = None
        self._arm(self.body_timeout_s, self._body_late)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_body = False
        self.reading.pop(self, None)
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self.waiting[self] = None  # idle until its next request: the newest waiting

    # -- deadlines and caps -----------------------------------------------------------------

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
            self._close("header_timeout")

    def _body_late(self) -> None:
        self._guard = None
        if not self._in_body or self.transport.is_closing():
            return
        now = self.loop.time()
        idle = now - self._last_body
        if idle >= self.body_timeout_s:
            self._close("body_timeout")
            return
        # The body's own deadline: its grace, then a second per MIN_BODY_RATE bytes.
        deadline = self._body_start + self.body_timeout_s + self._body_bytes / MIN_BODY_RATE
        if now >= deadline:
            self._close("body_too_slow")
        else:
            self._arm(min(self.body_timeout_s - idle, deadline - now), self._body_late)

    def _make_room(self) -> bool:
        """At the cap: close the longest-waiting connection, or else the oldest body begun
        ``evict_after_s`` ago (True), or this one when every other is busy with a
        request (False)."""
        if self.waiting:
            next(iter(self.waiting))._close("evicted")
            return True
        if self.reading:
            oldest = next(iter(self.reading))
            if self.loop.time() - oldest._body_start >= self.evict_after_s:
                oldest._close("evicted")
                return True
        self._close("refused")
        return False

    def _close(self, reason: str) -> None:
        self.waiting.pop(self, None)
        self.reading.pop(self, None)
        self.transport.close()
        self.counters.add("connections_closed_total:reason", reason)
        now = time.monotonic()
        if now - self._logged_at[0] >= LOG_EVERY_S:
            self._logged_at[0] = now
            logger.warning("otel-diary closed an HTTP connection (%s); more may follow "
                           "unlogged%s", reason, self.counted,
                           extra={"fields": {"event": "serve.connection_closed",
                                             "reason": reason}})


FILES_KEPT = 128
"""Open files the connection cap leaves to everything else in the process."""
BACKLOG = 2048
"""Connections waiting to be accepted (uvicorn's default); asyncio accepts up to this many
at once, before the connections closed to make room for them release their files."""


def connection_limits(wanted: int) -> tuple[int, int]:
    """The connection cap and listen backlog to use: ``wanted`` and :data:`BACKLOG`, or
    less when the process may not open that many files (a server out of descriptors
    stops accepting anyone, and the cap could no longer make room)."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):  # pragma: no cover - no such limit here
        return wanted, BACKLOG
    if soft == resource.RLIM_INFINITY or soft - FILES_KEPT >= wanted + BACKLOG:
        return wanted, BACKLOG
    room = max((soft - FILES_KEPT) // 2, 1)
    return min(wanted, room), min(BACKLOG, room)


def guarded_protocol(*, header_timeout_s: float = GuardedHttpToolsProtocol.header_timeout_s,
                     body_timeout_s: float = GuardedHttpToolsProtocol.body_timeout_s,
                     max_header_bytes: int = GuardedHttpToolsProtocol.max_header_bytes,
                     max_connections: int = GuardedHttpToolsProtocol.max_connections,
                     evict_after_s: float = EVICT_AFTER_S,
                     counters: Counters | None = None) -> type[GuardedHttpToolsProtocol]:
    """The protocol class with these limits (``serve``'s defaults unless given), for
    ``uvicorn.Config(http=...)``; give its server the backlog :func:`connection_limits`
    says. Closings are counted in ``counters`` (the log line names the metric then)."""
    return type("GuardedHttpToolsProtocol", (GuardedHttpToolsProtocol,), {
        "header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s,
        "max_header_bytes": max_header_bytes,
        "max_connections": connection_limits(max_connections)[0],
        "evict_after_s": evict_after_s,
        "counters": counters if counters is not None else Counters(),
        "counted": ", see otel_diary_connections_closed_total" if counters is not None else "",
        "waiting": {}, "reading": {}, "_logged_at": [0.0]})
