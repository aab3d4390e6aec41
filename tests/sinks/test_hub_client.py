"""The hub client against a real server on loopback that answers too slowly to wait
for, or with what it should not."""

from __future__ import annotations

import gzip
import random
from typing import Any

import pytest

from otel_diary.pipeline.redact import SecretRedactor
from otel_diary.sinks.hub.client import Attempt, Backoff, HubClient, Outcome
from tests.support.raw_http import RawServer, head

BODY_BYTES = 120
"""What the trickling server promises; at one byte per 0.05 s it takes 6 s to send."""


def trickling_hub(status: int) -> RawServer:
    """Answers with its headers at once, then its body one byte at a time."""
    return RawServer(head(status, content_type="text/plain", content_length=BODY_BYTES),
                     b"x" * BODY_BYTES)


def sent(hub: RawServer, ident: str, path: str, **client: Any) -> Attempt:
    """What one diary sent to ``hub`` by a ``HubClient(**client)`` came to (the client
    closed and the hub's thread ended after it)."""
    sender = HubClient(hub.url, **client)
    try:
        return sender.send(ident, {"path": path})
    finally:
        sender.close()
        hub.finish()


def test_a_trickled_answer_is_cut_off_at_the_deadline() -> None:
    """Headers at once, then a byte at a time: the client stops at its deadline."""
    hub = trickling_hub(200)
    attempt = sent(hub, "kh-1", "diaries/x.md", timeout_s=0.5)
    assert attempt.outcome is Outcome.DELIVERED  # the status came before the stall
    assert hub.trickled < BODY_BYTES


def test_a_trickled_error_answer_is_cut_off_and_retried() -> None:
    """A 503 whose body trickles is still a retry, decided at the deadline."""
    hub = trickling_hub(503)
    attempt = sent(hub, "kh-2", "diaries/y.md", timeout_s=0.5)
    assert attempt.outcome is Outcome.RETRY and attempt.status == 503
    assert "cut off at the deadline" in attempt.detail
    assert hub.trickled < BODY_BYTES


def test_trickled_headers_are_cut_off_at_the_deadline() -> None:
    """A hub that sends its status line and headers a byte at a time (6 s of them) is
    given up at the deadline and the diary retried, not waited on."""
    hub = RawServer(b"", head(200, content_length=0, x_pad="p" * 80))
    attempt = sent(hub, "kh-3", "diaries/z.md", timeout_s=0.5)
    assert attempt.outcome is Outcome.RETRY and "timed out" in attempt.detail
    assert hub.trickled < len(head(200, content_length=0, x_pad="p" * 80))


def test_a_compressed_answer_is_not_inflated() -> None:
    """An answer compressed although the client asked for it as it is (``identity``) is
    read as sent, within the answer's cap: 10 MB of text gzipped to 10 KB stays 10 KB."""
    bomb = gzip.compress(b"A" * 10_000_000)
    hub = RawServer(head(400, content_encoding="gzip", content_length=len(bomb)) + bomb)
    attempt = sent(hub, "kh-4", "diaries/bomb.md", timeout_s=5)
    assert b"accept-encoding: identity" in hub.request.lower()
    assert attempt.outcome is Outcome.REJECTED and "AAAA" not in attempt.detail


def test_a_key_echoed_in_a_long_error_answer_is_redacted_before_the_cut() -> None:
    """A hub that echoes the API key past where the answer is cut for the log: no part
    of the key is kept (the whole answer is redacted, then cut)."""
    key = "kb-Zq7Wm4Xr8Tn2Vb6Yc9Hd3Jf5"
    answer = ("e" * 480 + " " + key).encode()
    hub = RawServer(head(400, content_length=len(answer)) + answer)
    attempt = sent(hub, "kh-5", "diaries/key.md", api_key=key, timeout_s=5,
                   redactor=SecretRedactor(literals=[key]))
    assert attempt.outcome is Outcome.REJECTED
    assert not any(key[i:i + 8] in attempt.detail for i in range(len(key) - 7))


@pytest.mark.parametrize("status", [500, 401, 404, 301])
def test_answers_not_about_the_document_are_retried(status: int) -> None:
    """The hub failing, refusing the key or not found at that address: the diary waits
    and is sent again (not set aside as refused), since every diary would meet it."""
    hub = RawServer(head(status, content_length=2, retry_after=7) + b"no")
    attempt = sent(hub, "kh-6", "diaries/wait.md", timeout_s=5)
    assert (attempt.outcome, attempt.status, attempt.retry_after) == (Outcome.RETRY, status, 7)


@pytest.mark.parametrize(("kind", "answer", "delivered"), [
    ("text/html; charset=utf-8", b"<!DOCTYPE html><html><body>Sign in to continue", False),
    ("TEXT/HTML", b"  <html><body>Sign in to continue</body></html>", False),
    ("text/html; charset=utf-8", b"", True),  # Flask's return "", 201
    ("text/html; charset=utf-8", b"stored", True),
    ("application/json", b"<html>Sign in to continue</html>", True),
    (None, b"<html>Sign in to continue</html>", True)])
def test_a_web_page_answered_with_200_is_not_a_delivery(kind: str | None, answer: bytes,
                                                        delivered: bool) -> None:
    """A captive portal or a login page answering 200 for the hub with an HTML document
    is retried (the diary was taken as delivered, and lost); a JSON, plain or empty
    answer is a delivery, as is a web framework's default empty or short text/html."""
    headers = {"content_length": len(answer)} if kind is None else {
        "content_length": len(answer), "content_type": kind}
    attempt = sent(RawServer(head(200, **headers) + answer), "kh-7", "diaries/page.md",
                   timeout_s=5)
    assert (attempt.outcome is Outcome.DELIVERED) is delivered
    if not delivered:
        assert attempt.outcome is Outcome.RETRY and "Sign in to continue" in attempt.detail


def test_the_backoff_jitter_leaves_the_apps_random_sequence_alone() -> None:
    """Delays grow within their bounds, drawn from the OS's randomness: an app that seeded
    ``random`` gets the same sequence whatever the hub's retries drew meanwhile."""
    random.seed(7)
    expected = [random.random() for _ in range(3)]
    random.seed(7)
    backoff = Backoff(1.0, 8.0)
    delays = [backoff.next() for _ in range(6)]
    assert [random.random() for _ in range(3)] == expected
    for delay, ceiling in zip(delays, (1, 2, 4, 8, 8, 8), strict=True):
        assert ceiling / 2 <= delay <= ceiling
    assert backoff.next(retry_after=30) == 30
