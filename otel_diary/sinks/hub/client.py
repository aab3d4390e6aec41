"""The knowledge hub's HTTP side: the document POSTed for a diary, one POST and what
its answer means (delivered, retry, rejected), and the backoff between retries.

An answer about the document (400, 409, 413, 415, 422) is final; any other non-2xx
answer (the hub failing, refusing the key, not found at that address, busy), connection
errors and timeouts are retryable (``Retry-After`` honoured, capped at an hour), so that
nothing is lost while the hub or its configuration is put right; so is a 2xx web page
(an HTML document: a captive portal or a login page answering for the hub). The timeout bounds the
whole call (:mod:`otel_diary.sinks.outbound`): a hub that trickles its headers is cut off at
the deadline, one that trickles its body too (its status still decides). Calls run with
instrumentation suppressed; answers and errors are redacted before anyone sees them, and
only then cut.
"""

from __future__ import annotations

import email.utils
import enum
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timezone
from typing import Any, Protocol

import httpx

from otel_diary.pipeline.redact import redact
from otel_diary.pipeline.render import Diary
from otel_diary.runner import renew_after_fork, suppressed
from otel_diary.sinks import outbound
from otel_diary.text import check_header_value, one_line
from otel_diary.version import __version__

logger = logging.getLogger("otel_diary")

KB_EDIT_PATH = "/v1/kb/edit"
FINAL_STATUS = frozenset({400, 409, 413, 415, 422})
"""Answers that refuse the document itself; every other non-2xx answer may succeed
later."""
MAX_RETRY_AFTER_S = 3600.0
MAX_ANSWER_BYTES = 64 * 1024


def hub_body(diary: Diary, path: str | None = None) -> dict[str, Any]:
    """The JSON document POSTed for ``diary`` (``path`` overrides ``diary.path``)."""
    return {
        "path": path or diary.path,
        "content": diary.content,
        "source_type": "diary",
        "title": diary.title,
        "tags": list(diary.tags),
        "metadata": {
            "id": diary.id,
            "trace_id": diary.trace_id,
            "span_id": diary.span_id,
            "agent": diary.agent,
            "task": diary.task_id,
            "outcome": diary.outcome,
            "created": diary.created,
        },
    }


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delay or HTTP date), capped at an hour."""
    if not value:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        seconds = moment.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


class Outcome(enum.Enum):
    DELIVERED = "delivered"
    RETRY = "retry"
    REJECTED = "rejected"


@dataclass(frozen=True)
class Attempt:
    """What one POST came to: the outcome, the status (if any) and the hub's answer."""

    outcome: Outcome
    status: int | None = None
    retry_after: float | None = None
    detail: str = ""


class Sender(Protocol):
    """Delivers one spooled document and classifies the outcome; never raises."""

    timeout_s: float

    def send(self, ident: str, body: dict[str, Any],
             timeout_s: float | None = None) -> Attempt: ...

    def close(self) -> None: ...


