"""Text helpers: the fast paths of ``clean`` and ``one_line`` answer as the general ones;
``read_text`` reads as ``Path.read_text`` does and never waits."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_diary.text import (
    _HIDDEN,
    _SHAPING,
    clean,
    encodable,
    knowledge_files,
    one_line,
    read_text,
)
from tests.support.fifo import finishes, needs_fifos

_NON_PRINTABLE = re.compile(f"[{_HIDDEN}{_SHAPING}]")
"""Every character ``clean`` may take out."""


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(alphabet=st.characters(max_codepoint=0x7F)),
                 st.text(alphabet=st.characters(max_codepoint=0x3000, blacklist_categories=()))))
def test_clean_drops_what_the_pattern_drops(text: str) -> None:
    """What ``clean`` keeps of what the pattern finds is a joiner or a selector shaping
    visible characters past ASCII; cleaning again changes nothing."""
    cleaned = clean(text)
    assert _NON_PRINTABLE.sub("", cleaned) == _NON_PRINTABLE.sub("", text)
    assert clean(cleaned) == cleaned
    for kept in _NON_PRINTABLE.finditer(cleaned):
        assert kept.group() in "\u200c\u200d\ufe0e\ufe0f"
        assert kept.start() > 0 and cleaned[kept.start() - 1] > "\x7f"
        assert kept.group() in "\ufe0e\ufe0f" or cleaned[kept.end():kept.end() + 1] > "\x7f"


@pytest.mark.parametrize(("text", "expected"), [
    ("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", None),  # Persian: I want
    ("\u0915\u094d\u200d\u0937", None),  # Devanagari, a half form
    ("\U0001f469\u200d\U0001f4bb fix the build", None),  # woman technologist
    ("\U0001f3f3\ufe0f\u200d\U0001f308 and \u2764\ufe0f", None),  # rainbow flag, heart
    ("sk-\u200dproj a\u200cb \u00e9\u200b\u200da \u00e9\u200d\u200d\u00e9",
     "sk-proj ab \u00e9a \u00e9\u00e9"),
    ("\U0001f600" + "\ufe0f" * 6 + "\U000e0041\U000e0042 hidden", "\U0001f600 hidden"),
    ("a\u00a0\ufe0f \u3000\u200d\u00e9", "a\u00a0 \u3000\u00e9"),  # after a space: no shape
])
def test_clean_keeps_what_shapes_a_script_or_an_emoji(text: str, expected: str | None) -> None:
    """Joiners spell Persian and Indic scripts and join emoji, and a selector gives an
    emoji its look: they stay where they sit between or after visible characters past
    ASCII. Next to ASCII (inside a key), in a run, or as a run of selectors (which can
    carry hidden bytes), they go, as tags do."""
    assert clean(text) == (text if expected is None else expected)


def test_clean_keeps_line_breaks_and_tabs_and_drops_controls() -> None:
    assert clean("a\tb\nc\rd\x00e\x1bf\x7fg") == "a\tb\nc\rdefg"
    assert clean("plain") == "plain"


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(alphabet=" \t\nab\x00~"), st.text()), st.integers(1, 12))
def test_one_line_is_the_text_flattened_and_capped(text: str, limit: int) -> None:
    flat = " ".join(clean(text).split())
    expected = flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
    assert one_line(text, limit) == expected


def test_read_text_reads_a_file_as_path_read_text_does(tmp_path: Path) -> None:
    """UTF-8, line ends made ``\n``, undecodable bytes an error or replaced."""
    file = tmp_path / "a.md"
    file.write_bytes("caf\u00e9\r\nline\rend\n".encode() + b"\xff")
    assert read_text(file, "replace") == file.read_text(encoding="utf-8", errors="replace")
    with pytest.raises(UnicodeDecodeError):
        read_text(file)
    with pytest.raises(FileNotFoundError):
        read_text(tmp_path / "none.md")


@needs_fifos
def test_read_text_refuses_a_fifo_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        finishes(lambda: read_text(fifo), fifo)


def test_read_text_refuses_a_folder_and_keeps_no_descriptor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder where a document goes is an error naming the path, and costs nothing:
    each refused read closes what it opened."""
    folder = tmp_path / "lesson.md"
    folder.mkdir()
    me = threading.get_ident()
    opened: list[int] = []
    closed: list[int] = []
    real_open, real_close = os.open, os.close

    def counted_open(*args: Any, **kwargs: Any) -> int:
        fd = real_open(*args, **kwargs)
        if threading.get_ident() == me:  # other tests' threads may open files meanwhile
            opened.append(fd)
        return fd

    def counted_close(fd: int) -> None:
        if threading.get_ident() == me:
            closed.append(fd)
        real_close(fd)

    monkeypatch.setattr(os, "open", counted_open)
    monkeypatch.setattr(os, "close", counted_close)
    for _ in range(50):
        with pytest.raises(OSError, match="not a regular file") as caught:
            read_text(folder)
        assert caught.value.filename == str(folder)
    monkeypatch.undo()
    assert len(opened) == 50 and closed == opened


