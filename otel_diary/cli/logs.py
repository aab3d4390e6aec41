"""Structured logs for the long-running commands: one JSON object per line on stderr.

A record's message becomes ``"msg"``; fields passed as ``extra={"fields": {...}}`` become
keys of their own, so a log pipeline can filter on them without parsing prose.

Lines are written by a thread of their own: logging never waits for stderr, so a pipe
nobody reads (a stopped log shipper) stalls no request. While stderr is not read, at most
:data:`MAX_QUEUED` lines of :data:`MAX_QUEUED_CHARS` characters in all wait; later ones
are dropped, and a line says how many. A message or a traceback longer than
:data:`MAX_TEXT_CHARS` keeps its start and its end.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

MAX_QUEUED = 1000
"""Log lines waiting for stderr at most; more are dropped (and counted)."""
MAX_QUEUED_CHARS = 4 * 1024 * 1024
"""Characters of the messages and tracebacks waiting for stderr at most; a line past it
is dropped (and counted)."""
MAX_TEXT_CHARS = 16 * 1024
"""A message, or a traceback, longer than this is cut in its middle."""
_TEXT = logging.Formatter()


class JsonFormatter(logging.Formatter):
    """Formats a record as ``{"ts", "level", "logger", "msg", ...fields}``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                entry.setdefault(str(key), value)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["error"] = record.exc_text
        return json.dumps(entry, default=str, ensure_ascii=False)


class Queued(logging.Handler):
    """Hands each record to a thread that writes it with ``out``, without waiting.

    Past :data:`MAX_QUEUED` waiting records, or :data:`MAX_QUEUED_CHARS` characters, a
    record is dropped and counted; the next line written says how many were. Closed, it
    writes what waits (for at most ``timeout`` seconds) and then writes each record itself.
    """

    def __init__(self, out: logging.Handler, timeout: float = 5.0) -> None:
        super().__init__()
        self.out = out
        self.dropped = 0
        self._told = 0
        self._timeout = timeout
        self._queue: queue.Queue[logging.LogRecord | None] = queue.Queue(MAX_QUEUED)
        self._waiting_chars = 0
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._write, name="otel-diary-logs",
                                        daemon=True)
        self._thread.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            record.msg, record.args = _shortened(record.getMessage()), None  # as it reads now
            if record.exc_info:  # its text, not its frames: what waits holds no more
                record.exc_text = _TEXT.formatException(record.exc_info)
                record.exc_info = None
            if record.exc_text:
                record.exc_text = _shortened(record.exc_text)
            if self._closed:
                self.out.handle(record)
                return
            size = _chars(record)
            with self._lock:
                if self._waiting_chars + size > MAX_QUEUED_CHARS:
                    raise queue.Full
                self._queue.put_nowait(record)
                self._waiting_chars += size
        except queue.Full:
            self.dropped += 1
        except Exception:
            self.handleError(record)

    def _write(self) -> None:
        while (record := self._queue.get()) is not None:
            self._tell_dropped()
            self.out.handle(record)
            with self._lock:
                self._waiting_chars -= _chars(record)
        self._tell_dropped()

    def _tell_dropped(self) -> None:
        dropped = self.dropped
        if dropped > self._told:
            self.out.handle(logging.makeLogRecord({
                "name": "otel_diary", "levelno": logging.WARNING, "levelname": "WARNING",
                "msg": f"otel-diary: {dropped - self._told} log line(s) dropped while stderr "
                       "was not read"}))
            self._told = dropped

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(queue.Full):
                self._queue.put(None, timeout=self._timeout)
            self._thread.join(self._timeout)
        super().close()


def _chars(record: logging.LogRecord) -> int:
    """The characters ``record`` holds while it waits: its message and its traceback."""
    return len(record.msg) + len(record.exc_text or "")


def _shortened(text: str) -> str:
    """``text`` with its middle left out when longer than :data:`MAX_TEXT_CHARS`."""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    half = MAX_TEXT_CHARS // 2
    return f"{text[:half]} … [{len(text) - 2 * half} characters left out] … {text[-half:]}"


def configure(style: str, verbose: bool) -> Callable[[], None]:
    """Send otel-diary's logs to stderr as JSON lines (``style="json"``) or plain text,
    from a thread of their own; what stops it once what is queued is written."""
    handler = logging.StreamHandler(sys.stderr)
    if style == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
        if isinstance(existing, Queued):  # configured before: its thread ends
            existing.close()
    queued = Queued(handler)
    root.addHandler(queued)
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logging.getLogger("otel_diary").setLevel(logging.DEBUG if verbose else logging.INFO)
    return queued.close
