"""Raw OTLP/gRPC ``Export`` calls for tests: unary, or left open until released."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import grpc

from otel_diary.receiver.grpc import SERVICE

METHOD = f"/{SERVICE}/Export"


def unary(channel: grpc.Channel) -> grpc.UnaryUnaryMultiCallable[bytes, bytes]:
    return channel.unary_unary(METHOD)


def streaming(channel: grpc.Channel) -> grpc.StreamUnaryMultiCallable[bytes, bytes]:
    return channel.stream_unary(METHOD)


def held(release: threading.Event, body: bytes) -> Iterator[bytes]:
    """A request that arrives only once ``release`` is set (a call left open until then)."""
    release.wait(20)
    yield body


def code(call: grpc.Future[bytes]) -> grpc.StatusCode:
    """The call's status once it ends."""
    try:
        call.result()
    except grpc.RpcError as exc:
        status: grpc.StatusCode = exc.code()
        return status
    return grpc.StatusCode.OK
