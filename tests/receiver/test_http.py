"""OTLP/HTTP receiver protocol: every status code, on a real server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from google.rpc import status_pb2  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from otel_diary import ORCHESTRATOR, Settings
from otel_diary.assembly.grace import TraceStore
from otel_diary.receiver.admission import Collector
from otel_diary.receiver.http import OtlpHttpApp
from otel_diary.receiver.json_reader import decoding_cost
from otel_diary.receiver.metrics import metric_values
from otel_diary.testing import InMemorySink
from otel_diary.wiring import build_pipeline
from tests.support.loopback import serve_asgi
from tests.support.otlp_build import (
    json_body,
    json_document,
    new_trace_id,
    protobuf_body,
    span,
    task_trace,
)

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

PROTOBUF = {"content-type": "application/x-protobuf"}
JSON = {"content-type": "application/json"}


@dataclass
class Receiver:
    url: str
    app: OtlpHttpApp
    collector: Collector
    sink: InMemorySink

    def post(self, body: bytes, headers: dict[str, str], **kwargs: Any) -> httpx.Response:
        return httpx.post(self.url + "/v1/traces", content=body, headers=headers, timeout=30,
                          **kwargs)


@contextmanager
def receiver(*, token: str | None = None, max_body_bytes: int = 2**20, start: bool = True,
             inflight_bytes: int | None = None, grace: float = 0.0,
             decoder: Executor | None = None, **bounds: int) -> Iterator[Receiver]:
    sink = InMemorySink()
    pipeline = build_pipeline(Settings(index=False), ORCHESTRATOR, sinks=[sink])
    store = TraceStore(ORCHESTRATOR, grace=grace, trace_timeout=60, **bounds)
    collector = Collector(store, pipeline, start=start)
    app = OtlpHttpApp(collector, ORCHESTRATOR, token=token, max_body_bytes=max_body_bytes,
                      inflight_bytes=inflight_bytes, decoder=decoder)
    try:
        with serve_asgi(app) as url:
            yield Receiver(url, app, collector, sink)
    finally:
        collector.close(10)
        app.close()


def status_of(response: httpx.Response) -> Any:
    if response.headers["content-type"] == "application/x-protobuf":
        return status_pb2.Status.FromString(response.content)
    return json.loads(response.content)


def test_protobuf_export_is_accepted_and_becomes_a_diary() -> None:
    """200 with an empty ExportTraceServiceResponse; the task's diary follows."""
    with receiver() as server:
        response = server.post(protobuf_body(task_trace("T-http", chats=2)), PROTOBUF)
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/x-protobuf"
        parsed = ExportTraceServiceResponse.FromString(response.content)
        assert not parsed.HasField("partial_success")
        diaries = server.sink.wait_for(1, timeout=10)
    assert [d.task_id for d in diaries] == ["T-http"]
    assert "Tokens: 240" in diaries[0].body


def test_json_export_is_answered_in_json() -> None:
    """An OTLP/JSON request (hex ids, integer enums) gets a JSON response."""
    with receiver() as server:
        response = server.post(json_body(task_trace("T-json")), JSON)
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert response.json() == {}
        diaries = server.sink.wait_for(1, timeout=10)
    assert diaries[0].task_id == "T-json"


def test_gzip_and_chunked_bodies_are_read() -> None:
    """A gzip body sent with Transfer-Encoding: chunked (no Content-Length) is accepted."""
    body = gzip.compress(protobuf_body(task_trace("T-gz")))

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 100):
            yield body[start:start + 100]

    with receiver() as server:
        response = httpx.post(server.url + "/v1/traces", content=chunks(),
                              headers={**PROTOBUF, "content-encoding": "gzip"})
        assert "content-length" not in response.request.headers
        assert response.status_code == 200
        assert server.sink.wait_for(1, timeout=10)[0].task_id == "T-gz"


