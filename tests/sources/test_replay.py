"""``otel-diary replay``: the Collector file exporter's files and plain OTLP/JSON, offline."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from otel_diary.cli import main
from otel_diary.pipeline.render import parse_front_matter
from tests.support.otlp_build import (
    T0,
    json_document,
    new_trace_id,
    protobuf_body,
    task_trace,
)

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd


def write_lines(path: Path, documents: list[object]) -> Path:
    path.write_text("".join(json.dumps(doc) + "\n" for doc in documents))
    return path


def summary(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    result: dict[str, object] = json.loads(capsys.readouterr().out)
    return result


def test_json_lines_split_duplicated_and_broken(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Split and repeated lines give one diary per task; bad lines and rootless traces count.

    The repeated line holds a task span and a plain span: the task span is the duplicate
    counted (plain spans are not kept, so their copies are not told apart).
    """
    first = task_trace("R-1", chats=2)
    second = task_trace("R-2", chats=1, failed=True)
    rootless = task_trace("R-lost", chats=2)[1:]
    lines = [json_document(first[2:]), json_document(second), "{not json",
             json_document(first[:2]), json_document(first[:2]), json_document(rootless),
             {"resourceMetrics": []}]
    path = tmp_path / "traces.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                            for line in lines))
    assert main(["replay", str(path), "--dir", str(tmp_path / "kb"), "--json"]) == 0
    report = summary(capsys)
    assert report["spans_read"] == 2 + 3 + 2 + 2 + 3
    assert report["tasks_found"] == 2
    assert report["diaries_written"] == 1
    assert report["skipped"] == {
        "undecodable documents": 1, "documents without spans": 1, "failed task runs": 1,
        "duplicate spans": 1, "traces without a root task": 1}
    assert "traces.jsonl:3" in str(report["problems"])
    files = list((tmp_path / "kb" / "diaries").rglob("*.md"))
    assert [f.name for f in files] == ["2026-09-21-R-1.md"]
    assert "Tokens: 240" in files[0].read_text()


