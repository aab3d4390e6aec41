"""Compressed bodies: gzip, ``deflate`` and zstd, inflated up to a cap, nothing more held."""

from __future__ import annotations

import contextlib
import gzip
import sys
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_diary.errors import DecodeError, TooLarge
from otel_diary.receiver.bodies import Inflater, decompress, inflate, inflated_size, unzstd

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd


def test_inflate_stops_a_gzip_bomb_before_it_grows() -> None:
    """A small body inflating far past the cap raises after at most the cap is held."""
    bomb = gzip.compress(bytes(64 * 2**20), 9)
    assert len(bomb) < 2**20
    inflater = Inflater(2**20)
    with pytest.raises(TooLarge):
        inflater.feed(bomb)
    assert inflater.size <= 2**20 + 1


def test_inflate_reads_concatenated_members() -> None:
    """Two gzip members inflate to their concatenation."""
    assert inflate(gzip.compress(b"abc") + gzip.compress(b"def"), 100) == b"abcdef"


def test_inflate_refuses_truncated_and_garbage_data() -> None:
    """Cut-short or non-gzip data is a decode error."""
    with pytest.raises(DecodeError):
        inflate(gzip.compress(b"x" * 1000)[:-10], 10_000)
    with pytest.raises(DecodeError):
        inflate(b"not gzip at all", 10_000)
    with pytest.raises(DecodeError):
        inflate(zlib.compress(b"zlib, not gzip"), 10_000)


def test_zstd_frames_are_read_one_after_another() -> None:
    """One frame, two frames, a frame that does not say its size (as a stream encoder
    writes it) and an empty one each decompress to what was compressed."""
    streamed = zstd.ZstdCompressor()
    unsized = streamed.compress(b"streamed") + streamed.flush()
    assert zstd.get_frame_info(unsized).decompressed_size is None
    assert unzstd(zstd.compress(b"abc"), 100) == b"abc"
    assert unzstd(zstd.compress(b"abc") + zstd.compress(b"def"), 100) == b"abcdef"
    assert unzstd(unsized + zstd.compress(b""), 100) == b"streamed"
    assert decompress(zstd.compress(b"abc"), "zstd", 100) == b"abc"


def test_a_zstd_bomb_stops_at_the_cap() -> None:
    """256 MiB of zeros in a few kilobytes: refused once the cap is passed, whether the
    frame says its size (counted ahead as the cap) or not (as eight times its size)."""
    zeros = bytes(256 * 2**20)
    streamed = zstd.ZstdCompressor()
    sized, unsized = zstd.compress(zeros), streamed.compress(zeros) + streamed.flush()
    for bomb in (sized, unsized):
        assert len(bomb) < 2**20
        with pytest.raises(TooLarge):
            unzstd(bomb, 2**20)
    assert inflated_size(sized, "zstd", 2**20) == 2**20
    assert inflated_size(unsized, "zstd", 2**20) == 8 * len(unsized)


@pytest.mark.parametrize("body, says", [
    (zstd.compress(b"x" * 1000)[:-3], "truncated zstd data"),
    (b"not zstd at all", "invalid zstd data"),
    (zstd.compress(b"abc") + b"more", "invalid zstd data"),
    (b"", "empty zstd body"),
])
def test_zstd_that_is_cut_short_or_not_zstd_is_a_decode_error(body: bytes, says: str) -> None:
    with pytest.raises(DecodeError, match=says):
        unzstd(body, 10_000)


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
