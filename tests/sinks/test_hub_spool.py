"""The hub's delivery spool when its files go wrong: damaged entries, a newer version
spooled at the moment an entry is removed."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from otel_diary.sinks.hub.sink import HubSink
from otel_diary.sinks.hub.spool import Spool
from tests.sinks.test_hub import make_diary
from tests.support.loopback import HubServer


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