def test_deflate_bodies_are_read_and_bad_ones_refused() -> None:
    """``deflate`` (a zlib stream, as the SDK's ``Compression.Deflate`` sends it; ``zlib``
    too) is read, protobuf and JSON; a damaged, a cut, an empty one and one with bytes
    after its end are 400s; one inflating past the cap is a 413."""
    body = protobuf_body(task_trace("T-deflate"))
    as_json = json.dumps(json_document(task_trace("T-deflate-json"))).encode()
    deflate = {"content-encoding": "deflate"}
    with receiver() as server:
        assert server.post(zlib.compress(body), {**PROTOBUF, **deflate}).status_code == 200
        assert server.post(zlib.compress(as_json), {**JSON, "content-encoding": "zlib"}
                           ).status_code == 200  # the Collector's other name for it
        assert sorted(d.task_id for d in server.sink.wait_for(2, timeout=10)) == [
            "T-deflate", "T-deflate-json"]
        packed = zlib.compress(body)
        for bad, says in [(packed[:2] + bytes(len(packed) - 2), "invalid deflate data"),
                          (packed[:-6], "truncated deflate data"), (b"", "empty deflate"),
                          (packed + b"more", "data after the end of the deflate stream")]:
            refused = server.post(bad, {**PROTOBUF, **deflate})
            assert refused.status_code == 400, bad
            assert says in status_of(refused).message
        bomb = server.post(zlib.compress(bytes(4 * 2**20), 9), {**PROTOBUF, **deflate})
        assert bomb.status_code == 413


def test_zstd_bodies_are_read_and_bad_ones_refused() -> None:
    """zstd (the Collector's ``otlp_http`` exporter sends it with ``compression: zstd``) is
    read, protobuf and JSON, a frame that does not say its size too; a damaged, a cut and
    an empty one are 400s; a bomb is a 413 while memory stays small."""
    body = protobuf_body(task_trace("T-zstd"))
    as_json = json.dumps(json_document(task_trace("T-zstd-json"))).encode()
    streamed = zstd.ZstdCompressor()
    unsized = streamed.compress(protobuf_body(task_trace("T-zstd-stream"))) + streamed.flush()
    headers = {**PROTOBUF, "content-encoding": "zstd"}
    with receiver() as server:
        assert server.post(zstd.compress(body), headers).status_code == 200
        assert server.post(unsized, headers).status_code == 200
        assert server.post(zstd.compress(as_json), {**JSON, "content-encoding": "zstd"}
                           ).status_code == 200
        assert sorted(d.task_id for d in server.sink.wait_for(3, timeout=10)) == [
            "T-zstd", "T-zstd-json", "T-zstd-stream"]
        packed = zstd.compress(body)
        for bad, says in [(packed[:8] + b"\xff" * (len(packed) - 8), "invalid zstd data"),
                          (packed[:-6], "truncated zstd data"), (b"", "empty zstd")]:
            refused = server.post(bad, headers)
            assert refused.status_code == 400, bad
            assert says in status_of(refused).message
        bomb = zstd.compress(bytes(256 * 2**20))
        tracemalloc.start()
        try:
            response = server.post(bomb, headers)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert response.status_code == 413
        assert peak < 16 * 2**20


def test_zero_ids_give_partial_success_in_both_content_types() -> None:
    """Spans with all-zero or empty ids are rejected; the response says how many, 200 all
    the same, and the task in the same request is written."""
    spans = [*task_trace("T-ps"), span(bytes(16), b"\x01" * 8), span(new_trace_id(), b"")]
    with receiver() as server:
        response = server.post(protobuf_body(spans), PROTOBUF)
        assert response.status_code == 200
        partial = ExportTraceServiceResponse.FromString(response.content).partial_success
        assert partial.rejected_spans == 2 and "zero" in partial.error_message
        assert server.sink.wait_for(1, timeout=10)[0].task_id == "T-ps"
        spans = [*task_trace("T-ps2"), *spans[-2:]]
        response = server.post(json_body(spans), JSON)
        assert response.status_code == 200
        assert response.json()["partialSuccess"]["rejectedSpans"] == "2"
        assert server.sink.wait_for(2, timeout=10)[1].task_id == "T-ps2"


