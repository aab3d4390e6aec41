"""OTLP/gRPC receiver: ``opentelemetry.proto.collector.trace.v1.TraceService/Export``.

Requests up to a cap (16 MiB by default, gzip-compressed or not) are decoded and assembled
like OTLP/HTTP ones. Status codes follow the OTLP specification: INVALID_ARGUMENT for what
cannot be decoded, UNAUTHENTICATED, RESOURCE_EXHAUSTED (with ``RetryInfo``) when the
requests being decoded at once hold their memory budget or too many calls are in flight,
and UNAVAILABLE when assembly memory is full or the service is stopping; both are retried.

Memory is bounded before a message is read: grpcio receives a unary request before it
calls the handler, so ``Export`` is served as a client-streaming method (the same bytes on
the wire) that checks the credentials and the collector's room first, and only then asks
for the message; at most ``max_concurrent_rpcs`` calls are served at once. Past that, a new
call cancels the one that has waited longest for its message, once that one has waited
:data:`EVICT_AFTER_S` (as the HTTP receiver closes the connection waiting longest), so a
few stalled clients cannot lock every other one out until the read timeout; when none
has, the new call is refused at once (RESOURCE_EXHAUSTED) without being read.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
from google.protobuf.any_pb2 import Any as AnyMessage
from google.protobuf.duration_pb2 import Duration
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from otel_diary.assembly.journal import JournalError
from otel_diary.conventions import Conventions
from otel_diary.errors import DecodeError
from otel_diary.pipeline.redact import redact
from otel_diary.receiver.admission import Admission, Collector
from otel_diary.receiver.decode import PROTOBUF, decode
from otel_diary.receiver.http import token_offered
from otel_diary.runner import Runner

logger = logging.getLogger("otel_diary")

MAX_MESSAGE_BYTES = 16 * 2**20
"""Largest request message (after decompression); a larger one is refused by grpcio."""
MAX_CONCURRENT_RPCS = 4
"""Calls served at once; past them a new call takes a stalled call's slot
(:data:`EVICT_AFTER_S`) or is refused at once with RESOURCE_EXHAUSTED."""
WAITING_CALLS = 256
"""Calls past the slots that grpcio hands to ``export`` all the same, which gives them a
stalled call's slot or refuses them at once with a retry delay (RetryInfo: some
exporters retry RESOURCE_EXHAUSTED only with one). Past them grpcio refuses calls by
itself, without one. A call waiting for a handler thread holds at most its stream's
flow-control window."""
INFLIGHT_BYTES = 2 * MAX_MESSAGE_BYTES
"""Request bytes decoded at once; past it, RESOURCE_EXHAUSTED with a retry delay."""
SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name

_SATURATED = {
    Admission.BUSY: (grpc.StatusCode.RESOURCE_EXHAUSTED, 1,
                     "the receiver is busy; retry after the delay given"),
    Admission.STORE_FULL: (grpc.StatusCode.UNAVAILABLE, 5,
                           "assembly memory is full; retry after the delay given"),
    Admission.CLOSED: (grpc.StatusCode.UNAVAILABLE, 5, "the receiver is shutting down"),
    Admission.BEHIND: (grpc.StatusCode.UNAVAILABLE, 5,
                       "diaries are being written more slowly than tasks come; retry "
                       "after the delay given"),
    Admission.JOURNAL_FULL: (grpc.StatusCode.UNAVAILABLE, 5,
                             "the journal is full; retry after the delay given"),
}


READ_TIMEOUT_S = 30.0
"""A call whose request message has not fully arrived this long after it began is
cancelled, so a stalled client cannot keep one of the few call slots."""
EVICT_AFTER_S = 1.0
"""With every call slot taken, a new call cancels the call that has waited longest for
its message if it has waited this long (a quick exporter's message arrives in far less)."""


class TraceService:
    """The ``Export`` method; takes the raw request bytes so decode errors are its own."""

    def __init__(self, collector: Collector, conventions: Conventions, *,
                 token: str | None = None, inflight_bytes: int = INFLIGHT_BYTES,
                 read_timeout_s: float = READ_TIMEOUT_S,
                 max_concurrent_rpcs: int = MAX_CONCURRENT_RPCS,
                 evict_after_s: float = EVICT_AFTER_S) -> None:
        self.collector = collector
        self.conventions = conventions
        self.max_concurrent_rpcs = max_concurrent_rpcs
        self._token = token.encode() if token else None
        self._budget = inflight_bytes
        self._inflight = 0
        self._served = 0
        self._lock = threading.Lock()
        self._read_timeout_s = read_timeout_s
        self.evict_after_s = evict_after_s
        self._reading: dict[int, tuple[float, grpc.ServicerContext]] = {}
        """Calls waiting for their message: when each began, and its context; in the
        order they began (each is added under the lock with the time read then)."""
        self._calls = itertools.count()
        self._watch = Runner("otel-diary-grpc-watch", self._cancel_stalled,
                             interval_s=min(read_timeout_s / 4, 1.0))

    def close(self) -> None:
        """Stop the thread that cancels stalled calls."""
        self._watch.stop(1.0)

    def _cancel_stalled(self, stopping: bool) -> None:
        """One round of the watch: cancel the calls whose message is late."""
        since = time.monotonic() - self._read_timeout_s
        with self._lock:
            calls = list(itertools.takewhile(lambda call: self._reading[call][0] <= since,
                                             self._reading))  # the first to begin
            late = [self._reading.pop(call)[1] for call in calls]
        for context in late:
            context.cancel()
        if late:
            self.collector.counters.add("requests_rejected_total:reason", "stalled", len(late))

    def _receive(self, requests: Iterator[bytes],
                 context: grpc.ServicerContext) -> bytes | None:
        """The call's one request message, watched: cancelled past the read timeout, or
        for a new call (:meth:`_take_slot`). A call taken from ``_reading`` to be cancelled
        is, even if its message came meanwhile: its client is told CANCELLED and sends
        it again, so it must not be offered as well."""
        call = next(self._calls)
        with self._lock:
            self._reading[call] = (time.monotonic(), context)
        self._watch.start()
        try:
            request = next(requests, None)
        finally:
            with self._lock:
                taken = self._reading.pop(call, None) is None
        if taken:
            context.abort(grpc.StatusCode.CANCELLED, "the call waited too long for its request")
        return request

    def _take_slot(self) -> bool:
        """A call slot for a new call: a free one, or the slot of the call that has waited
        longest for its message, cancelled, if it has waited ``evict_after_s``. (A
        cancelled call counts past the slots until its handler returns, holding no
        message; the handler threads, twice the slots, bound them all.)"""
        with self._lock:
            if self._served < self.max_concurrent_rpcs:
                self._served += 1
                return True
            oldest = next(iter(self._reading), None)  # the first to begin
            if oldest is None:
                return False
            began, context = self._reading[oldest]
            if time.monotonic() - began < self.evict_after_s:
                return False
            del self._reading[oldest]
            self._served += 1
        context.cancel()
        self.collector.counters.add("requests_rejected_total:reason", "evicted")
        return True

    def export(self, requests: Iterator[bytes],
               context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        """Check the credentials and the room left, then read the one request message."""
        counters = self.collector.counters
        if self._token is not None and not self._authorized(context):
            counters.add("requests_rejected_total:reason", "unauthenticated")
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong credentials")
        admission = self.collector.saturation()
        if admission is not Admission.ACCEPTED:
            self._refuse(context, admission, 0)
        if not self._take_slot():
            self._refuse(context, Admission.BUSY, 0)
        try:
            return self._export(requests, context)
        finally:
            with self._lock:
                self._served -= 1

    def _export(self, requests: Iterator[bytes],
                context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        """Read, decode and offer the request of a call that holds a slot."""
        counters = self.collector.counters
        request = self._receive(requests, context)
        if request is None:
            counters.add("requests_rejected_total:reason", "undecodable")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the call carried no request")
        size = len(request)
        with self._lock:
            busy = self._inflight + size > self._budget
            if not busy:
                self._inflight += size
        if busy:
            self._refuse(context, Admission.BUSY, 0)
        try:
            batch = decode(request, PROTOBUF, self.conventions)
        except DecodeError as exc:
            counters.add("requests_rejected_total:reason", "undecodable")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, redact(str(exc)))  # it may quote
        finally:
            with self._lock:
                self._inflight -= size
        admission, durable = self.collector.offer(batch)
        if admission is Admission.TOO_LARGE:
            counters.add("requests_rejected_total:reason", "too_large")
            counters.add("spans_rejected_total:reason", "too_large", batch.spans)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "the request holds more spans than the receiver can assemble at once")
        if admission is not Admission.ACCEPTED:
            self._refuse(context, admission, batch.spans)
        if durable is not None:  # acknowledged only once journaled
            try:
                durable.result()
            except JournalError:
                self._refuse(context, Admission.JOURNAL_FULL, batch.spans)
        counters.add("spans_received_total:protocol", "grpc", batch.spans)
        response = ExportTraceServiceResponse()
        if batch.rejected:
            counters.add("spans_rejected_total:reason", "invalid_id", batch.rejected)
            response.partial_success.CopyFrom(ExportTracePartialSuccess(
                rejected_spans=batch.rejected, error_message=batch.reason))
        return response

    def _authorized(self, context: grpc.ServicerContext) -> bool:
        assert self._token is not None
        metadata = {key.lower(): value for key, value in context.invocation_metadata()
                    if isinstance(value, str)}
        return token_offered(metadata, self._token)

    def _refuse(self, context: grpc.ServicerContext, admission: Admission, spans: int) -> None:
        code, delay, message = _SATURATED[admission]
        counters = self.collector.counters
        counters.add("requests_rejected_total:reason", admission.value)
        if spans:
            counters.add("spans_rejected_total:reason", admission.value, spans)
        retry_info = error_details_pb2.RetryInfo(retry_delay=Duration(seconds=delay))
        detail = AnyMessage()
        detail.Pack(retry_info)
        status = status_pb2.Status(code=code.value[0], message=message, details=[detail])
        context.set_trailing_metadata((
            ("google.rpc.retryinfo-bin", retry_info.SerializeToString()),
            ("grpc-status-details-bin", status.SerializeToString()),
        ))
        context.abort(code, message)


def grpc_server(service: TraceService, host: str, port: int, *,
                max_message_bytes: int = MAX_MESSAGE_BYTES,
                tls: tuple[bytes, bytes] | None = None) -> tuple[grpc.Server, int]:
    """A started gRPC server for ``service`` on ``host:port``, over TLS alone with ``tls``
    (the private key and the certificate chain, PEM); returns it and its port.

    It serves ``service.max_concurrent_rpcs`` calls at once, each on its own thread, and
    has as many threads again for ``export`` to refuse calls past them (or to cancel the
    stalled calls they replace), :data:`WAITING_CALLS` at most waiting for one; it
    refuses a message larger than ``max_message_bytes``.
    """
    slots = service.max_concurrent_rpcs
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=2 * slots, thread_name_prefix="otel-diary-grpc"),
        options=[("grpc.max_receive_message_length", max_message_bytes),
                 ("grpc.max_send_message_length", 4 * 2**20),
                 ("grpc.so_reuseport", 0)],
        maximum_concurrent_rpcs=slots + WAITING_CALLS,
    )
    handler = grpc.method_handlers_generic_handler(SERVICE, {
        # Client-streaming on the server's side only: nothing is read before export asks.
        "Export": grpc.stream_unary_rpc_method_handler(
            service.export,
            request_deserializer=None,
            response_serializer=ExportTraceServiceResponse.SerializeToString,
        ),
    })
    server.add_generic_rpc_handlers((handler,))
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    bound = server.add_secure_port(address, grpc.ssl_server_credentials([tls])) if tls \
        else server.add_insecure_port(address)
    if bound == 0:
        raise OSError(f"cannot listen for OTLP/gRPC on {address}")
    server.start()
    return server, bound
