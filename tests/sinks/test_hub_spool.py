"""The hub's delivery spool when its files go wrong: a newer version spooled at the
moment an entry is removed."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from otel_diary.sinks.hub.spool import Spool


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