def test_undecodable_bodies_get_400_with_a_status() -> None:
    """Truncated protobuf, broken JSON, base64 ids and broken gzip are 400s."""
    body = protobuf_body(task_trace("T-bad"))
    document = json_document(task_trace("T-b64"))
    first = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    import base64

    first["spanId"] = base64.b64encode(bytes.fromhex(first["spanId"])).decode()
    with receiver() as server:
        truncated = server.post(body[:-9], PROTOBUF)
        assert truncated.status_code == 400 and status_of(truncated).code == 3
        broken = server.post(b'{"resourceSpans": [', JSON)
        assert broken.status_code == 400 and broken.json()["code"] == 3
        b64 = server.post(json.dumps(document).encode(), JSON)
        assert b64.status_code == 400 and "hex" in b64.json()["message"]
        bad_gzip = server.post(b"\x1f\x8b garbage", {**PROTOBUF, "content-encoding": "gzip"})
        assert bad_gzip.status_code == 400


def test_a_refusal_quoting_the_request_quotes_no_secret() -> None:
    """A value of the wrong type, or a span refused for its ids, is quoted in the message
    an exporter logs: a secret in it is redacted there."""
    key = "sk-proj-" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    document = json_document(task_trace("T-q"))
    first = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    first["startTimeUnixNano"] = key
    named = protobuf_body([span(b"\x01" * 5, b"\x02" * 8, name=f"deploy {key}")])
    with receiver() as server:
        for response in (server.post(json.dumps(document).encode(), JSON),
                         server.post(named, PROTOBUF)):
            assert response.status_code == 400
            message = status_of(response).message if response.headers[
                "content-type"].startswith("application/x-protobuf") else response.json()[
                "message"]
            assert "[REDACTED:api_key]" in message and key[8:20] not in message


def test_missing_or_wrong_credentials_get_401() -> None:
    """With a token set, requests need it as a bearer token or x-api-key."""
    body = protobuf_body(task_trace("T-auth"))
    with receiver(token="s3cret") as server:
        missing = server.post(body, PROTOBUF)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert server.post(body, {**PROTOBUF, "authorization": "Bearer nope"}).status_code == 401
        assert server.post(body, {**PROTOBUF, "authorization": "Bearer s3cret"}).status_code == 200
        assert server.post(body, {**PROTOBUF, "x-api-key": "s3cret"}).status_code == 200


def test_wrong_path_method_and_content_type() -> None:
    """404 off the route, 405 for GET (with Allow), 415 for other types and encodings."""
    with receiver() as server:
        assert httpx.post(server.url + "/v1/metrics", content=b"").status_code == 404
        get = httpx.get(server.url + "/v1/traces")
        assert get.status_code == 405 and get.headers["allow"] == "POST"
        text = server.post(b"hello", {"content-type": "text/plain"})
        assert text.status_code == 415 and text.json()["code"] == 3
        brotli = server.post(b"x", {**PROTOBUF, "content-encoding": "br"})
        assert brotli.status_code == 415
        assert "use gzip, zstd or deflate" in status_of(brotli).message


def test_body_over_the_cap_gets_413() -> None:
    """A declared, a chunked and an inflated body past the cap are all 413s."""
    big = b"\x00" * (2**20 + 1)
    with receiver() as server:
        assert server.post(big, PROTOBUF).status_code == 413
        response = httpx.post(server.url + "/v1/traces", content=iter([big[:2**19]] * 3),
                              headers=PROTOBUF)
        assert response.status_code == 413


def test_gzip_bomb_gets_413_without_inflating_it() -> None:
    """A 256 KiB gzip body inflating to 256 MiB is refused while memory stays small."""
    bomb = gzip.compress(bytes(256 * 2**20), 9)
    assert len(bomb) < 2**20
    with receiver() as server:
        tracemalloc.start()
        try:
            response = server.post(bomb, {**PROTOBUF, "content-encoding": "gzip"})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert response.status_code == 413
        assert peak < 16 * 2**20


