"""``otel-diary spool --flush`` against a real hub on 127.0.0.1 when the spool holds a
damaged entry, or a refused diary a newer version of which waits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from otel_diary.cli import main as cli
from otel_diary.sinks.hub.spool import Spool
from tests.support.loopback import HubServer


def test_flush_sets_a_damaged_entry_aside_and_delivers_the_others(
        hub: tuple[HubServer, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An entry nested too deep to parse ('[' * 100000) ends no flush: it is set aside as
    it was, listed as such, and the diary after it is delivered (exit 0)."""
    server, url = hub
    spool = Spool(tmp_path / "spool")
    spool.put("kh-b", {"path": "d/b.md", "content": "b"})
    damaged = spool.directory / "kh-a.json"
    damaged.write_text("[" * 100_000)
    os.utime(damaged, (1, 1))
    assert cli(["spool", "--spool-dir", str(spool.directory), "--flush",
                "--hub-url", url]) == 0
    out = capsys.readouterr().out
    assert server.acknowledged == ["kh-b"]
    assert (spool.failed_directory / "kh-a.json").read_text() == "[" * 100_000
    assert "0 waiting" in out and "kh-a" in out and "kept as it was found" in out


def test_retry_failed_sends_the_newer_waiting_version(
        hub: tuple[HubServer, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`--flush --retry-failed` with an old refused version of a lesson in failed/ and a
    newer one waiting sends the newer one alone; the old one is dropped, and said so."""
    server, url = hub
    spool = Spool(tmp_path / "spool")
    spool.put("kh-lesson", {"path": "lessons/x.md", "content": "v1 (3 runs)"})
    [entry] = spool.pending()
    claim = spool.claim(entry)
    assert claim is not None
    spool.fail(claim, 422, "refused")
    spool.put("kh-lesson", {"path": "lessons/x.md", "content": "v2 (9 runs)"})
    assert cli(["spool", "--spool-dir", str(spool.directory), "--flush", "--retry-failed",
                "--hub-url", url]) == 0
    assert [r.json()["content"] for r in server.posts()] == ["v2 (9 runs)"]
    assert "dropped 1 refused diary: a newer version waits" in capsys.readouterr().out
    assert spool.failed() == [] and spool.pending() == []


def test_dir_names_the_knowledge_base_whose_spool_is_listed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`otel-diary spool --dir KB`, as the other commands take it, lists KB/spool."""
    monkeypatch.delenv("OTEL_DIARY_SPOOL_DIR", raising=False)
    spool = Spool(tmp_path / "kb" / "spool")
    spool.put("kh-waiting", {"path": "d/w.md", "content": "w"})
    assert cli(["spool", "--dir", str(tmp_path / "kb")]) == 0
    out = capsys.readouterr().out
    assert "kh-waiting" in out and "1 waiting" in out
