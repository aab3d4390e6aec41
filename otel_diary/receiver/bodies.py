"""Compressed OTLP/HTTP bodies: gzip, ``deflate`` and zstd, inflated up to a cap.

The content encodings the Collector's OTLP receiver reads that exporters send: the SDKs'
gzip (and Python's ``Compression.Deflate``), and zstd, which the Collector's ``otlp_http``
exporter offers and vendors recommend. Each stops as soon as its output passes the cap:
a small body that would inflate to gigabytes (a bomb) costs at most the cap in memory.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from otel_diary.errors import DecodeError, TooLarge

ENCODINGS = {"gzip": "gzip", "deflate": "deflate", "zlib": "deflate", "zstd": "zstd"}
"""The content encodings read, and the format of each (the Collector's receiver reads
``deflate`` and ``zlib`` both as a zlib stream); ``identity`` (or none) is read as it is."""
DEFLATE_RATIO = 8
"""How many times its size a body that does not say is counted to inflate to ahead
(OTLP compresses about 5 to 10 times; the inflater stops at the cap anyway)."""

GZIP_WBITS = 31
DEFLATE_WBITS = 15
"""``zlib`` window bits of gzip, and of ``deflate`` (a zlib stream, as HTTP's ``deflate``
and the SDK's ``Compression.Deflate`` send it)."""
FIRST_PART = 256
LARGEST_PART = 1 << 16
"""Bytes of the body given to the decompressor at once: the first part of each gzip
member or zstd frame, doubled with each further part up to the largest. The rest of a
part after a member ends is copied (``unused_data``), so a body of many tiny members
costs time in proportion to its size, as one member does."""
MAX_MEMBERS = 1024
"""Most gzip members or zstd frames one body may hold (an exporter sends one): each
costs a new decompressor, a zstd one about 4 us, and a body of 16 MiB of empty frames
would hold a worker for seconds."""


def _zstd() -> ModuleType:
    """The standard library's zstd module (Python 3.14), or its backport (the ``serve``
    extra installs it on older Pythons)."""
    if sys.version_info >= (3, 14):
        from compression import zstd
    else:
        from backports import zstd
    return zstd


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` sent with the content encoding ``encoding`` (a key of :data:`ENCODINGS`),
    at most ``limit`` bytes (else :class:`TooLarge`, with no more than that held);
    :class:`DecodeError` when it is empty, damaged or cut short. Concatenated gzip members
    and zstd frames are read one after another; ``deflate`` is one stream."""
    form = ENCODINGS[encoding]
    if not body:
        raise DecodeError(f"empty {form} body")
    if form == "zstd":
        zstd = _zstd()
        return _decompressed(body, limit, form, zstd.ZstdDecompressor, zstd.ZstdError)
    wbits = GZIP_WBITS if form == "gzip" else DEFLATE_WBITS
    return _decompressed(body, limit, form, lambda: zlib.decompressobj(wbits=wbits),
                         zlib.error)


def _decompressed(body: bytes, limit: int, form: str, start: Callable[[], Any],
                  error: type[Exception]) -> bytes:
    """:func:`decompress` with the decompressor ``start`` makes, a ``zlib`` or a zstd one:
    both give at most the length asked for, short of it only once their input is used
    up or their stream has ended (then ``eof``, and the input left in ``unused_data``)."""
    view = memoryview(body)
    chunks: list[bytes] = []
    size = position = 0
    part = FIRST_PART
    stream, streams = start(), 1
    try:
        while position < len(view):
            if stream.eof:
                if form == "deflate":
                    raise DecodeError("data after the end of the deflate stream")
                if streams == MAX_MEMBERS:
                    raise DecodeError(f"more than {MAX_MEMBERS} {form} "
                                      f"{'frames' if form == 'zstd' else 'members'}")
                stream, streams = start(), streams + 1  # another gzip member, zstd frame
            given = view[position:position + part]
            chunk = stream.decompress(given, limit - size + 1)
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"body inflates past {limit} bytes")
            chunks.append(chunk)
            if stream.eof:
                position += len(given) - len(stream.unused_data)
                part = FIRST_PART
            else:
                position += len(given)
                part = min(2 * part, LARGEST_PART)
    except error as exc:
        raise DecodeError(f"invalid {form} data: {exc}") from None
    if not stream.eof:
        raise DecodeError(f"truncated {form} data")
    return b"".join(chunks)


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