def test_busy_receiver_answers_429_with_retry_after() -> None:
    """While bodies being read hold the in-flight budget, a new one gets 429 with
    Retry-After and a RESOURCE_EXHAUSTED status; the held request still succeeds."""
    body = protobuf_body(task_trace("A", chats=3))
    half = len(body) // 2
    release = threading.Event()

    def slow_body() -> Iterator[bytes]:
        yield body[:half]
        release.wait(30)
        yield body[half:]

    with receiver(inflight_bytes=len(body) + 100) as server:
        held: list[httpx.Response] = []
        sender = threading.Thread(target=lambda: held.append(server.post(
            slow_body(), PROTOBUF)))  # type: ignore[arg-type]
        sender.start()
        try:
            for _ in range(500):  # until the first half is being held
                if server.app.inflight >= half:
                    break
                time.sleep(0.01)
            busy = server.post(protobuf_body(task_trace("B")), PROTOBUF)
        finally:
            release.set()
            sender.join(30)
        assert busy.status_code == 429 and busy.headers["retry-after"] == "1"
        assert status_of(busy).code == 8
        assert held[0].status_code == 200
        assert server.app.inflight == 0


def test_json_is_decoded_off_the_loop_and_counted_until_decoded() -> None:
    """A small OTLP/JSON body waits for a decoding thread, not on the event loop (which
    answers /health meanwhile), and its bytes count against the in-flight budget until it
    is decoded, with what decoding it will take: a request that would pass the budget then
    gets 429."""
    small = json_body(task_trace("J-small"))
    cost = decoding_cost(small)
    decoder = ThreadPoolExecutor(max_workers=1)
    release = threading.Event()
    decoder.submit(release.wait, 30)  # the only decoding thread is busy
    with receiver(inflight_bytes=cost + 100, decoder=decoder) as server:
        waiting: list[httpx.Response] = []
        sender = threading.Thread(target=lambda: waiting.append(server.post(small, JSON)))
        sender.start()
        try:
            for _ in range(500):  # until the body is read and waits to be decoded
                if server.app.inflight >= cost or waiting:
                    break
                time.sleep(0.01)
            health = httpx.get(server.url + "/health", timeout=10)
            answered_early = bool(waiting)
            busy = server.post(json_body(task_trace("J-other")), JSON)
        finally:
            release.set()
            sender.join(30)
        assert health.status_code == 200
        assert not answered_early
        assert busy.status_code == 429
        assert waiting[0].status_code == 200
        assert server.app.inflight == 0
    decoder.shutdown()


