"""Compressed OTLP/HTTP bodies: gzip, ``deflate`` and zstd, inflated up to a cap.

The content encodings the Collector's OTLP receiver reads that exporters send: the SDKs'
gzip (and Python's ``Compression.Deflate``), and zstd, which the Collector's ``otlp_http``
exporter offers and vendors recommend. Each stops as soon as its output passes the cap:
a small body that would inflate to gigabytes (a bomb) costs at most the cap in memory.
"""

from __future__ import annotations

import sys
import zlib
from types import ModuleType

from otel_diary.errors import DecodeError, TooLarge

ENCODINGS = {"gzip": "gzip", "deflate": "deflate", "zlib": "deflate", "zstd": "zstd"}
"""The content encodings read, and the format of each (the Collector's receiver reads
``deflate`` and ``zlib`` both as a zlib stream); ``identity`` (or none) is read as it is."""
DEFLATE_RATIO = 8
"""How many times its size a body that does not say is counted to inflate to ahead
(OTLP compresses about 5 to 10 times; the inflater stops at the cap anyway)."""

GZIP_WBITS = 31
DEFLATE_WBITS = 15
"""``zlib`` window bits of the two encodings read: gzip, and ``deflate`` (a zlib stream, as
HTTP's ``deflate`` and the SDK's ``Compression.Deflate`` send it)."""


class Inflater:
    """Inflates a gzip (or ``deflate``: ``wbits``) body chunk by chunk and stops as soon as
    the output passes ``limit``.

    A small body that would inflate to gigabytes (a bomb) costs at most ``limit`` bytes of
    memory. Concatenated gzip members are inflated one after another.
    """

    def __init__(self, limit: int, wbits: int = GZIP_WBITS) -> None:
        self._limit = limit
        self._size = 0
        self._chunks: list[bytes] = []
        self._wbits = wbits
        self._name = "gzip" if wbits == GZIP_WBITS else "deflate"
        self._inflater = zlib.decompressobj(wbits=wbits)
        self._started = False

    @property
    def size(self) -> int:
        """Bytes inflated so far."""
        return self._size

    def feed(self, data: bytes) -> None:
        """Inflate ``data``; raises :class:`TooLarge` past the limit, :class:`DecodeError`."""
        inflater = self._inflater
        while data:
            if inflater.eof:  # a new gzip member follows the last one
                if self._wbits != GZIP_WBITS:
                    raise DecodeError("data after the end of the deflate stream")
                inflater = self._inflater = zlib.decompressobj(wbits=self._wbits)
            self._started = True
            try:
                chunk = inflater.decompress(data, self._limit - self._size + 1)
            except zlib.error as exc:
                raise DecodeError(f"invalid {self._name} data: {exc}") from None
            self._size += len(chunk)
            if self._size > self._limit:
                raise TooLarge(f"body inflates past {self._limit} bytes")
            if chunk:
                self._chunks.append(chunk)
            # Output short of max_length means all input was consumed or the member ended.
            data = inflater.unused_data if inflater.eof else inflater.unconsumed_tail

    def finish(self) -> bytes:
        """The inflated body; raises :class:`DecodeError` when the stream is cut short."""
        if self._started and not self._inflater.eof:
            raise DecodeError(f"truncated {self._name} data")
        if not self._started:
            raise DecodeError(f"empty {self._name} body")
        return b"".join(self._chunks)


def inflate(body: bytes, limit: int, wbits: int = GZIP_WBITS) -> bytes:
    """``body`` gunzipped (or, with ``wbits``, inflated), at most ``limit`` bytes (else
    :class:`TooLarge`)."""
    inflater = Inflater(limit, wbits)
    inflater.feed(body)
    return inflater.finish()


def _zstd() -> ModuleType:
    """The standard library's zstd module (Python 3.14), or its backport (the ``serve``
    extra installs it on older Pythons)."""
    if sys.version_info >= (3, 14):
        from compression import zstd
    else:
        from backports import zstd
    return zstd


def unzstd(body: bytes, limit: int) -> bytes:
    """``body`` (one zstd frame or more, one after another) decompressed, at most
    ``limit`` bytes (else :class:`TooLarge`); :class:`DecodeError` when it is not zstd,
    or is cut short."""
    if not body:
        raise DecodeError("empty zstd body")
    zstd = _zstd()
    chunks: list[bytes] = []
    size = 0
    while body:
        frame = zstd.ZstdDecompressor()  # its window: at most 128 MiB, filled as it writes
        try:
            chunk = frame.decompress(body, limit - size + 1)
            while True:
                size += len(chunk)
                if size > limit:
                    raise TooLarge(f"body inflates past {limit} bytes")
                chunks.append(chunk)
                if frame.eof or frame.needs_input:
                    break
                chunk = frame.decompress(b"", limit - size + 1)
        except zstd.ZstdError as exc:
            raise DecodeError(f"invalid zstd data: {exc}") from None
        if not frame.eof:
            raise DecodeError("truncated zstd data")
        body = frame.unused_data
    return b"".join(chunks)


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` sent with the content encoding ``encoding`` (a key of :data:`ENCODINGS`),
    at most ``limit`` bytes (else :class:`TooLarge`)."""
    form = ENCODINGS[encoding]
    if form == "zstd":
        return unzstd(body, limit)
    return inflate(body, limit, GZIP_WBITS if form == "gzip" else DEFLATE_WBITS)


def inflated_size(body: bytes, encoding: str, cap: int) -> int:
    """What a compressed body will inflate to, at most ``cap``: what it says (a gzip
    body's last member's trailer, a zstd frame's header), else :data:`DEFLATE_RATIO`
    times its size. Only an estimate to count ahead: decompressing stops at ``cap``."""
    form = ENCODINGS[encoding]
    if form == "gzip":
        return min(int.from_bytes(body[-4:], "little"), cap) if len(body) >= 18 else 0
    if form == "zstd":
        try:
            said: int | None = _zstd().get_frame_info(body).decompressed_size
        except Exception:  # not zstd: decompressing says why
            said = None
        if said is not None:
            return min(said, cap)
    return min(DEFLATE_RATIO * len(body), cap)
