"""``otel-diary serve`` over OTLP/gRPC: what it refuses before reading a request, and why."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.cli.test_serve import Serve
from tests.support import grpc_calls as rpc
from tests.support.otlp_build import protobuf_body, task_trace

TOKEN = "grpc-limits-token-0123"
BEARER = (("authorization", f"Bearer {TOKEN}"),)


def _peak_and_now(pid: int) -> tuple[int, int]:
    """VmHWM and VmRSS of ``pid``, in bytes."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) * 1024
    return found["VmHWM"], found["VmRSS"]


def _channel(server: Serve) -> grpc.Channel:
    return grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}", options=[
        ("grpc.max_send_message_length", 256 * 2**20)])


def _once_a_slot_is_free(channel: grpc.Channel, body: bytes) -> grpc.StatusCode:
    """The status of an export, retried while RESOURCE_EXHAUSTED (as exporters do): a
    call's slot is free only once its handler has returned, a moment after its answer."""
    for _ in range(100):  # bounded: about 5 s
        code = rpc.code(rpc.unary(channel).future(body, timeout=10, metadata=BEARER))
        if code is not grpc.StatusCode.RESOURCE_EXHAUSTED:
            return code
        time.sleep(0.05)
    return code


@pytest.fixture
def serve(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Serve]:
    env = {"OTEL_DIARY_SERVE_TOKEN": TOKEN, **getattr(request, "param", {})}
    server = Serve(tmp_path, env=env)
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.stop()


def test_unauthenticated_calls_are_refused_before_their_message_is_read(serve: Serve) -> None:
    """Eight concurrent 15 MiB calls without credentials are refused, and the server's
    peak memory grows by far less than the 120 MiB they carry."""
    body = b"\x0a" + b"\x00" * (15 * 2**20)  # never decoded: refused before it is read
    with _channel(serve) as channel:
        export = rpc.unary(channel)
        # The server's first calls set up its own threads and buffers: not what is measured.
        assert rpc.code(export.future(b"\x0a\x00", timeout=60)) is grpc.StatusCode.UNAUTHENTICATED
        peak_before, _ = _peak_and_now(serve.process.pid)
        calls = [export.future(body, timeout=60) for _ in range(8)]
        codes = {rpc.code(call) for call in calls}
    peak_after, _ = _peak_and_now(serve.process.pid)
    assert codes == {grpc.StatusCode.UNAUTHENTICATED}
    assert peak_after - peak_before < 40 * 2**20


@pytest.mark.parametrize("serve", [{"OTEL_DIARY_SERVE_GRPC_MAX_CONCURRENT_RPCS": "1"}],
                         indirect=True)
def test_calls_past_the_concurrency_cap_are_refused_at_once(serve: Serve) -> None:
    """With one call slot taken by an open call, the next is refused with
    RESOURCE_EXHAUSTED (retried by exporters); once it ends, calls are served again."""
    body = protobuf_body(task_trace("T-cap"))
    with _channel(serve) as channel:
        export = rpc.unary(channel)
        for _ in range(5):  # bounded: the open call can lose the one slot to a first probe
            release = threading.Event()
            held = rpc.streaming(channel).future(rpc.held(release, body), timeout=30,
                                              metadata=BEARER)
            try:
                codes = []
                for _ in range(100):  # bounded: until the open call holds its slot
                    codes.append(rpc.code(export.future(body, timeout=10, metadata=BEARER)))
                    if codes[-1] is grpc.StatusCode.RESOURCE_EXHAUSTED or held.done():
                        break
            finally:
                release.set()
            held_code = rpc.code(held)
            if held_code is grpc.StatusCode.OK:
                break
            _once_a_slot_is_free(channel, body)
        after = _once_a_slot_is_free(channel, body)
    assert held_code is grpc.StatusCode.OK
    assert codes[-1] is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert after is grpc.StatusCode.OK


@pytest.mark.parametrize("serve", [{"OTEL_DIARY_SERVE_GRPC_MAX_CONCURRENT_RPCS": "1",
                                    "OTEL_DIARY_SERVE_BODY_TIMEOUT_S": "0.5"}], indirect=True)
def test_a_call_whose_message_never_comes_is_cancelled(serve: Serve) -> None:
    """A call that never sends its request is cancelled at the read timeout, freeing its
    slot for the next caller."""
    release = threading.Event()
    body = protobuf_body(task_trace("T-stall"))
    with _channel(serve) as channel:
        stalled = rpc.streaming(channel).future(rpc.held(release, body), timeout=15,
                                                      metadata=BEARER)
        try:
            code = rpc.code(stalled)
        finally:
            release.set()
        after = _once_a_slot_is_free(channel, body)
    assert code is grpc.StatusCode.CANCELLED
    assert after is grpc.StatusCode.OK
    assert serve.metrics()['otel_diary_requests_rejected_total{reason="stalled"}'] == 1


def test_a_message_over_the_default_cap_is_refused(serve: Serve) -> None:
    """A 17 MiB request passes the 16 MiB default cap and is refused."""
    body = b"\x0a" + b"\x00" * (17 * 2**20)
    with _channel(serve) as channel:
        code = rpc.code(rpc.unary(channel).future(body, timeout=60, metadata=BEARER))
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED


def test_stalled_calls_give_their_slots_to_new_calls(serve: Serve) -> None:
    """With every call slot (4 by default) held by a call whose message never comes, a
    new call is served within seconds, not after the 30 s read timeout: it cancels the
    call that has waited longest for its message, once that one has waited a second."""
    release = threading.Event()
    body = protobuf_body(task_trace("T-evict"))
    with _channel(serve) as channel:
        stalled = [rpc.streaming(channel).future(rpc.held(release, body), timeout=25,
                                              metadata=BEARER) for _ in range(4)]
        try:
            time.sleep(1.5)  # every stalled call has waited past the second by now
            began = time.monotonic()
            served = _once_a_slot_is_free(channel, body)
            waited = time.monotonic() - began
        finally:
            release.set()
        codes = sorted(rpc.code(call).value for call in stalled)
    assert served is grpc.StatusCode.OK
    assert waited < 10  # the read timeout is 30 s
    # One was cancelled for the new call; the others' messages came once released.
    assert codes == [grpc.StatusCode.OK.value] * 3 + [grpc.StatusCode.CANCELLED.value]
    assert serve.metrics()['otel_diary_requests_rejected_total{reason="evicted"}'] >= 1
