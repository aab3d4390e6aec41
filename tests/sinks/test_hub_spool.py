"""The hub's delivery spool when its files go wrong: damaged entries, a full disk, a
newer version spooled at the moment an entry is removed, refused entries sent again."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from otel_diary.sinks.hub.client import Backoff, HubClient
from otel_diary.sinks.hub.sink import Deliverer, HubSink
from otel_diary.sinks.hub.spool import Spool
from tests.sinks.test_hub import make_diary
from tests.support.loopback import HubServer

ROOT = Path(__file__).resolve().parents[2]


def test_a_damaged_entry_is_set_aside_with_its_bytes(tmp_path: Path) -> None:
    """An entry damaged on disk (cut short) moves to failed/ as it was, diary text and
    all, for whoever recovers it."""
    spool = Spool(tmp_path / "spool")
    path = spool.put("kh-a", {"path": "diaries/x.md", "content": "# A diary worth keeping\n"})
    damaged = path.read_bytes()[:-3]
    path.write_bytes(damaged)
    [entry] = spool.pending()
    claim = spool.claim(entry)
    assert claim is not None and claim.record is None
    target = spool.fail(claim, None, "unreadable spool entry")
    assert target.read_bytes() == damaged
    assert spool.pending() == []


def test_an_entry_nested_too_deep_to_parse_is_set_aside_once_and_the_others_delivered(
        hub: tuple[HubServer, str], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """The oldest entry holding JSON nested past the parser's depth is set aside as it
    was, said once in a warning, and every diary after it is delivered."""
    server, url = hub
    damaged = tmp_path / "spool" / "kh-0-damaged.json"
    Spool(damaged.parent)
    damaged.write_bytes(b"[" * 100_000)
    os.utime(damaged, (1, 1))
    diaries = [make_diary(1), make_diary(2)]
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        sink = HubSink(url, spool_dir=damaged.parent, poll_s=0.05)
        try:
            for diary in diaries:
                sink.write(diary)
            assert sink.flush(10)
        finally:
            sink.close()
    assert sorted(server.acknowledged) == sorted(diary.id for diary in diaries)
    assert (damaged.parent / "failed" / damaged.name).read_bytes() == b"[" * 100_000
    said = [r.levelno for r in caplog.records if damaged.name in r.getMessage()]
    assert said == [logging.WARNING]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


REFUSE_ON_A_FULL_DISK = """
import resource, sys
from otel_diary.sinks.hub.spool import Spool
spool = Spool(sys.argv[1])
[entry] = spool.pending()
claim = spool.claim(entry)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # from here no file can grow, as on a full disk
print(spool.fail(claim, 400, "bad front matter"))
"""


def test_a_refusal_that_cannot_be_written_sets_the_diary_aside_as_it_was(
        tmp_path: Path) -> None:
    """When the hub's answer cannot be written beside a refused diary (a full disk), the
    diary moves to failed/ as it was, which takes no space, and this is said."""
    spool = Spool(tmp_path / "spool")
    original = spool.put("kh-a", {"path": "d/a.md", "content": "refused"}).read_bytes()
    done = subprocess.run([sys.executable, "-c", REFUSE_ON_A_FULL_DISK, str(spool.directory)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "cannot write the hub's answer" in done.stderr
    assert Path(done.stdout.strip()).read_bytes() == original
    assert [entry.id for entry in spool.failed()] == ["kh-a"]
    assert spool.pending() == []


def test_a_refused_diary_that_cannot_be_set_aside_waits_and_the_others_go_on(
        hub: tuple[HubServer, str], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """A refused diary that cannot be moved to failed/ (a file stands in its way) stays
    waiting, logged once and held back with a backoff of its own, not sent again on every
    pass; the diaries after it are delivered."""
    server, url = hub
    server.script = [422, 200]
    spool = Spool(tmp_path / "spool")
    for name in ("kh-a", "kh-b", "kh-c"):
        spool.put(name, {"path": f"d/{name}.md", "content": name})
    spool.failed_directory.rmdir()
    spool.failed_directory.write_text("in the way")
    client = HubClient(url, timeout_s=5.0)
    deliverer = Deliverer(spool, client, Backoff(60.0, 60.0))
    try:
        with caplog.at_level(logging.WARNING, logger="otel_diary"):
            results = [deliverer.deliver_pass() for _ in range(3)]
    finally:
        client.close()
    assert [r.headers["idempotency-key"] for r in server.posts()] == ["kh-a", "kh-b", "kh-c"]
    assert server.acknowledged == ["kh-b", "kh-c"]
    assert [entry.id for entry in spool.pending()] == ["kh-a"]
    assert [(r.delivered, r.skipped) for r in results] == [(2, 1), (0, 1), (0, 1)]
    [error] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "kh-a" in error.getMessage() and "stays in the spool" in error.getMessage()


def test_a_version_spooled_as_the_delivered_one_is_removed_stays_waiting(
        tmp_path: Path) -> None:
    """A newer version of an entry, spooled (by another thread or process) at the very
    moment the delivered version is removed, is never removed with it: it stays waiting."""
    spool = Spool(tmp_path / "spool")
    spool.put("kh-a", {"content": "v1"})
    [entry] = spool.pending()
    claim = spool.claim(entry)
    assert claim is not None
    other = Spool(tmp_path / "spool")

    def spool_v2_first(frame: FrameType, event: str, arg: Any) -> None:
        """Just before the first file is renamed or deleted, the newer version arrives."""
        if event == "c_call" and arg in (os.rename, os.unlink):
            sys.setprofile(None)
            other.put("kh-a", {"content": "v2"})

    sys.setprofile(spool_v2_first)
    try:
        spool.done(claim)
    finally:
        sys.setprofile(None)
    [left] = spool.pending()
    record = left.load()
    assert record is not None and record["body"] == {"content": "v2"}
    assert sorted(path.name for path in spool.directory.iterdir()) == ["failed", "kh-a.json"]


def test_refused_diaries_sent_again_keep_to_the_bounds(tmp_path: Path) -> None:
    """Refused diaries put back in the queue count toward the spool's bounds: those that
    do not fit stay in failed/, said with the reason."""
    spool = Spool(tmp_path / "spool", max_entries=2)
    for name in ("kh-a", "kh-b"):
        spool.put(name, {"content": name})
        [entry] = spool.pending()
        claim = spool.claim(entry)
        assert claim is not None
        spool.fail(claim, 422, "refused")
    spool.put("kh-c", {"content": "kh-c"})
    requeued = spool.requeue_failed()
    assert sorted(entry.id for entry in spool.pending()) == ["kh-a", "kh-c"]
    assert [entry.id for entry in spool.failed()] == ["kh-b"]
    assert (requeued.moved, requeued.superseded, requeued.left) == (1, 0, 1)
    assert "is full" in requeued.reason


def refuse(spool: Spool, content: str) -> None:
    spool.put("kh-a", {"content": content})
    [entry] = spool.pending()
    claim = spool.claim(entry)
    assert claim is not None
    spool.fail(claim, 422, "refused")


def test_a_refused_version_older_than_the_one_delivered_is_not_sent_again(
        tmp_path: Path) -> None:
    """A refused version of a diary a newer version of which the hub took is dropped from
    failed/: sent again later (``otel-diary spool --retry-failed``) it would replace the
    newer one."""
    spool = Spool(tmp_path / "spool")
    refuse(spool, "v1")
    spool.put("kh-a", {"content": "v2"})
    [entry] = spool.pending()
    claim = spool.claim(entry)
    assert claim is not None
    spool.done(claim)
    assert spool.failed() == [] and spool.pending() == []
    assert spool.requeue_failed().moved == 0


def test_a_refused_version_newer_than_the_one_delivered_stays(tmp_path: Path) -> None:
    """The version delivered last is the older one: the newer refused one stays in failed/."""
    spool = Spool(tmp_path / "spool")
    spool.put("kh-a", {"content": "v1"})
    [entry] = spool.pending()
    first = spool.claim(entry)
    assert first is not None
    refuse(spool, "v2")  # spooled and refused while v1 was on its way
    spool.done(first)
    [kept] = spool.failed()
    record = kept.load()
    assert record is not None and record["body"] == {"content": "v2"}


def test_an_entry_a_dead_process_took_aside_goes_back_half_written_files_go(
        tmp_path: Path) -> None:
    """A whole entry a process that died had renamed aside to deliver it goes back under
    its name when a spool is next opened there (it was removed: a diary lost); a
    half-written file of one is removed."""
    spool = Spool(tmp_path / "spool")
    path = spool.put("kh-a", {"content": "v1"})
    aside = path.with_name(f".{path.name}.999999.0.tmp")
    os.rename(path, aside)
    half = path.with_name(".kh-b.json.999999.1.tmp")
    half.write_bytes(b'{"version": 1, "id": "kh-b", "bo')
    long_ago = time.time() - 3600
    for stale in (aside, half):
        os.utime(stale, (long_ago, long_ago))
    reopened = Spool(tmp_path / "spool")
    [entry] = reopened.pending()
    record = entry.load()
    assert entry.id == "kh-a" and record is not None and record["body"] == {"content": "v1"}
    assert sorted(p.name for p in reopened.directory.iterdir()) == ["failed", "kh-a.json"]


def test_an_entry_a_live_process_took_aside_is_left_to_it(tmp_path: Path) -> None:
    """An entry spooled long ago that a live process is delivering this moment (renamed
    aside: a rename keeps its old mtime) is not put back by a spool opened meanwhile; the
    delivery then ends as it would have."""
    spool = Spool(tmp_path / "spool")
    path = spool.put("kh-a", {"content": "v1"})
    long_ago = time.time() - 3600
    os.utime(path, (long_ago, long_ago))
    [entry] = spool.pending()
    claim = spool.claim(entry)
    assert claim is not None

    def open_another_spool(frame: FrameType, event: str, arg: Any) -> None:
        """Just after the entry is renamed aside, another process opens the spool."""
        if event == "c_return" and arg is os.rename:
            sys.setprofile(None)
            Spool(tmp_path / "spool")

    sys.setprofile(open_another_spool)
    try:
        spool.done(claim)
    finally:
        sys.setprofile(None)
    assert spool.pending() == [] and spool.failed() == []