def test_knowledge_files_are_those_no_planted_link_leads_out_of_the_base(tmp_path: Path) -> None:
    """Files and links to files inside the base are listed; a link to a file outside is
    not, nor is anything under a folder that is a link leading out; a link loop and a
    dangling link are skipped; a root or base reached through a link is followed (it is
    the base)."""
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "secret.md").write_text("x", encoding="utf-8")
    (outside / "deep" / "secret.md").write_text("x", encoding="utf-8")
    base = tmp_path / "kb" / "diaries"
    folder = base / "agents" / "coder"
    folder.mkdir(parents=True)
    (folder / "own.md").write_text("x", encoding="utf-8")
    (folder / "alias.md").symlink_to(folder / "own.md")
    (folder / "planted.md").symlink_to(outside / "secret.md")
    (folder / "loop.md").symlink_to(folder / "loop.md")
    (folder / "dangling.md").symlink_to(folder / "gone.md")
    (base / "agents" / "linked").symlink_to(outside / "deep", target_is_directory=True)
    (base / "lessons").symlink_to(outside, target_is_directory=True)
    resolved = base.resolve()
    assert [f.name for f in knowledge_files(base / "agents", resolved)] == ["alias.md", "own.md"]
    assert knowledge_files(base / "lessons", resolved) == []
    assert knowledge_files(base / "agents" / "linked", resolved) == []
    (tmp_path / "root-link").symlink_to(tmp_path / "kb", target_is_directory=True)
    through = tmp_path / "root-link" / "diaries"
    assert [f.name for f in knowledge_files(through / "agents", through.resolve())] == [
        "alias.md", "own.md"]


def test_read_text_within_refuses_what_a_listed_path_leads_out_to_when_read(
        tmp_path: Path) -> None:
    """A file listed inside the base, then swapped (it, or a folder above it) for a link
    leading out before it is read, is refused when read ``within`` the base; a file and
    a link inside are read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "own.md").write_text("not the knowledge base's", encoding="utf-8")
    base = tmp_path / "kb" / "diaries"
    folder = base / "agents" / "coder"
    folder.mkdir(parents=True)
    (folder / "own.md").write_text("a diary", encoding="utf-8")
    (folder / "alias.md").symlink_to(folder / "own.md")
    resolved = base.resolve()
    listed = knowledge_files(base, resolved)
    assert [read_text(file, within=resolved) for file in listed] == ["a diary", "a diary"]
    (folder / "own.md").unlink()
    (folder / "own.md").symlink_to(outside / "own.md")
    with pytest.raises(OSError, match="outside the knowledge base"):
        read_text(folder / "own.md", within=resolved)
    folder.rename(base / "agents" / "moved")
    folder.symlink_to(outside, target_is_directory=True)
    with pytest.raises(OSError, match="outside the knowledge base"):
        read_text(folder / "own.md", within=resolved)
    assert read_text(folder / "own.md") == "not the knowledge base's"  # without ``within``


def test_read_text_with_max_bytes_refuses_a_larger_file(tmp_path: Path) -> None:
    """A file of ``max_bytes`` is read; one byte more is ``EFBIG``, not read into memory."""
    import errno

    file = tmp_path / "a.md"
    file.write_bytes(b"x" * 64)
    assert read_text(file, max_bytes=64) == "x" * 64
    file.write_bytes(b"x" * 65)
    with pytest.raises(OSError) as refused:
        read_text(file, max_bytes=64)
    assert refused.value.errno == errno.EFBIG
    assert read_text(file) == "x" * 65


def test_encodable_replaces_lone_surrogates_only() -> None:
    """A lone surrogate becomes U+FFFD; other text, accents and pairs included, is kept."""
    assert encodable("plain") == "plain"
    assert encodable("réseau 日本") == "réseau 日本"
    assert encodable("a\ud800b").encode() == "a\ufffd\ufffd\ufffdb".encode()
    assert "\ufffd" in encodable("kh-\udc80")
