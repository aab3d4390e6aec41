"""OTLP/gRPC receiver protocol: status codes, gzip, auth and retry hints on 127.0.0.1."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

from otel_diary import ORCHESTRATOR, Settings
from otel_diary.assembly.grace import TraceStore
from otel_diary.receiver.admission import Collector
from otel_diary.receiver.grpc import INFLIGHT_BYTES, TraceService, grpc_server
from otel_diary.testing import InMemorySink
from otel_diary.wiring import build_pipeline
from tests.support import grpc_calls as rpc
from tests.support.loopback import wait_until
from tests.support.otlp_build import request, span, task_trace

T = TypeVar("T")


@dataclass
class Receiver:
    channel: grpc.Channel
    stub: TraceServiceStub
    collector: Collector
    sink: InMemorySink
    service: TraceService

    def raw(self, body: bytes) -> bytes:
        return bytes(rpc.unary(self.channel)(body, timeout=30))


@contextmanager
def receiver(*, token: str | None = None, start: bool = True,
             inflight_bytes: int = INFLIGHT_BYTES, kind: type[TraceService] = TraceService,
             **limits: float) -> Iterator[Receiver]:
    sink = InMemorySink()
    pipeline = build_pipeline(Settings(index=False), ORCHESTRATOR, sinks=[sink])
    collector = Collector(TraceStore(ORCHESTRATOR, grace=0), pipeline, start=start)
    service = kind(collector, ORCHESTRATOR, token=token, inflight_bytes=inflight_bytes,
                   **limits)  # type: ignore[arg-type]
    server, port = grpc_server(service, "127.0.0.1", 0)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[
        ("grpc.max_send_message_length", 128 * 2**20)])
    try:
        stub = TraceServiceStub(channel)  # type: ignore[no-untyped-call]
        yield Receiver(channel, stub, collector, sink, service)
    finally:
        channel.close()
        server.stop(1).wait(5)
        service.close()
        collector.close(10)


def test_export_is_accepted_and_becomes_a_diary() -> None:
    """A gzip-compressed Export succeeds and the task's diary is written."""
    with receiver() as server:
        response = server.stub.Export(request(task_trace("T-grpc", chats=2)), timeout=30,
                                      compression=grpc.Compression.Gzip)
        assert not response.HasField("partial_success")
        diaries = server.sink.wait_for(1, timeout=10)
    assert [d.task_id for d in diaries] == ["T-grpc"]


def test_zero_ids_give_partial_success() -> None:
    """Spans with all-zero ids are counted in partial_success."""
    with receiver() as server:
        response = server.stub.Export(request([span(bytes(16), b"\x01" * 8)]), timeout=30)
    assert response.partial_success.rejected_spans == 1


def test_undecodable_request_is_invalid_argument() -> None:
    """Bytes that are not an ExportTraceServiceRequest get INVALID_ARGUMENT."""
    with receiver() as server, pytest.raises(grpc.RpcError) as caught:
        server.raw(b"\x0a\xff\xff\xff\x0f truncated")
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_a_refusal_quoting_the_request_quotes_no_secret() -> None:
    """A span refused for its ids is named in the message, which the exporter logs: a
    secret in its name is redacted there."""
    key = "sk-proj-" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    with receiver() as server, pytest.raises(grpc.RpcError) as caught:
        server.stub.Export(request([span(b"\x01" * 5, b"\x02" * 8, name=f"deploy {key}")]),
                           timeout=30)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    details = caught.value.details() or ""
    assert "deploy [REDACTED:api_key]" in details and key[8:20] not in details


def test_missing_credentials_are_unauthenticated() -> None:
    """With a token set, a call without it is UNAUTHENTICATED; with it, accepted."""
    body = request(task_trace("T-auth"))
    with receiver(token="s3cret") as server:
        with pytest.raises(grpc.RpcError) as caught:
            server.stub.Export(body, timeout=30)
        assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED
        ok = server.stub.Export(body, timeout=30, metadata=[("authorization", "Bearer s3cret")])
        assert isinstance(ok, ExportTraceServiceResponse)
        server.stub.Export(body, timeout=30, metadata=[("x-api-key", "s3cret")])


