"""HTTP calls out of the process (the knowledge hub, the reflection model), bounded in
time and in bytes whatever the other side does.

httpx bounds each read and write, not their sum: a server that sends its status line and
headers a byte every half second keeps a call open for good. The connections made here
take each read and write's timeout from what is left of the call's deadline
(:func:`deadline`), so the whole call ends by it, headers and upload included, or soon
after a shutdown that cannot wait cuts it short. Answers are asked for and read as they
are sent (``accept-encoding: identity``, raw bytes): a few kilobytes compressed cannot
inflate to gigabytes before the size cap is checked.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx

WRITE_PIECE = 64 * 1024
"""Bytes written at a time, each within what is left of the deadline."""
IDENTITY = {"accept-encoding": "identity"}
"""Headers asking for an answer as it is, not compressed."""

CUT_CHECK_S = 0.2
"""How often a read waiting on a call that can be cut short looks whether it was."""

_deadline: ContextVar[tuple[float, threading.Event | None] | None] = ContextVar(
    "otel_diary_outbound_deadline", default=None)


@contextmanager
def deadline(seconds: float, cut: threading.Event | None = None) -> Iterator[None]:
    """Calls made in the block end within ``seconds`` (``httpx.TimeoutException``), or
    within :data:`CUT_CHECK_S` of ``cut`` being set (a shutdown that cannot wait)."""
    token = _deadline.set((time.monotonic() + seconds, cut))
    try:
        yield
    finally:
        _deadline.reset(token)


def _left(timeout: float | None, late: type[Exception]) -> float | None:
    """``timeout``, or less when the call's deadline comes sooner (``late`` past it, or
    once the call was cut short)."""
    entry = _deadline.get()
    if entry is None:
        return timeout
    end, cut = entry
    left = end - time.monotonic()
    if left <= 0:
        raise late("past the call's deadline")
    if cut is not None and cut.is_set():
        raise late("the call was cut short")
    return left if timeout is None else min(timeout, left)


def _cuttable(connect: Callable[[], httpcore.NetworkStream]) -> httpcore.NetworkStream:
    """``connect()``; in a call with a deadline, on a thread of its own, waited for in
    slices so that the deadline or a cut ends the wait: the name lookup before a
    connection is bounded by no timeout, and a connection or TLS handshake to a host that
    does not answer cannot be read in slices. The stream it makes after that is closed."""
    entry = _deadline.get()
    if entry is None:
        return connect()
    end, cut = entry
    lock = threading.Lock()
    done = threading.Event()
    outcome: list[httpcore.NetworkStream | BaseException] = []
    given_up = False

    def run() -> None:
        try:
            outcome.append(connect())
        except BaseException as exc:  # handed to the caller
            outcome.append(exc)
        with lock:
            done.set()
            late = given_up
        if late and isinstance(outcome[0], httpcore.NetworkStream):
            outcome[0].close()

    # In the caller's context: its deadline, and OpenTelemetry's instrumentation suppressed.
    threading.Thread(target=contextvars.copy_context().run, args=(run,),
                     name="otel-diary-connect", daemon=True).start()
    while not done.wait(min(CUT_CHECK_S, max(end - time.monotonic(), 0.0))):
        late = time.monotonic() >= end
        if late or (cut is not None and cut.is_set()):
            with lock:
                if not done.is_set():
                    given_up = True
                    raise httpcore.ConnectTimeout("past the call's deadline" if late
                                                  else "the call was cut short")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        entry = _deadline.get()
        if entry is None or entry[1] is None:
            return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))
        # A call that can be cut short waits in short reads (one that timed out has read
        # nothing), looking between them whether it was.
        ends = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = None if ends is None else ends - time.monotonic()
            if wait is not None and wait <= 0:
                raise httpcore.ReadTimeout("timed out")
            left = _left(wait, httpcore.ReadTimeout)
            assert left is not None  # a deadline is set
            try:
                return self._inner.read(max_bytes, min(left, CUT_CHECK_S))
            except httpcore.ReadTimeout:
                if left <= CUT_CHECK_S:
                    raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        # httpcore sends a buffer in a loop, each send with the whole timeout: in pieces,
        # each piece takes what is left, so a server reading slowly cannot stretch it.
        for start in range(0, len(buffer), WRITE_PIECE):
            self._inner.write(buffer[start:start + WRITE_PIECE],
                              _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        left = _left(timeout, httpcore.ConnectTimeout)
        return _Stream(_cuttable(lambda: self._inner.start_tls(ssl_context, server_hostname,
                                                               left)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        left = _left(timeout, httpcore.ConnectTimeout)
        return _Stream(_cuttable(lambda: self._inner.connect_tcp(
            host, port, left, local_address, socket_options)))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None
                            ) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(
            path, _left(timeout, httpcore.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def client(timeout_s: float, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """An httpx client whose calls keep to :func:`deadline`, through the proxies the
    environment names (``HTTPS_PROXY``, ``NO_PROXY``) as any httpx client; it follows no
    redirect. ``transport``, for tests, replaces its connections."""
    made = httpx.Client(timeout=httpx.Timeout(timeout_s), transport=transport,
                        follow_redirects=False)
    if transport is None:
        # httpx takes no network backend: its pools (the direct one and each proxy's,
        # all httpcore connection pools) are given this one.
        for mounted in (made._transport, *made._mounts.values()):
            pool = getattr(mounted, "_pool", None)
            if pool is not None:
                pool._network_backend = _Backend()
    return made


def endpoint(base_url: str, path: str) -> str:
    """``base_url`` with ``path`` at the end of its path (unless already there), its query
    kept after it (``https://x/openai?api-version=1`` + ``/chat/completions``)."""
    parts = urlsplit(base_url)
    base = parts.path.rstrip("/")
    return urlunsplit(parts._replace(path=base if base.endswith(path) else base + path))


def read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """The start of the answer as sent, at most ``max_bytes`` (more is not read), and
    whether it was all read."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_raw():
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            return b"".join(chunks)[:max_bytes], False
    return b"".join(chunks), True
