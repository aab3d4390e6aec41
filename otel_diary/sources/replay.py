"""Replay: OTLP trace files through assembly and the pipeline, offline.

Reads what the OpenTelemetry Collector's file exporter writes: JSON lines (one
``ExportTraceServiceRequest`` per line), or, with its ``format: proto`` or ``compression:
zstd``, records (each request's length in 4 bytes, big-endian, then the request in protobuf
or JSON, a zstd frame when compressed); and plain ``ExportTraceServiceRequest`` JSON
documents, ``.gz`` or not. Each line, document or record is no longer than a bound (a
longer one is skipped and counted: a gzip or zstd bomb costs that much memory at most).
Spans are assembled as ``serve`` assembles them, with the grace period counted in spans
read instead of seconds; at the end every waiting task span is decided. Prints a summary.
"""

from __future__ import annotations

import errno
import gzip
import itertools
import json
import os
import stat
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from otel_diary.assembly.grace import TraceStore
from otel_diary.counters import Counters
from otel_diary.errors import DecodeError, TooLarge
from otel_diary.pipeline.core import Pipeline
from otel_diary.receiver.bodies import decompress
from otel_diary.receiver.decode import JSON, PROTOBUF, decode

ZSTD_FRAME = b"\x28\xb5\x2f\xfd"
"""How a zstd frame starts: after a record's length, the file exporter's compressed
format."""
RESOURCE_SPANS = b"\x0a"
"""How a request in protobuf starts (its first ``resource_spans``): after a record's length,
the file exporter's ``format: proto``."""
PROGRESS_MIN_BYTES = 8 * 2**20
"""Files at least this large (together) get a progress bar on a terminal."""
MAX_EXAMPLES = 5


class ReplayReport(Counters):
    """What a replay read, found, wrote and skipped."""

    files: int
    documents: int
    spans_read: int
    spans_accepted: int
    tasks_found: int
    diaries_written: int

    def __init__(self) -> None:
        super().__init__()
        self.skipped: dict[str, int] = {}
        """Reason -> count (failed runs, nested tasks, duplicate spans, invalid ids, ...)."""
        self.problems: list[str] = []
        """The first few undecodable documents and unreadable files, with their place."""

    def skip(self, reason: str, count: int = 1, example: str | None = None) -> None:
        if count:
            self.skipped[reason] = self.skipped.get(reason, 0) + count
        if example is not None and len(self.problems) < MAX_EXAMPLES:
            self.problems.append(example)

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "skipped": dict(self.skipped),
                "problems": list(self.problems)}

    def text(self) -> str:
        lines = [
            f"files: {self.files}  documents: {self.documents}",
            f"spans read: {self.spans_read}  accepted: {self.spans_accepted}",
            f"tasks found: {self.tasks_found}",
            f"diaries written: {self.diaries_written}",
        ]
        if self.skipped:
            lines.append("skipped: " + ", ".join(
                f"{count} {reason}" for reason, count in sorted(self.skipped.items())))
        lines.extend(f"  {problem}" for problem in self.problems)
        return "\n".join(lines)