def test_busy_receiver_is_resource_exhausted_with_retry_info() -> None:
    """A request that would take the bytes being decoded past their budget:
    RESOURCE_EXHAUSTED carrying a RetryInfo delay."""
    from google.rpc import error_details_pb2  # type: ignore[import-untyped]

    small = request(task_trace("A", chats=0))
    with receiver(inflight_bytes=small.ByteSize() + 10) as server:
        server.stub.Export(small, timeout=30)
        with pytest.raises(grpc.RpcError) as caught:
            server.stub.Export(request(task_trace("B", chats=3)), timeout=30)
    error = caught.value
    assert isinstance(error, grpc.Call)
    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    retry = [value for key, value in error.trailing_metadata() or ()
             if key == "google.rpc.retryinfo-bin"]
    info = error_details_pb2.RetryInfo.FromString(retry[0])
    assert info.retry_delay.seconds == 1


def test_stopping_receiver_is_unavailable() -> None:
    """After the collector closes, exports are UNAVAILABLE (retryable)."""
    with receiver() as server:
        server.collector.close(10)
        with pytest.raises(grpc.RpcError) as caught:
            server.stub.Export(request(task_trace("late")), timeout=30)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE


def test_message_over_the_cap_is_refused() -> None:
    """A message past the 16 MiB default cap is refused by the transport, not read."""
    big = ExportTraceServiceRequest()
    big.resource_spans.add().schema_url = "x" * (17 * 2**20)
    with receiver() as server, pytest.raises(grpc.RpcError) as caught:
        server.stub.Export(big, timeout=60)
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED


def _until_refused(server: Receiver, body: bytes,
                   held: grpc.Future[bytes]) -> list[grpc.StatusCode]:
    """The codes of exports of ``body`` made until one is refused (RESOURCE_EXHAUSTED:
    the open call ``held`` has its slot by then) or ``held`` ends."""
    export = rpc.unary(server.channel)
    codes: list[grpc.StatusCode] = []
    for _ in range(100):  # bounded: until the open call holds its slot
        codes.append(rpc.code(export.future(body, timeout=20)))
        if codes[-1] is grpc.StatusCode.RESOURCE_EXHAUSTED or held.done():
            break
        time.sleep(0.05)
    return codes


def test_a_new_call_cancels_the_call_waiting_longest_for_its_message() -> None:
    """Both slots held by calls whose messages do not come: a new call cancels the older
    of them at once (it ends before its message is sent), and is served; the younger one
    keeps its slot, and only that one: with a third call open in the other, the next is
    refused. The younger's message is read once it comes."""
    release = threading.Event()
    body = request(task_trace("T-held")).SerializeToString()
    with receiver(max_concurrent_rpcs=2, evict_after_s=0.2) as server:
        stream = rpc.streaming(server.channel)
        try:
            older = stream.future(rpc.held(release, body), timeout=10)
            time.sleep(0.5)
            younger = stream.future(rpc.held(release, body), timeout=20)
            time.sleep(0.3)
            served = rpc.code(rpc.unary(server.channel).future(body, timeout=20))
            older_code = rpc.code(older)  # before its message is released
            server.service.evict_after_s = 60.0  # no more evictions
            # the cancelled call holds a slot until its handler returns, which its client
            # hearing CANCELLED does not wait for
            assert wait_until(lambda: server.service._served == 1)
            for _ in range(5):  # the third call can lose the free slot to a first export
                third = stream.future(rpc.held(release, body), timeout=20)
                codes = _until_refused(server, body, third)
                if codes[-1] is grpc.StatusCode.RESOURCE_EXHAUSTED:
                    break
        finally:
            release.set()
        others = rpc.code(younger), rpc.code(third)
        evicted = server.collector.counters.get("requests_rejected_total:reason", "evicted")
    assert served is grpc.StatusCode.OK
    assert older_code is grpc.StatusCode.CANCELLED
    assert codes[-1] is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert others == (grpc.StatusCode.OK, grpc.StatusCode.OK)
    assert evicted == 1