def test_plain_pretty_printed_request_and_gzip(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A pretty-printed ExportTraceServiceRequest and a .gz JSON-lines file both replay."""
    plain = tmp_path / "request.json"
    plain.write_text(json.dumps(json_document(task_trace("P-1")), indent=2))
    packed = tmp_path / "more.jsonl.gz"
    packed.write_bytes(gzip.compress(
        (json.dumps(json_document(task_trace("P-2"))) + "\n").encode()))
    assert main(["replay", str(plain), str(packed), "--dir", str(tmp_path / "kb"),
                 "--json"]) == 0
    report = summary(capsys)
    assert (report["files"], report["tasks_found"], report["diaries_written"]) == (2, 2, 2)


def test_grace_in_spans_splits_far_apart_children(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A task is decided once --grace-spans more spans were read, not only at the end."""
    trace_id = new_trace_id()
    spans = task_trace("G-1", chats=1, trace_id=trace_id)
    filler = [json_document(task_trace(f"F-{n}", chats=0)[1:]) for n in range(5)]
    path = write_lines(tmp_path / "g.jsonl", [json_document(spans[:1]), *filler,
                                             json_document(spans[1:])])
    assert main(["replay", str(path), "--dir", str(tmp_path / "kb"), "--grace-spans", "3",
                 "--json"]) == 0
    report = summary(capsys)
    assert report["diaries_written"] == 1
    text = next((tmp_path / "kb" / "diaries").rglob("*.md")).read_text()
    assert "Tokens:" not in text  # its child came after the decision


def test_progress_bar_and_text_summary(tmp_path: Path) -> None:
    """With --progress a bar is drawn on stderr; the summary goes to stdout."""
    path = write_lines(tmp_path / "t.jsonl", [json_document(task_trace("B-1"))])
    result = subprocess.run(
        [sys.executable, "-m", "otel_diary.cli", "replay", str(path), "--dir",
         str(tmp_path / "kb"), "--progress"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "replay 100% |" in result.stderr
    assert "diaries written: 1" in result.stdout and "tasks found: 1" in result.stdout


def test_missing_file_is_reported_and_fails(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """An unreadable file is named in the summary and the exit code is 1."""
    assert main(["replay", str(tmp_path / "nope.jsonl"), "--dir", str(tmp_path / "kb"),
                 "--json"]) == 1
    report = summary(capsys)
    assert report["skipped"] == {"unreadable files": 1}


@pytest.mark.skipif(not Path("/dev/zero").is_char_device(), reason="no /dev/zero")
def test_a_device_is_an_unreadable_file_not_read_forever(tmp_path: Path) -> None:
    """A device (``/dev/zero`` never ends, nor has a line end to skip its over-long line
    to) is reported unreadable at once, and the file after it replays."""
    path = write_lines(tmp_path / "t.jsonl", [json_document(task_trace("D-1"))])
    result = subprocess.run(
        [sys.executable, "-m", "otel_diary.cli", "replay", "/dev/zero", str(path), "--dir",
         str(tmp_path / "kb"), "--json"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert (report["skipped"], report["diaries_written"]) == ({"unreadable files": 1}, 1)
    assert report["problems"] == ["/dev/zero: [Errno 22] a device, not a file of traces"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
@pytest.mark.parametrize("name", ["traces.jsonl", "traces.jsonl.gz"])
def test_a_pipe_replays(name: str, tmp_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
    """A pipe (``<(zcat …)``, ``/dev/stdin``), gzip-compressed or not, is read to its end,
    though it cannot say how much of it was read."""
    data = json.dumps(json_document(task_trace("F-1"))).encode() + b"\n"
    pipe = tmp_path / name
    os.mkfifo(pipe)
    writer = threading.Thread(target=pipe.write_bytes, daemon=True,  # blocks till read
                              args=(gzip.compress(data) if name.endswith(".gz") else data,))
    writer.start()
    assert main(["replay", str(pipe), "--dir", str(tmp_path / "kb"), "--json"]) == 0
    writer.join(30)
    report = summary(capsys)
    assert (report["skipped"], report["diaries_written"]) == ({}, 1)


def test_json_lines_whose_first_line_was_cut_still_replay(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A rotated file whose first line was cut is still JSON lines: that line is one
    undecodable document and the whole lines after it replay."""
    lines = [json.dumps(json_document(task_trace(f"C-{n}"))) for n in range(4)]
    path = tmp_path / "rotated.jsonl"
    path.write_text(lines[0][len(lines[0]) // 2:] + "\n" + "\n".join(lines[1:]) + "\n")
    assert main(["replay", str(path), "--dir", str(tmp_path / "kb"), "--json"]) == 0
    report = summary(capsys)
    assert (report["documents"], report["diaries_written"]) == (4, 3)
    assert report["skipped"] == {"undecodable documents": 1}


def test_damaged_and_inflating_gzip_files_are_skipped_and_the_others_replay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A gzip file whose stream is damaged is reported unreadable; one inflating to more
    than the receiver's body cap (2 MiB of one line, from 2 KiB, over a cap of 1 MiB) is
    skipped and counted; the file after them replays."""
    monkeypatch.setenv("OTEL_DIARY_SERVE_MAX_BODY_BYTES", str(2**20))
    good = json.dumps(json_document(task_trace("Z-1"))).encode() + b"\n"
    packed = bytearray(gzip.compress(good * 50))
    packed[len(packed) // 2] ^= 0xFF
    damaged = tmp_path / "damaged.jsonl.gz"
    damaged.write_bytes(bytes(packed))
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b"0" * 2 * 2**20))
    fine = tmp_path / "fine.jsonl.gz"
    fine.write_bytes(gzip.compress(good))
    assert main(["replay", str(bomb), str(damaged), str(fine), "--dir",
                 str(tmp_path / "kb"), "--json"]) == 1  # a file could not be read
    report = summary(capsys)
    assert report["diaries_written"] == 1
    skipped = report["skipped"]
    assert isinstance(skipped, dict)
    assert (skipped["unreadable files"], skipped["documents too large"]) == (1, 1)
    assert f"bomb.jsonl.gz:1: longer than {2**20} bytes" in str(report["problems"])


def zstd_records(documents: list[bytes], compress: bool = True) -> bytes:
    """The Collector file exporter's ``compression: zstd`` format (or, with ``compress``
    false, its ``format: proto``): each document a zstd frame after its length (4 bytes,
    big-endian)."""
    frames = [zstd.compress(document) if compress else document for document in documents]
    return b"".join(len(frame).to_bytes(4, "big") + frame for frame in frames)


def test_the_file_exporters_zstd_records_replay_and_bad_ones_are_reported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A file of the exporter's zstd records replays, whatever its name; a record that
    inflates past the receiver's body cap, or is longer than it, is skipped and counted; a
    file cut inside a record, or holding a damaged one, is reported unreadable."""
    monkeypatch.setenv("OTEL_DIARY_SERVE_MAX_BODY_BYTES", str(2**20))
    good = [json.dumps(json_document(task_trace(f"ZR-{n}"))).encode() for n in range(3)]
    archive = tmp_path / "traces.jsonl"  # the exporter's path: any name
    archive.write_bytes(zstd_records(good[:2]))
    bomb, long = zstd.compress(b"0" * 2 * 2**20), os.urandom(2**20 + 1)
    oversized = tmp_path / "oversized"
    oversized.write_bytes(b"".join(len(frame).to_bytes(4, "big") + frame
                                   for frame in (bomb, long)) + zstd_records(good[2:]))
    cut = tmp_path / "cut"
    cut.write_bytes(zstd_records(good[2:])[:-5])
    damaged = bytearray(zstd_records(good[2:]))
    damaged[4 + 4] = 0xFF  # the frame's header descriptor: reserved bits set
    (tmp_path / "damaged").write_bytes(bytes(damaged))
    assert main(["replay", str(archive), str(oversized), str(cut), str(tmp_path / "damaged"),
                 "--dir", str(tmp_path / "kb"), "--json"]) == 1  # some could not be read
    report = summary(capsys)
    assert report["diaries_written"] == 3
    assert report["skipped"] == {"documents too large": 2, "unreadable files": 2}
    problems = str(report["problems"])
    assert "cut: a record is cut short" in problems
    assert "damaged: invalid zstd data" in problems


@pytest.mark.parametrize("compress", [False, True], ids=["proto", "zstd-proto"])
def test_the_file_exporters_protobuf_records_replay_and_bad_ones_are_reported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], compress: bool) -> None:
    """A file of the exporter's records in protobuf (its ``format: proto``), compressed or
    not, replays, gzip-compressed too (as a rotated file is); a record longer than the
    receiver's body cap is skipped and counted, one that is no request is undecodable, and
    a file cut inside a record is unreadable."""
    monkeypatch.setenv("OTEL_DIARY_SERVE_MAX_BODY_BYTES", str(2**20))
    good = [protobuf_body(task_trace(f"PR-{n}")) for n in range(3)]
    archive = tmp_path / "traces.jsonl"
    archive.write_bytes(zstd_records([*good[:2], b"\xff" * 64, b"\x0a" * (2**20 + 1)],
                                     compress))
    rotated = tmp_path / "traces-2026-12-01.jsonl.gz"
    rotated.write_bytes(gzip.compress(zstd_records(good[2:], compress)))
    cut = tmp_path / "cut"
    cut.write_bytes(zstd_records(good[2:], compress)[:-5])
    assert main(["replay", str(archive), str(rotated), str(cut), "--dir",
                 str(tmp_path / "kb"), "--json"]) == 1
    report = summary(capsys)
    assert (report["documents"], report["diaries_written"]) == (5, 3)
    assert report["skipped"] == {"documents too large": 1, "undecodable documents": 1,
                                 "unreadable files": 1}
    assert "traces.jsonl:3: " in str(report["problems"])
    assert "cut: a record is cut short" in str(report["problems"])


def test_document_whose_first_lines_together_pass_the_cap_is_too_large(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A file whose first two lines do not parse alone, each under the receiver's body cap
    but together over it, is one document too large; the next file replays."""
    monkeypatch.setenv("OTEL_DIARY_SERVE_MAX_BODY_BYTES", str(2**20))
    damaged = tmp_path / "damaged.json.gz"
    damaged.write_bytes(gzip.compress((b"{" * 600 * 2**10 + b"\n") * 2 + b"0" * 4 * 2**20))
    fine = write_lines(tmp_path / "fine.jsonl", [json_document(task_trace("W-1"))])
    assert main(["replay", str(damaged), str(fine), "--dir", str(tmp_path / "kb"),
                 "--json"]) == 0
    report = summary(capsys)
    assert (report["files"], report["documents"], report["diaries_written"]) == (2, 2, 1)
    assert report["skipped"] == {"documents too large": 1}


@pytest.mark.parametrize(("start", "end", "dated"), [
    (T0, 0, "2026-09-21"),  # by its start
    (0, T0 + 900_000_000, "2026-09-21"),  # by its end
    (0, 0, None),  # by when it was read: today
], ids=["no end", "no start", "neither"])
def test_a_task_span_sent_without_its_times_is_dated_by_what_it_has(
        tmp_path: Path, start: int, end: int, dated: str | None) -> None:
    """A task span whose start or end is 0 (unset: a broken exporter's) gets a diary
    dated by the time it has, else by today, and no latency: not 1970, not 0 ms, not the
    years since 1970."""
    spans = task_trace("Z-1")
    spans[0].start_time_unix_nano, spans[0].end_time_unix_nano = start, end
    before = datetime.now(timezone.utc).date().isoformat()
    path = write_lines(tmp_path / "traces.jsonl", [json_document(spans)])
    assert main(["replay", str(path), "--dir", str(tmp_path / "kb")]) == 0
    after = datetime.now(timezone.utc).date().isoformat()
    [diary] = (tmp_path / "kb" / "diaries").rglob("*.md")
    assert diary.name in {f"{day}-Z-1.md" for day in ((dated,) if dated else (before, after))}
    front = parse_front_matter(diary.read_text())
    assert str(front["created"]).startswith(diary.name[:10])
    assert "latency_ms" not in front and "Latency" not in diary.read_text()
    assert "Tokens: 240." in diary.read_text()
