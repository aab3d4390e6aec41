"""Outbound HTTP calls: a deadline for the whole call, answers read as sent."""

from __future__ import annotations

import gzip

import httpx
import pytest

from otel_diary.sinks import outbound
from tests.support.raw_http import RawServer, head


def test_a_deadline_bounds_the_whole_call_in_its_block_only() -> None:
    """Headers trickled a byte at a time (6 s of them) end a call at its deadline though
    each read is well within the client's timeout; the same client, out of the block,
    waits for a whole answer as usual."""
    trickled = head(200, content_length=2, x_pad="p" * 90) + b"ok"
    slow = RawServer(b"", trickled)
    client = outbound.client(30)
    try:
        with pytest.raises(httpx.TimeoutException), outbound.deadline(0.3):
            client.get(slow.url)
        quick = RawServer(head(200, content_length=2) + b"ok")
        assert client.get(quick.url).text == "ok"
        quick.finish()
    finally:
        client.close()
        slow.finish()
    assert slow.trickled < len(trickled)


def test_an_answer_is_read_as_sent_up_to_the_cap() -> None:
    """A gzip answer is not inflated, and no more than the cap is kept."""
    bomb = gzip.compress(b"A" * 1_000_000)
    server = RawServer(head(200, content_encoding="gzip", content_length=len(bomb)) + bomb)
    client = outbound.client(5)
    try:
        with client.stream("GET", server.url, headers=outbound.IDENTITY) as response:
            data, whole = outbound.read_capped(response, 100)
    finally:
        client.close()
        server.finish()
    assert data == bomb[:100] and not whole


@pytest.mark.parametrize(("base", "expected"), [
    ("https://hub.example", "https://hub.example/v1/kb/edit"),
    ("https://hub.example/kb/", "https://hub.example/kb/v1/kb/edit"),
    ("https://hub.example/v1/kb/edit", "https://hub.example/v1/kb/edit"),
    ("https://x.example/openai?api-version=2024-06-01",
     "https://x.example/openai/v1/kb/edit?api-version=2024-06-01"),
])
def test_an_endpoint_goes_on_the_path_before_the_query(base: str, expected: str) -> None:
    assert outbound.endpoint(base, "/v1/kb/edit") == expected
