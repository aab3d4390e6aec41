"""Compressed bodies: gzip, ``deflate`` and zstd, inflated up to a cap, nothing more held."""

from __future__ import annotations

import contextlib
import gzip
import sys
import tracemalloc
import zlib
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_diary.errors import DecodeError, TooLarge
from otel_diary.receiver.bodies import decompress, inflated_size

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd


@pytest.mark.parametrize("encoding, pack", [
    ("gzip", lambda data: gzip.compress(data, 9)),
    ("deflate", lambda data: zlib.compress(data, 9)),
    ("zstd", zstd.compress)])
def test_a_bomb_is_refused_with_no_more_than_the_cap_held(
        encoding: str, pack: Callable[[bytes], bytes]) -> None:
    """64 MiB of zeros in well under a megabyte: refused once the output passes 1 MiB, having
    held little more than that."""
    bomb = pack(bytes(64 * 2**20))
    assert len(bomb) < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge):
            decompress(bomb, encoding, 2**20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * 2**20


@pytest.mark.parametrize("encoding, pack", [("gzip", gzip.compress), ("zstd", zstd.compress)])
def test_members_and_frames_are_read_one_after_another(
        encoding: str, pack: Callable[[bytes], bytes]) -> None:
    """Two gzip members, or zstd frames, decompress to their concatenation; so do 1,024
    tiny ones, and one more is refused (an exporter sends one)."""
    assert decompress(pack(b"abc") + pack(b"def"), encoding, 100) == b"abcdef"
    assert decompress(pack(b"x") * 1024, encoding, 10**6) == b"x" * 1024
    with pytest.raises(DecodeError, match=f"more than 1024 {encoding}"):
        decompress(pack(b"x") * 1025, encoding, 10**6)


def test_what_is_cut_short_damaged_or_not_gzip_is_a_decode_error() -> None:
    packed = gzip.compress(b"x" * 1000)
    for body, says in [(packed[:-10], "truncated gzip data"), (b"not gzip", "invalid gzip"),
                       (zlib.compress(b"zlib, not gzip"), "invalid gzip"),
                       (packed + b"more", "invalid gzip"), (b"", "empty gzip body")]:
        with pytest.raises(DecodeError, match=says):
            decompress(body, "gzip", 10_000)
    with pytest.raises(DecodeError, match="data after the end of the deflate stream"):
        decompress(zlib.compress(b"abc") + zlib.compress(b"def"), "deflate", 100)


def test_a_zstd_frame_that_does_not_say_its_size_is_read_and_stopped_at_the_cap() -> None:
    """A frame that does not say its size (as a stream encoder writes it) decompresses to
    what was compressed, and one of 256 MiB of zeros stops at the cap; it is counted ahead
    as eight times its size, and a frame that says its size as that size."""
    streamed = zstd.ZstdCompressor()
    unsized = streamed.compress(b"streamed") + streamed.flush()
    assert zstd.get_frame_info(unsized).decompressed_size is None
    assert decompress(unsized + zstd.compress(b""), "zstd", 100) == b"streamed"
    zeros = bytes(256 * 2**20)
    bomb = streamed.compress(zeros) + streamed.flush()
    with pytest.raises(TooLarge):
        decompress(bomb, "zstd", 2**20)
    assert inflated_size(bomb, "zstd", 2**20) == 8 * len(bomb)
    assert inflated_size(zstd.compress(zeros), "zstd", 2**20) == 2**20


@pytest.mark.parametrize("body, says", [
    (zstd.compress(b"x" * 1000)[:-3], "truncated zstd data"),
    (b"not zstd at all", "invalid zstd data"),
    (zstd.compress(b"abc") + b"more", "invalid zstd data"),
    (b"", "empty zstd body"),
])
def test_zstd_that_is_cut_short_or_not_zstd_is_a_decode_error(body: bytes, says: str) -> None:
    with pytest.raises(DecodeError, match=says):
        decompress(body, "zstd", 10_000)


def test_what_a_body_will_inflate_to_is_what_it_says_else_eight_times_its_size() -> None:
    body = b"abc" * 1000
    assert inflated_size(gzip.compress(body), "gzip", 10**6) == 3000
    assert inflated_size(zstd.compress(body), "zstd", 10**6) == 3000
    assert inflated_size(zstd.compress(body), "zstd", 100) == 100
    packed = zlib.compress(body)
    assert inflated_size(packed, "deflate", 10**6) == 8 * len(packed)
    assert inflated_size(b"not zstd", "zstd", 10**6) == 64


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048), st.sampled_from(["gzip", "deflate", "zstd"]))
def test_arbitrary_bytes_never_escape_as_anything_but_decode_error(body: bytes,
                                                                   encoding: str) -> None:
    """Any bytes, in any encoding read, decompress or raise DecodeError/TooLarge."""
    with contextlib.suppress(DecodeError, TooLarge):
        decompress(body, encoding, 4096)
    inflated_size(body, encoding, 4096)