def _slot_held(server: Receiver, body: bytes, while_held: Callable[[], T]
               ) -> tuple[list[grpc.StatusCode], grpc.StatusCode, T | None]:
    """With a receiver of one slot: a call held open (its message sent once released)
    while ``body`` is exported until one is refused, then ``while_held()`` if one was;
    tried again (at most 5 times) while the held call is not served, as it can lose the
    slot to a first export. The exports' codes, the held call's, and what
    ``while_held`` returned."""
    for _ in range(5):
        release = threading.Event()
        held = rpc.streaming(server.channel).future(rpc.held(release, body), timeout=20)
        try:
            codes = _until_refused(server, body, held)
            done = while_held() if codes[-1] is grpc.StatusCode.RESOURCE_EXHAUSTED else None
        finally:
            release.set()
        held_code = rpc.code(held)
        if held_code is grpc.StatusCode.OK:
            break
    return codes, held_code, done


def test_a_call_not_yet_waiting_long_keeps_its_slot() -> None:
    """A new call does not cancel one that has waited less than ``evict_after_s``: it is
    refused (RESOURCE_EXHAUSTED, retried), and the open call is served once its message
    comes."""
    body = request(task_trace("T-young")).SerializeToString()
    with receiver(max_concurrent_rpcs=1, evict_after_s=60) as server:
        codes, held_code, _ = _slot_held(server, body, lambda: None)
        evicted = server.collector.counters.get("requests_rejected_total:reason", "evicted")
    assert codes[-1] is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert held_code is grpc.StatusCode.OK
    assert evicted == 0


def test_every_call_refused_at_the_cap_carries_a_retry_delay() -> None:
    """A burst of calls at a receiver whose one slot is taken: each is refused with
    RESOURCE_EXHAUSTED and a RetryInfo delay (exporters retry it only with one), none by
    grpcio's own limit, which gives none; each is counted."""
    body = request(task_trace("T-burst")).SerializeToString()
    with receiver(max_concurrent_rpcs=1, evict_after_s=60) as server:
        def burst() -> tuple[list[Exception | None], float]:
            busy = server.collector.counters.get
            before = busy("requests_rejected_total:reason", "busy")
            calls = [rpc.unary(server.channel).future(body, timeout=20) for _ in range(40)]
            refused = [call.exception() for call in calls]
            return refused, busy("requests_rejected_total:reason", "busy") - before

        _, _, done = _slot_held(server, body, burst)
    assert done is not None
    refused, counted = done
    for error in refused:
        assert isinstance(error, grpc.RpcError) and isinstance(error, grpc.Call)
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "google.rpc.retryinfo-bin" in dict(error.trailing_metadata() or ())
    assert counted == 40


class _TakenAsItsMessageComes(TraceService):
    """The read timeout's watch takes each call to cancel it just as its message comes:
    the moment a call's message and its cancellation can cross."""

    returned = threading.Event()
    """Set once a call's handler has returned (its client is answered before)."""

    def export(self, requests: Iterator[bytes],
               context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        def arriving() -> Iterator[bytes]:
            message = next(requests)
            time.sleep(0.05)  # past the read timeout
            self._cancel_stalled(False)
            yield message

        try:
            return super().export(arriving(), context)
        finally:
            self.returned.set()


def test_a_call_cancelled_as_its_message_comes_is_not_offered() -> None:
    """A call taken to be cancelled is told CANCELLED, and so its client sends it again:
    its message, though read, must not be assembled as well (it would be twice)."""
    with receiver(kind=_TakenAsItsMessageComes, read_timeout_s=0.01) as server:
        code = rpc.code(rpc.unary(server.channel).future(
            request(task_trace("T-crossed")).SerializeToString(), timeout=20))
        assert _TakenAsItsMessageComes.returned.wait(20)
        offered = server.collector.counters.get("spans_received_total:protocol", "grpc")
        server.collector.close(10)
    assert code is grpc.StatusCode.CANCELLED
    assert offered == 0
    assert server.sink.diaries == []
