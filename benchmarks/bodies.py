"""What decompressing an OTLP/HTTP body costs, for each content encoding ``serve`` reads.

For gzip, ``deflate`` and zstd: the CPU time to decompress a realistic body (task traces
made by the test helpers, about 0.9 MiB of protobuf) next to ``zlib.decompress`` of its
gzip form (the baseline, measured in the same run); then, for gzip and zstd, bodies of
the most members or frames one body may hold (1,024), each member of 1, 4 and 16 KiB of
random bytes, next to one member holding the same bytes (what the members cost beyond
their bytes: a decompressor each, a few microseconds; not the rest of the body copied
after each, which made such a body quadratic), and the time to refuse 16 MiB of empty
members.

    .venv/bin/python benchmarks/bodies.py
"""

from __future__ import annotations

import gzip
import os
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otel_diary.errors import DecodeError
from otel_diary.receiver.bodies import MAX_MEMBERS, decompress
from tests.support.otlp_build import protobuf_body, task_trace

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

PACK: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress, "deflate": zlib.compress, "zstd": zstd.compress}
CAP = 64 << 20


def cpu_ms(call: Callable[[], object], runs: int = 15) -> float:
    """The median CPU milliseconds of ``runs`` calls."""
    times = []
    for _ in range(runs):
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return statistics.median(times) * 1000


def main() -> None:
    spans = [span for n in range(400) for span in task_trace(f"T-{n}", chats=10)]
    body = protobuf_body(spans)
    packed = gzip.compress(body)
    baseline = cpu_ms(lambda: zlib.decompress(packed, wbits=31))
    print(f"a body of {len(body) >> 10} KiB of protobuf; baseline zlib.decompress of its "
          f"gzip form: {baseline:.2f} ms")
    for encoding, pack in PACK.items():
        data = pack(body)
        took = cpu_ms(lambda: decompress(data, encoding, CAP))  # noqa: B023
        print(f"  {encoding:8} {len(data) >> 10:4} KiB -> {took:6.2f} ms  "
              f"{took / baseline:5.2f}x")
    print(f"{MAX_MEMBERS} members (frames) of random bytes, next to one member of the same "
          "bytes:")
    for encoding in ("gzip", "zstd"):
        pack = PACK[encoding]
        for size in (1 << 10, 4 << 10, 16 << 10):
            data = os.urandom(size * MAX_MEMBERS)
            many = b"".join(pack(data[start:start + size])
                            for start in range(0, len(data), size))
            one = pack(data)
            apart = cpu_ms(lambda: decompress(many, encoding, CAP), 5)  # noqa: B023
            whole = cpu_ms(lambda: decompress(one, encoding, CAP), 5)  # noqa: B023
            print(f"  {encoding:5} {size >> 10:3} KiB each ({len(many) >> 10:5} KiB): "
                  f"{apart:7.1f} ms, one member {whole:7.1f} ms  {apart / whole:5.2f}x")
        empty = pack(b"")
        hostile = empty * ((16 << 20) // len(empty))

        def refuse(hostile: bytes = hostile, encoding: str = encoding) -> None:
            try:
                decompress(hostile, encoding, CAP)
            except DecodeError:
                return
            raise SystemExit(f"{encoding}: 16 MiB of empty members were not refused")

        print(f"  {encoding:5} 16 MiB of empty members refused in {cpu_ms(refuse, 5):.1f} ms")


if __name__ == "__main__":
    main()