class HubClient:
    """POSTs one spooled diary to the hub and classifies the answer. Never raises.

    ``api_key`` must be printable ASCII (``ValueError`` otherwise). ``redactor`` scrubs
    the hub's answers and error messages before they are logged or kept in ``failed/``.
    """

    def __init__(self, url: str, *, api_key: str | None = None, timeout_s: float = 10.0,
                 transport: httpx.BaseTransport | None = None,
                 redactor: Callable[[str], str] | None = None) -> None:
        if api_key:
            check_header_value(api_key, "the knowledge hub's API key")
        self.url = url.rstrip("/")
        self.endpoint = outbound.endpoint(self.url, KB_EDIT_PATH)
        self.timeout_s = timeout_s
        self._api_key = api_key
        self._transport = transport
        self._redact = redactor or redact
        self._client = self._new_client()
        renew_after_fork(self)

    def _new_client(self) -> httpx.Client:
        return outbound.client(self.timeout_s, self._transport)

    def _after_fork_in_child(self) -> None:
        # The parent's pooled connections are its own: left unclosed, never used here.
        self._client = self._new_client()

    def headers(self, ident: str) -> dict[str, str]:
        headers = {"content-type": "application/json", "idempotency-key": ident,
                   "user-agent": f"otel-diary/{__version__}", **outbound.IDENTITY}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def send(self, ident: str, body: dict[str, Any], timeout_s: float | None = None) -> Attempt:
        """One POST; any error (even one httpx did not foresee) is a retryable attempt."""
        seconds = timeout_s if timeout_s is not None else self.timeout_s
        try:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            with suppressed(), outbound.deadline(seconds), self._client.stream(
                    "POST", self.endpoint, content=data, headers=self.headers(ident),
                    timeout=httpx.Timeout(seconds)) as response:
                answer = _read_answer(response)
        except httpx.TimeoutException as exc:
            return Attempt(Outcome.RETRY, detail=f"timed out ({type(exc).__name__})")
        except httpx.TransportError as exc:
            return Attempt(Outcome.RETRY, detail=self._error(exc))
        except Exception as exc:
            logger.debug("otel-diary hub request failed unexpectedly", exc_info=True)
            return Attempt(Outcome.RETRY, detail="unexpected " + self._error(exc))
        status = response.status_code
        if 200 <= status < 300:
            if _web_page(response, answer):
                # A web page is not a hub's answer: a captive portal, a proxy's or a single
                # sign-on login page answered for it, and the diary would be lost.
                return Attempt(Outcome.RETRY, status, detail=(
                    f"HTTP {status} with a web page, not the hub's answer (a proxy or a "
                    f"login page?): {one_line(self._redact(answer), 200)}"))
            return Attempt(Outcome.DELIVERED, status)
        detail = f"HTTP {status}: {one_line(self._redact(answer), 500)}"
        if status in FINAL_STATUS:
            return Attempt(Outcome.REJECTED, status, detail=detail)
        return Attempt(Outcome.RETRY, status,
                       parse_retry_after(response.headers.get("retry-after")), detail)

    def _error(self, exc: BaseException) -> str:
        return one_line(self._redact(f"{type(exc).__name__}: {exc}"), 500)

    def close(self) -> None:
        self._client.close()


def _web_page(response: httpx.Response, answer: str) -> bool:
    """Whether ``response`` is an HTML document (``text/html`` and ``<html`` or a doctype
    first), not an acknowledgement: web frameworks send an empty or short ``text/html``
    answer by default (Flask's ``return "", 201``)."""
    return (response.headers.get("content-type", "").lower().startswith("text/html")
            and answer.lstrip()[:15].lower().startswith(("<!doctype html", "<html")))


def _read_answer(response: httpx.Response) -> str:
    """The start of the answer (:data:`MAX_ANSWER_BYTES`), or a note when it did not come
    by the deadline: the status alone decides what happened."""
    try:
        data, _ = outbound.read_capped(response, MAX_ANSWER_BYTES)
    except httpx.TimeoutException:
        return "(the answer was cut off at the deadline)"
    return data.decode("utf-8", "replace")


_JITTER = random.SystemRandom()
"""The jitter's source: the OS's, so the app's own ``random`` sequence is left alone and
forked workers do not wait alike."""


class Backoff:
    """Exponential backoff with equal jitter: ``d/2 + U(0, d/2)``, ``d`` doubling to a cap."""

    def __init__(self, initial_s: float = 1.0, maximum_s: float = 60.0,
                 rng: Callable[[], float] = _JITTER.random) -> None:
        if initial_s <= 0 or maximum_s <= 0:
            raise ValueError("backoff delays must be positive")
        self.initial_s = initial_s
        self.maximum_s = max(maximum_s, initial_s)
        self.failures = 0
        self._rng = rng

    def next(self, retry_after: float | None = None) -> float:
        """The wait before the next attempt; never shorter than ``retry_after``."""
        ceiling = min(self.maximum_s, self.initial_s * 2.0 ** min(self.failures, 62))
        self.failures += 1
        delay = ceiling / 2 + self._rng() * ceiling / 2
        return delay if retry_after is None else max(delay, float(retry_after))

    def reset(self) -> None:
        self.failures = 0


