"""OTLP/gRPC receiver: ``opentelemetry.proto.collector.trace.v1.TraceService/Export``.

Requests up to 64 MiB (gzip-compressed or not) are decoded and assembled like OTLP/HTTP
ones. Status codes follow the OTLP specification: INVALID_ARGUMENT for what cannot be
decoded, UNAUTHENTICATED, RESOURCE_EXHAUSTED (with ``RetryInfo``) when the requests being
decoded at once hold their memory budget, and UNAVAILABLE when assembly memory is full or
the service is stopping; both are retried.
"""

from __future__ import annotations

import logging
import threading
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
from otel_diary.receiver.admission import Admission, Collector
from otel_diary.receiver.decode import PROTOBUF, decode
from otel_diary.receiver.http import token_offered

logger = logging.getLogger("otel_diary")

MAX_MESSAGE_BYTES = 64 * 2**20
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


class TraceService:
    """The ``Export`` method; takes the raw request bytes so decode errors are its own."""

    def __init__(self, collector: Collector, conventions: Conventions, *,
                 token: str | None = None, inflight_bytes: int = INFLIGHT_BYTES) -> None:
        self.collector = collector
        self.conventions = conventions
        self._token = token.encode() if token else None
        self._budget = inflight_bytes
        self._inflight = 0
        self._lock = threading.Lock()

    def export(self, request: bytes, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        counters = self.collector.counters
        if self._token is not None and not self._authorized(context):
            counters.add("requests_rejected_total:reason", "unauthenticated")
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong credentials")
        admission = self.collector.saturation()
        if admission is not Admission.ACCEPTED:
            self._refuse(context, admission, 0)
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
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
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
                workers: int = 8) -> tuple[grpc.Server, int]:
    """A started gRPC server for ``service`` on ``host:port``; returns it and its port."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="otel-diary-grpc"),
        options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.max_send_message_length", 4 * 2**20),
                 ("grpc.so_reuseport", 0)],
        maximum_concurrent_rpcs=4 * workers,
    )
    handler = grpc.method_handlers_generic_handler(SERVICE, {
        "Export": grpc.unary_unary_rpc_method_handler(
            service.export,
            request_deserializer=None,
            response_serializer=ExportTraceServiceResponse.SerializeToString,
        ),
    })
    server.add_generic_rpc_handlers((handler,))
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    bound = server.add_insecure_port(address)
    if bound == 0:
        raise OSError(f"cannot listen for OTLP/gRPC on {address}")
    server.start()
    return server, bound
