"""OTLP/HTTP receiver: an ASGI app for ``POST /v1/traces``, ``GET /health``, ``GET /metrics``.

Status codes follow the OTLP specification and the Collector's receiver: 200 with an
``ExportTraceServiceResponse`` (``partial_success`` when spans were refused), 400 for what
cannot be decoded, 401, 404, 405, 413 past the size cap (checked while reading and
inflating), 415, and 429/503 with ``Retry-After`` when saturated. Error bodies are
``google.rpc.Status``. The handler decodes and assembles; it never waits on I/O or the pipeline.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

from otel_diary.assembly.batch import Batch
from otel_diary.assembly.journal import JournalError
from otel_diary.conventions import Conventions
from otel_diary.errors import DecodeError, TooLarge
from otel_diary.receiver.admission import Admission, Collector
from otel_diary.receiver.bodies import ENCODINGS, decompress, inflated_size
from otel_diary.receiver.decode import (
    JSON,
    MEDIA_TYPES,
    PROTOBUF,
    decode,
    export_response,
    status_body,
)
from otel_diary.receiver.json_reader import decoding_cost
from otel_diary.receiver.metrics import metrics_text

logger = logging.getLogger("otel_diary")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

TRACES_PATH = "/v1/traces"
OFFLOAD_BYTES = 1 << 20
"""Protobuf bodies at least this large are decoded on a worker thread, keeping the loop
responsive (OTLP/JSON and compressed bodies always are)."""
MAX_JSON_COST = 16
"""Most an OTLP/JSON text may cost to decode per byte of it, as ``decoding_cost`` estimates:
OTLP/JSON is estimated at 8 to 13 times its text; a text of empty objects at 65."""

# gRPC status codes used in google.rpc.Status bodies.
_INVALID_ARGUMENT = 3
_NOT_FOUND = 5
_RESOURCE_EXHAUSTED = 8
_UNIMPLEMENTED = 12
_UNAVAILABLE = 14
_UNAUTHENTICATED = 16

_ACCEPTED = {media_type: export_response(media_type) for media_type in MEDIA_TYPES}
"""The response to a request whose spans were all taken, by content type."""

_SATURATED = {
    Admission.BUSY: (429, _RESOURCE_EXHAUSTED, 1,
                     "the receiver is busy; retry after the delay given"),
    Admission.STORE_FULL: (503, _UNAVAILABLE, 5,
                           "assembly memory is full; retry after the delay given"),
    Admission.CLOSED: (503, _UNAVAILABLE, 5, "the receiver is shutting down"),
    Admission.BEHIND: (503, _UNAVAILABLE, 5,
                       "diaries are being written more slowly than tasks come; retry "
                       "after the delay given"),
    Admission.JOURNAL_FULL: (503, _UNAVAILABLE, 5,
                             "the journal is full; retry after the delay given"),
}


def token_offered(headers: Mapping[str, str], token: bytes) -> bool:
    """True when lower-cased ``headers`` carry ``token`` as ``x-api-key`` or a bearer token.

    Both receivers (HTTP headers, gRPC metadata) authenticate with it.
    """
    offered = headers.get("x-api-key")
    if offered is None:
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        offered = credentials.strip()
    return hmac.compare_digest(offered.encode(), token)


class _Refused(Exception):
    def __init__(self, status: int, code: int, message: str, reason: str,
                 headers: tuple[tuple[bytes, bytes], ...] = (), spans: int = 0) -> None:
        super().__init__(message)
        self.spans = spans
        self.status = status
        self.code = code
        self.message = message
        self.reason = reason
        self.headers = headers


class OtlpHttpApp:
    """The OTLP/HTTP receiver as an ASGI application.

    Usage::

        app = OtlpHttpApp(collector, conventions, token="s3cret")
        uvicorn.run(app, host="127.0.0.1", port=4318)
    """

    def __init__(
        self,
        collector: Collector,
        conventions: Conventions,
        *,
        token: str | None = None,
        max_body_bytes: int = 20 * 2**20,
        inflight_bytes: int | None = None,
        decoder: Executor | None = None,
    ) -> None:
        self.collector = collector
        self.conventions = conventions
        self._token = token.encode() if token else None
        self.max_body_bytes = max_body_bytes
        self._budget = inflight_bytes or max(2 * max_body_bytes, 64 * 2**20)
        self._inflight = 0
        self._executor = decoder or ThreadPoolExecutor(max_workers=2,
                                                       thread_name_prefix="otel-diary-decode")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope.get("path", "")
        method = scope.get("method", "GET")
        if path == TRACES_PATH:
            await self._traces(scope, receive, send, method)
        elif path == "/health" and method in ("GET", "HEAD"):
            closed = self.collector.closed
            body = json.dumps({"status": "stopping" if closed else "ok"}).encode()
            await _respond(send, 503 if closed else 200, JSON, body)
        elif path == "/metrics" and method in ("GET", "HEAD"):
            await _respond(send, 200, "text/plain; version=0.0.4; charset=utf-8",
                           metrics_text(self.collector).encode())
        else:
            self.collector.counters.add("requests_rejected_total:reason", "not_found")
            await _respond(send, 404, JSON, status_body(JSON, _NOT_FOUND, f"no route {path}"))

    async def _traces(self, scope: Scope, receive: Receive, send: Send, method: str) -> None:
        headers = _headers(scope)
        media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        reply_type = media_type if media_type in MEDIA_TYPES else JSON
        try:
            if method != "POST":
                raise _Refused(405, _UNIMPLEMENTED, f"{method} is not allowed; use POST",
                               "method_not_allowed", ((b"allow", b"POST"),))
            if self._token is not None and not token_offered(headers, self._token):
                raise _Refused(401, _UNAUTHENTICATED, "missing or wrong credentials",
                               "unauthenticated",
                               ((b"www-authenticate", b'Bearer realm="otel-diary"'),))
            if media_type not in MEDIA_TYPES:
                raise _Refused(415, _INVALID_ARGUMENT,
                               f"unsupported content type {media_type!r}; use {PROTOBUF} or "
                               f"{JSON}", "unsupported_media_type")
            encoding = headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ENCODINGS and encoding not in ("identity", ""):
                raise _Refused(415, _INVALID_ARGUMENT,
                               f"unsupported content encoding {encoding!r}; use gzip, zstd "
                               "or deflate", "unsupported_media_type")
            length = headers.get("content-length")
            if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
                raise _too_large(self.max_body_bytes)
            self._check_saturation()
            held = _Held()
            try:
                body = await self._read(receive, held)
                batch = await self._decode(body, media_type, held,
                                           encoding=encoding if encoding in ENCODINGS else None)
            finally:
                self._inflight -= held.bytes
            del body
            admission, durable = self.collector.offer(batch)
            if admission is Admission.TOO_LARGE:
                raise _too_large(self.max_body_bytes, "the request holds more spans than the "
                                 "receiver can assemble at once", batch.spans)
            if admission is not Admission.ACCEPTED:
                raise _saturated(admission, batch.spans)
            if durable is not None:  # acknowledged only once journaled
                try:
                    await asyncio.wrap_future(durable)
                except JournalError:
                    raise _saturated(Admission.JOURNAL_FULL, batch.spans) from None
        except _Refused as refused:
            self.collector.counters.add("requests_rejected_total:reason", refused.reason)
            if refused.spans:
                self.collector.counters.add("spans_rejected_total:reason", refused.reason,
                                            refused.spans)
            await _respond(send, refused.status, reply_type,
                           status_body(reply_type, refused.code, refused.message),
                           refused.headers)
            return
        except _ClientGone:
            return
        counters = self.collector.counters
        counters.add("spans_received_total:protocol", "http", batch.spans)
        if batch.rejected:
            counters.add("spans_rejected_total:reason", "invalid_id", batch.rejected)
        reply = (export_response(media_type, batch.rejected, batch.reason) if batch.rejected
                 else _ACCEPTED[media_type])
        await _respond(send, 200, media_type, reply)

    @property
    def inflight(self) -> int:
        """Bytes held by the requests being read and decoded now."""
        return self._inflight

    def _check_saturation(self) -> None:
        admission = self.collector.saturation()
        if admission is not Admission.ACCEPTED:
            raise _saturated(admission, 0)

    def _hold(self, held: _Held, size: int, *, alone: bool = False) -> None:
        """Count ``size`` more bytes for a request; 429 past the in-flight budget (unless
        ``alone`` and no other request holds any: one that needs more may go alone)."""
        held.bytes += size
        self._inflight += size
        if self._inflight > self._budget and not (alone and self._inflight == held.bytes):
            raise _saturated(Admission.BUSY, 0)

    async def _read(self, receive: Receive, held: _Held) -> bytes:
        """The body as sent (still compressed), counted in ``held`` as it arrives; 413 past
        the cap. A stalled upload holds only the bytes it has sent: it is inflated once
        complete, with the decoding."""
        cap = self.max_body_bytes
        chunks: list[bytes] = []
        raw = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _ClientGone
            chunk = message.get("body", b"")
            if chunk:
                raw += len(chunk)
                if raw > cap:
                    raise _too_large(cap)
                chunks.append(chunk)
                self._hold(held, len(chunk))
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _decode(self, body: bytes, media_type: str, held: _Held, *,
                      encoding: str | None) -> Batch:
        """The body decompressed (when ``encoding`` says how) and decoded. Every OTLP/JSON
        or compressed body is decoded on a worker thread (a small protobuf one is quicker
        to read here); what a compressed body will inflate to is counted first
        (:func:`~otel_diary.receiver.bodies.inflated_size`), so the bytes queued for and
        held by the workers stay within the in-flight budget until they are done."""
        inflated = len(body) if encoding is None else inflated_size(body, encoding,
                                                                    self.max_body_bytes)
        if encoding is not None:
            self._hold(held, inflated)
        try:
            if media_type == JSON:
                return await self._decode_json(body, held, encoding, inflated)
            if encoding is not None or len(body) >= OFFLOAD_BYTES:
                return await asyncio.get_running_loop().run_in_executor(
                    self._executor, _inflate_and_decode, body, encoding, media_type,
                    self.max_body_bytes, self.conventions)
            return decode(body, media_type, self.conventions)
        except TooLarge:
            raise _too_large(self.max_body_bytes) from None
        except DecodeError as exc:
            raise _Refused(400, _INVALID_ARGUMENT, str(exc), "undecodable") from None

    async def _decode_json(self, body: bytes, held: _Held, encoding: str | None,
                           counted: int) -> Batch:
        """OTLP/JSON: ``json.loads`` makes objects several times the text's size (6 to 9
        times for OTLP/JSON). Their estimate is counted before it runs, beyond the
        ``counted`` bytes of text; a text costing far more per byte than OTLP/JSON can (a
        bomb of empty objects) is refused, and one larger than the budget is decoded only
        while no other request holds any of it."""
        loop = asyncio.get_running_loop()
        if encoding is not None or len(body) >= OFFLOAD_BYTES:  # inflating takes one too
            text, cost = await loop.run_in_executor(
                self._executor, _json_text_and_cost, body, encoding, self.max_body_bytes)
        else:
            text, cost = body, decoding_cost(body)
        if cost > max(MAX_JSON_COST * len(text), OFFLOAD_BYTES):  # a small one harms none
            raise _too_large(self.max_body_bytes, f"this OTLP/JSON body would take about "
                             f"{cost // max(len(text), 1)} times its size to decode (OTLP/JSON "
                             f"takes under {MAX_JSON_COST}): refused")
        self._hold(held, max(cost - counted, 0), alone=True)
        return await loop.run_in_executor(self._executor, decode, text, JSON,
                                          self.conventions)

    def close(self) -> None:
        self._executor.shutdown(wait=True)


class _ClientGone(Exception):
    pass


class _Held:
    """The bytes one request counts against the in-flight budget."""

    __slots__ = ("bytes",)

    def __init__(self) -> None:
        self.bytes = 0


def _text(body: bytes, encoding: str | None, cap: int) -> bytes:
    """``body`` decompressed (when ``encoding`` says how) to at most ``cap`` bytes, else
    :class:`TooLarge`."""
    return body if encoding is None else decompress(body, encoding, cap)


def _json_text_and_cost(body: bytes, encoding: str | None, cap: int) -> tuple[bytes, int]:
    """A worker's part: the JSON text (:func:`_text`) and what decoding it will hold."""
    text = _text(body, encoding, cap)
    return text, decoding_cost(text)


def _inflate_and_decode(body: bytes, encoding: str | None, media_type: str, cap: int,
                        conventions: Conventions) -> Batch:
    """A worker's part: decompress (:func:`_text`), decode."""
    return decode(_text(body, encoding, cap), media_type, conventions)


def _too_large(cap: int, message: str = "", spans: int = 0) -> _Refused:
    return _Refused(413, _RESOURCE_EXHAUSTED,
                    message or f"the body exceeds {cap} bytes (after decompression)",
                    "too_large", spans=spans)


def _saturated(admission: Admission, spans: int) -> _Refused:
    status, code, retry_after, message = _SATURATED[admission]
    return _Refused(status, code, message, admission.value,
                    ((b"retry-after", str(retry_after).encode()),), spans)


def _headers(scope: Scope) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        headers[name.decode("latin-1").lower()] = value.decode("latin-1")
    return headers


async def _respond(send: Send, status: int, content_type: str, body: bytes,
                   headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", content_type.encode("latin-1")),
                    (b"content-length", str(len(body)).encode()), *headers],
    })
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
