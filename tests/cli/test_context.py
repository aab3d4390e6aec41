"""``otel-diary context``: the session-start digest of relevant lessons and diaries."""

from __future__ import annotations

import errno
import io
import shutil
import sys
from pathlib import Path

import pytest

from otel_diary import Diary
from otel_diary.cli import main
from otel_diary.index.lessons import lesson_from_document
from tests.support.kb import TS_STDERR, kb_pipeline, task_record, write
from tests.support.knowledge import NEW_TS_ERROR, build_knowledge_base, snapshot, write_lesson

KB = tuple[Path, dict[str, Diary], str]


@pytest.fixture(scope="module")
def kb_template(tmp_path_factory: pytest.TempPathFactory) -> KB:
    root = tmp_path_factory.mktemp("kb")
    diaries = build_knowledge_base(root)
    lesson = write_lesson(root, "code:TS2345", "Narrow optional values before the call",
                          [diaries["types"].id])
    return root, diaries, lesson


@pytest.fixture
def kb(kb_template: KB, tmp_path: Path) -> KB:
    root, diaries, lesson = kb_template
    copy = tmp_path / "kb"
    shutil.copytree(root, copy)
    return copy, diaries, lesson


def context(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str,
            stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(["context", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_an_error_on_standard_input_lists_the_lesson_then_the_diary(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kb: KB) -> None:
    """A new TS2345 piped in gives its signature, the lesson and the diary, with ids and paths."""
    root, diaries, lesson = kb
    code, out, _ = context(capsys, monkeypatch, "--dir", str(root), stdin=NEW_TS_ERROR)
    assert code == 0
    assert "`code:TS2345`" in out
    assert out.index(lesson) < out.index(diaries["types"].id)
    assert str(root / diaries["types"].path) in out
    assert str(root / "diaries" / "lessons" / "code-TS2345.md") in out
    assert diaries["parsing"].id not in out


def test_a_lesson_says_what_worked(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """A lesson the pipeline consolidated shows its most voted rule, not a piece of YAML."""
    pipeline = kb_pipeline(tmp_path)
    write(pipeline, task_record(1, "T-1", stderr=TS_STDERR))
    pipeline.close()
    lesson = (tmp_path / "diaries" / "lessons" / "code-TS2345.md").read_text(encoding="utf-8")
    rule = lesson_from_document(lesson).rules[0].text
    code, out, _ = context(capsys, monkeypatch, "--dir", str(tmp_path), stdin=NEW_TS_ERROR)
    assert code == 0
    assert f"  What worked: {rule}\n" in out
    assert "signature:" not in out and "votes:" not in out


def test_an_error_file_and_a_task_are_both_used(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kb: KB,
        tmp_path: Path) -> None:
    """``--error-file`` gives the error's matches, ``--task`` adds the diaries matching it."""
    root, diaries, _ = kb
    error = tmp_path / "stderr.txt"
    error.write_text("Traceback (most recent call last):\nValueError: invalid literal",
                     encoding="utf-8")
    code, out, _ = context(capsys, monkeypatch, "--dir", str(root), "--error-file", str(error),
                           "--task", "Add pagination to the orders list")
    assert code == 0
    assert "`exception:ValueError`" in out
    assert out.index(diaries["parsing"].id) < out.index(diaries["pagination"].id)


def test_a_task_alone_finds_diaries_that_share_most_of_its_words(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kb: KB) -> None:
    """A task phrased differently from a diary's title still finds it, after the lesson
    gathering it (which has none of the task's words); ``--agent`` filters."""
    root, diaries, lesson = kb
    _, out, _ = context(capsys, monkeypatch, "--dir", str(root),
                        "--task", "Tighten the types of the orders module")
    assert out.index(lesson) < out.index(diaries["types"].id)
    assert diaries["pagination"].id not in out
    _, filtered, _ = context(capsys, monkeypatch, "--dir", str(root), "--agent", "reviewer",
                             "--task", "Tighten the types of the orders module")
    assert filtered == ""


@pytest.mark.parametrize("argv", [["--task", "Polish the frobnicator widget"],
                                  ["--task", ""], []])
def test_nothing_relevant_prints_nothing_and_exits_0(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kb: KB,
        argv: list[str]) -> None:
    """A task no document shares words with, or no task and no error, prints nothing."""
    root, _, _ = kb
    assert context(capsys, monkeypatch, "--dir", str(root), *argv) == (0, "", "")


def test_no_knowledge_base_prints_nothing_and_creates_nothing(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """A root that does not exist yet stays absent; the hook prints nothing and succeeds."""
    root = tmp_path / "none"
    assert context(capsys, monkeypatch, "--dir", str(root), "--task", "orders",
                   stdin=NEW_TS_ERROR) == (0, "", "")
    assert not root.exists()


def test_limit_and_max_chars_bound_the_digest(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kb: KB) -> None:
    """``--limit 1`` keeps the best document; ``--max-chars`` cuts entries to fit."""
    root, diaries, lesson = kb
    _, one, _ = context(capsys, monkeypatch, "--dir", str(root), "--limit", "1",
                        stdin=NEW_TS_ERROR)
    assert lesson in one and diaries["types"].id not in one
    _, full, _ = context(capsys, monkeypatch, "--dir", str(root), stdin=NEW_TS_ERROR)
    _, short, _ = context(capsys, monkeypatch, "--dir", str(root), "--max-chars", "500",
                          stdin=NEW_TS_ERROR)
    assert len(full) > 500 >= len(short)
    assert lesson in short and "Learned:" in full and "Learned:" not in short


def test_every_budget_names_the_best_document_and_is_kept_to(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kb: KB) -> None:
    """From the smallest ``--max-chars`` (200) up, the lesson is named, at the least by
    its id and title, without what worked or the closing hint; an entry that does not fit
    whole comes without what it learned, else without its path too; no digest passes its
    budget."""
    root, _, lesson = kb
    for budget in range(200, 1500, 25):
        _, out, _ = context(capsys, monkeypatch, "--dir", str(root), "--max-chars",
                            str(budget), stdin=NEW_TS_ERROR)
        assert lesson in out and len(out) <= budget, (budget, out)
        assert all(entry.startswith(("**Lesson** `", "`kh-"))
                   for entry in out.split("\n- ")[1:])
    _, smallest, _ = context(capsys, monkeypatch, "--dir", str(root), "--max-chars", "200",
                             stdin=NEW_TS_ERROR)
    assert "What worked" not in smallest and "kb_fetch" not in smallest


def test_the_digest_writes_nothing(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kb: KB) -> None:
    """Running the hook leaves every file of the knowledge base unchanged."""
    root, _, _ = kb
    before = snapshot(root)
    context(capsys, monkeypatch, "--dir", str(root), "--task", "orders", stdin=NEW_TS_ERROR)
    assert snapshot(root) == before


def test_an_unreadable_error_file_is_an_error(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kb: KB,
        tmp_path: Path) -> None:
    """A missing ``--error-file`` exits 2 with a message naming it."""
    root, _, _ = kb
    code, out, err = context(capsys, monkeypatch, "--dir", str(root), "--error-file",
                             str(tmp_path / "missing.txt"))
    assert (code, out) == (2, "")
    assert "missing.txt" in err


def test_a_standard_input_that_cannot_be_read_is_named_with_why(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kb: KB) -> None:
    """A hook's standard input that fails to read (a terminal lost, an I/O error) exits 2
    saying which input and why, not "cannot read None: None"."""
    root, _, _ = kb

    class Failing(io.StringIO):
        def read(self, size: int | None = -1) -> str:
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr("sys.stdin", Failing())
    assert main(["context", "--dir", str(root)]) == 2
    assert capsys.readouterr().err == \
        "otel-diary context: cannot read standard input: Input/output error\n"


def test_a_client_hook_event_on_standard_input_is_not_an_error(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kb: KB) -> None:
    """Claude Code's SessionStart JSON is ignored; a UserPromptSubmit prompt becomes the task."""
    root, diaries, _ = kb
    start = '{"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup"}'
    assert context(capsys, monkeypatch, "--dir", str(root), stdin=start) == (0, "", "")
    prompt = ('{"session_id": "s1", "hook_event_name": "UserPromptSubmit", '
              '"prompt": "Please tighten the types of the orders module"}')
    code, out, _ = context(capsys, monkeypatch, "--dir", str(root), stdin=prompt)
    assert code == 0
    assert diaries["types"].id in out


def test_a_hook_event_with_a_long_prompt_is_still_read_as_one(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kb: KB) -> None:
    """A prompt longer than the error text kept (a pasted log, say) leaves the event whole:
    its start becomes the task, and no tail of its JSON is taken for an error."""
    root, diaries, _ = kb
    long_prompt = ('{"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": '
                   '"Please tighten the types of the orders module' + " ok" * 30_000 + '"}')
    code, out, _ = context(capsys, monkeypatch, "--dir", str(root), stdin=long_prompt)
    assert code == 0
    assert diaries["types"].id in out
