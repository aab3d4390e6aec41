"""``otel-diary serve``'s in-flight budget: what requests being read and decoded hold."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.cli.test_serve import Serve
from tests.support.otlp_build import new_span_id, protobuf_body, span, task_trace

MAX_BODY = 16 * 2**20
"""The body cap the server runs with: its in-flight budget is then 64 MiB."""


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path, env={"OTEL_DIARY_SERVE_MAX_BODY_BYTES": str(MAX_BODY)})
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.stop()


def _export(server: Serve, task: str, padding: int = 0) -> int:
    """Post a task's trace, with a plain span whose name is ``padding`` bytes long."""
    spans = task_trace(task)
    if padding:
        spans.append(span(spans[0].trace_id, new_span_id(), spans[0].span_id,
                          name="p" * padding))
    return httpx.post(server.url + "/v1/traces", content=protobuf_body(spans),
                      headers={"content-type": "application/x-protobuf"},
                      timeout=30).status_code


def test_stalled_gzip_uploads_hold_only_what_they_sent(serve: Serve) -> None:
    """Four gzip uploads that stall just before their end (16 KiB each on the wire, almost
    16 MiB once inflated) leave the budget to everyone else: other 1 MiB exports get 200,
    not 429."""
    compressed = gzip.compress(bytes(MAX_BODY - 2**17))
    head = (b"POST /v1/traces HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            b"content-type: application/x-protobuf\r\ncontent-encoding: gzip\r\n"
            b"content-length: " + str(len(compressed)).encode() + b"\r\n\r\n")
    with ExitStack() as stack:
        for _ in range(4):
            connection = stack.enter_context(
                socket.create_connection(("127.0.0.1", serve.http_port), timeout=15))
            connection.sendall(head + compressed[:-16])  # the trailer never comes
        statuses = []
        for n in range(20):  # bounded: about a second, while the uploads stall
            statuses.append(_export(serve, f"T-{n}", padding=2**20))
            time.sleep(0.05)
    assert set(statuses) == {200}


def _gzip_json_at_once(server: Serve, body: bytes, count: int) -> list[tuple[int, str]]:
    """Post a gzip OTLP/JSON ``body`` on ``count`` connections at once: every connection is
    open before the first request is sent, and the requests go out back to back, before
    any answer is read. Their (status, text) answers."""
    url = urlsplit(server.url)
    connections = [http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=60)
                   for _ in range(count)]
    try:
        for connection in connections:
            connection.connect()
        for connection in connections:
            connection.request("POST", "/v1/traces", body=body, headers={
                "content-type": "application/json", "content-encoding": "gzip"})
        answers = []
        for connection in connections:
            response = connection.getresponse()
            answers.append((response.status, response.read().decode("utf-8", "replace")))
        return answers
    finally:
        for connection in connections:
            connection.close()


def test_bodies_waiting_to_be_decoded_count_against_the_budget(serve: Serve) -> None:
    """Twelve gzip OTLP/JSON bodies of 1 MiB each (a few KiB on the wire) sent at once: the
    ones being decoded hold what decoding them takes (about 11 MiB each), so past the
    64 MiB budget the rest get 429 instead of waiting in an unbounded queue."""
    spans = 2**20 // 31
    document = '{"resourceSpans":[{"scopeSpans":[{"spans":[' + ",".join(
        ['{"name":"aaaaaaaa","kind":1}'] * spans)
    body = gzip.compress((document + "]}]}]}").encode())
    answers = _gzip_json_at_once(serve, body, 12)
    statuses = [status for status, _ in answers]
    assert 429 in statuses
    assert set(statuses) <= {200, 429}
    for status, text in answers:  # every span lacks ids: refused one by one when decoded
        if status == 200:
            assert json.loads(text)["partialSuccess"]["rejectedSpans"] == str(spans)
    assert _export(serve, "T-after") == 200


def _peak_rss(pid: int) -> int:
    """The process's peak resident memory (``VmHWM``), in bytes."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) * 1024


def test_a_json_body_too_costly_to_decode_is_refused_before_decoding(serve: Serve) -> None:
    """Four gzip OTLP/JSON bombs at once (8 MiB of ``{},`` each, 8 KiB on the wire, which
    json.loads would make into about 200 MB of objects): each is answered 413 saying why,
    serve's peak memory grows by far less than one decoding would take, and it answers on."""
    document = '{"resourceSpans":[{"scopeSpans":[{"spans":[' + ",".join(["{}"] * (8 * 2**20 // 3))
    body = gzip.compress((document + "]}]}]}").encode())
    _export(serve, "T-warm")  # the first request's own allocations are not the bomb's
    before = _peak_rss(serve.process.pid)
    answers = _gzip_json_at_once(serve, body, 4)
    assert [status for status, _ in answers] == [413] * 4
    assert "would take about" in answers[0][1]
    assert _peak_rss(serve.process.pid) - before < 100 * 2**20
    assert _export(serve, "T-after") == 200