def test_a_json_body_costlier_than_the_budget_is_decoded_alone() -> None:
    """An OTLP/JSON body whose decoding costs more than the whole in-flight budget is still
    taken while no other request holds any of it (else no exporter could ever send it)."""
    body = json_body([span for n in range(30) for span in task_trace(f"J-{n}")])
    with receiver(inflight_bytes=decoding_cost(body) // 2) as server:
        answer = server.post(body, JSON)
        assert answer.status_code == 200
        assert server.collector.flush(10)
        assert server.app.inflight == 0


def test_full_assembly_memory_answers_503_with_retry_after() -> None:
    """At the held-span bound the receiver sheds load with 503 rather than growing."""
    with receiver(grace=3600, max_spans=7) as server:  # a task and 3 chats are held
        assert server.post(protobuf_body(task_trace("A", chats=3)), PROTOBUF).status_code == 200
        assert server.collector.flush(10)
        full = server.post(protobuf_body(task_trace("B", chats=3)), PROTOBUF)
        assert full.status_code == 503 and int(full.headers["retry-after"]) > 0
        assert status_of(full).code == 14
        values = metric_values(httpx.get(server.url + "/metrics").text)
        assert values['otel_diary_requests_rejected_total{reason="store_full"}'] == 1


def test_stopping_receiver_answers_503_and_health_says_so() -> None:
    """After the collector closes, exports get 503 and /health turns 503."""
    with receiver() as server:
        assert httpx.get(server.url + "/health").json() == {"status": "ok"}
        server.collector.close(10)
        response = server.post(protobuf_body(task_trace("late")), PROTOBUF)
        assert response.status_code == 503 and "retry-after" in response.headers
        assert httpx.get(server.url + "/health").status_code == 503


def test_metrics_endpoint_counts_received_and_rejected() -> None:
    """/metrics exposes spans received and requests rejected by reason."""
    with receiver() as server:
        server.post(protobuf_body(task_trace("T-m", chats=1)), PROTOBUF)
        server.post(b"junk", {"content-type": "text/plain"})
        server.sink.wait_for(1, timeout=10)
        response = httpx.get(server.url + "/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    values = metric_values(response.text)
    assert values['otel_diary_spans_received_total{protocol="http"}'] == 3
    assert values['otel_diary_requests_rejected_total{reason="unsupported_media_type"}'] == 1
    assert values["otel_diary_diaries_written_total"] == 1


# -- fuzzing the handler in-process (the ASGI interface, no sockets) ----------------------

@pytest.fixture(scope="module")
def fuzz_app() -> Iterator[OtlpHttpApp]:
    """One handler for every example, closed with its collector after them."""
    collector = Collector(TraceStore(ORCHESTRATOR, grace=0),
                          build_pipeline(Settings(index=False), ORCHESTRATOR,
                                         sinks=[InMemorySink()]))
    app = OtlpHttpApp(collector, ORCHESTRATOR, max_body_bytes=4096)
    yield app
    assert collector.close(10.0)
    app.close()


async def _call(app: OtlpHttpApp, method: str, path: str, headers: list[tuple[bytes, bytes]],
                chunks: list[bytes]) -> int:
    messages = [{"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
                for i, chunk in enumerate(chunks or [b""])]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    scope = {"type": "http", "method": method, "path": path, "headers": headers}
    await app(scope, receive, send)
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1
    return int(starts[0]["status"])


_bodies = st.one_of(
    st.binary(max_size=600),
    st.builds(lambda spans: protobuf_body(spans), st.just(task_trace("F"))),
    st.builds(lambda v: json.dumps(v).encode(),
              st.recursive(st.none() | st.integers() | st.text(max_size=20),
                           lambda c: st.lists(c, max_size=3)
                           | st.dictionaries(st.sampled_from(
                               ["resourceSpans", "scopeSpans", "spans", "traceId", "spanId"]),
                               c, max_size=3), max_leaves=20)),
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    method=st.sampled_from(["POST", "POST", "GET", "PUT"]),
    path=st.sampled_from(["/v1/traces", "/v1/traces", "/health", "/metrics", "/x"]),
    content_type=st.sampled_from(["application/x-protobuf", "application/json",
                                  "application/json; charset=utf-8", "text/plain", "",
                                  "APPLICATION/X-PROTOBUF"]),
    encoding=st.sampled_from(["", "gzip", "identity", "br"]),
    gzip_it=st.booleans(),
    body=_bodies,
    split=st.integers(min_value=1, max_value=4),
    length=st.one_of(st.none(), st.integers(min_value=-5, max_value=10**9).map(str),
                     st.text(max_size=5)),
)
def test_handler_never_answers_5xx_to_arbitrary_requests(
        fuzz_app: OtlpHttpApp, method: str, path: str, content_type: str, encoding: str,
        gzip_it: bool, body: bytes, split: int, length: str | None) -> None:
    """Arbitrary bodies, types, encodings and lengths get a 2xx/4xx, never a 5xx or a crash."""
    if gzip_it:
        body = gzip.compress(body)
    size = max(len(body) // split, 1)
    chunks = [body[i:i + size] for i in range(0, len(body), size)]
    headers = [(b"content-type", content_type.encode())]
    if encoding:
        headers.append((b"content-encoding", encoding.encode()))
    if length is not None:
        headers.append((b"content-length", length.encode("utf-8", "replace")))
    status = asyncio.run(_call(fuzz_app, method, path, headers, chunks))
    assert 200 <= status < 500