class Progress:
    """A one-line progress bar on a stream, redrawn at most ten times a second."""

    def __init__(self, total: int, stream: IO[str], width: int = 30) -> None:
        self.total = max(total, 1)
        self.stream = stream
        self.width = width
        self._last = 0.0

    def update(self, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        fraction = min(done / self.total, 1.0)
        filled = int(fraction * self.width)
        bar = "#" * filled + " " * (self.width - filled)
        self.stream.write(f"\rreplay {fraction:4.0%} |{bar}| "
                          f"{done / 2**20:.1f}/{self.total / 2**20:.1f} MiB")
        self.stream.flush()

    def close(self) -> None:
        self.update(self.total, force=True)
        self.stream.write("\n")
        self.stream.flush()


def _line(handle: IO[bytes], limit: int) -> bytes | None:
    """The next line (``b""`` at the end), or ``None`` when it is longer than ``limit``
    bytes (the rest of it is read and dropped)."""
    line = handle.readline(limit + 1)
    if len(line) <= limit or line.endswith(b"\n"):
        return line
    while (rest := handle.readline(2**20)) and not rest.endswith(b"\n"):
        pass
    return None


def _parses(line: bytes) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True


def _pretty_printed(head: list[bytes | None]) -> bool:
    """Whether a file starting with ``head`` (its first two lines) is one document: its
    first line does not parse alone, and neither does the next (else it is JSON lines
    whose first line was cut, as in a rotated file)."""
    first, second = [*head, b"", b""][:2]
    return (first is not None and bool(first.strip()) and not _parses(first)
            and second is not None and not (second.strip() and _parses(second)))


def _is_records(head: bytes) -> bool:
    """Whether a file starting with ``head`` (8 bytes) holds the file exporter's records: a
    length (under 144 MiB: no text starts with the bytes such a length does), then a zstd
    frame or a request in protobuf."""
    return head[:1] < b"\t" and (head[4:8] == ZSTD_FRAME or head[4:5] == RESOURCE_SPANS)


def _records(handle: IO[bytes], limit: int) -> Iterator[tuple[bytes | None, str]]:
    """The documents of the file exporter's records, each after its length (4 bytes,
    big-endian), zstd-compressed or not, and the media type of each (JSON when it starts
    as a JSON object does, else protobuf); ``None`` for one longer than ``limit`` bytes,
    compressed or not. :class:`DecodeError` for a record cut short or damaged."""
    while head := handle.read(4):
        size = int.from_bytes(head, "big")
        if len(head) < 4 or len(record := _read(handle, size, limit)) < min(size, limit + 1):
            raise DecodeError("a record is cut short")
        if size > limit:
            yield None, PROTOBUF
            continue
        if record.startswith(ZSTD_FRAME):
            try:
                record = decompress(record, "zstd", limit)
            except TooLarge:
                yield None, PROTOBUF
                continue
        yield record, JSON if record.startswith(b"{") else PROTOBUF


def _read(handle: IO[bytes], size: int, limit: int) -> bytes:
    """The next ``size`` bytes; past ``limit`` of them, only the first ``limit + 1``
    (the rest is read and dropped)."""
    kept = handle.read(min(size, limit + 1))
    left = size - len(kept)
    while left > 0 and (dropped := handle.read(min(left, 2**20))):
        left -= len(dropped)
    return kept if left <= 0 else b""


def _documents(path: Path, limit: int) -> Iterator[tuple[int, bytes | None, int, str]]:
    """(line number, JSON document or ``None`` when longer than ``limit`` bytes, bytes of
    the file read so far, media type) for each line, or once for a pretty-printed
    document; (record number, …) for each of the file exporter's records."""
    with path.open("rb") as raw:
        if stat.S_ISCHR(mode := os.fstat(raw.fileno()).st_mode) or stat.S_ISBLK(mode):
            # /dev/zero never ends, nor has a line end to skip an over-long line to
            raise OSError(errno.EINVAL, "a device, not a file of traces")
        read_so_far = raw.tell if raw.seekable() else lambda: 0  # a pipe: no bar to draw
        handle = gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw
        if _is_records(handle.peek(8)[:8]):
            for number, (record, media) in enumerate(_records(cast(IO[bytes], handle),
                                                              limit), 1):
                yield number, record, read_so_far(), media
            return
        lines = iter(lambda: _line(cast(IO[bytes], handle), limit), b"")
        head = list(itertools.islice(lines, 2))
        if _pretty_printed(head):
            whole = b"".join(cast(list[bytes], head))
            whole += handle.read(max(0, limit + 1 - len(whole)))
            yield 1, whole if len(whole) <= limit else None, read_so_far(), JSON
            return
        for number, line in enumerate(itertools.chain(head, lines), 1):
            if line is None or line.strip():
                yield number, line, read_so_far(), JSON


def replay(paths: list[Path], pipeline: Pipeline, store: TraceStore, *,
           progress: bool | None = None, max_document_bytes: int = 20 * 2**20) -> ReplayReport:
    """Feed ``paths`` through ``store`` (its clock counts spans read) and ``pipeline``;
    returns what happened. A line or document longer than ``max_document_bytes`` (the
    receiver's body cap: what ``serve`` would refuse) is skipped and counted."""
    conventions = store.conventions
    report = ReplayReport()
    sizes = []
    for path in paths:
        try:
            sizes.append(path.stat().st_size)
        except OSError:
            sizes.append(0)
    total = sum(sizes)
    if progress is None:
        progress = sys.stderr.isatty() and total >= PROGRESS_MIN_BYTES
    bar = Progress(total, sys.stderr) if progress else None
    before = 0
    clock = 0

    def deliver(ready: list[Any]) -> None:
        with pipeline.batch():  # indexed and counted into lessons together
            for item in ready:
                pipeline.handle(item)

    for path, size in zip(paths, sizes, strict=True):
        try:
            for number, document, position, media in _documents(path, max_document_bytes):
                report.documents += 1
                if bar is not None:
                    bar.update(before + position)
                if document is None:
                    report.skip("documents too large", 1,
                                f"{path}:{number}: longer than {max_document_bytes} bytes")
                    continue
                try:
                    batch = decode(document, media, conventions)
                except DecodeError as exc:
                    report.skip("undecodable documents", 1, f"{path}:{number}: {exc}")
                    continue
                if not batch.spans:
                    report.skip("documents without spans")
                    continue
                report.spans_read += batch.spans
                report.skip("spans with invalid ids", batch.rejected)
                clock += batch.spans
                deliver(store.add(batch, clock))
                deliver(store.due(clock))
            report.files += 1
        except (OSError, EOFError, zlib.error, DecodeError) as exc:  # damaged gzip or zstd
            report.skip("unreadable files", 1, f"{path}: {exc}")
        before += size
    deliver(store.drain())
    if bar is not None:
        bar.close()
    stats = pipeline.stats
    report.spans_accepted = store.accepted
    report.tasks_found = store.root_tasks
    report.diaries_written = stats.diaries
    report.skip("failed task runs", stats.failed_runs)
    report.skip("nested task spans", store.nested_tasks)
    report.skip("duplicate spans", store.duplicates)
    report.skip("traces without a root task", store.rootless_expired + store.evicted_taskless)
    report.skip("diaries the sinks refused", stats.sink_errors)
    return report
