"""`otel-diary lessons`, and lessons in `otel-diary search`, on a pipeline-written base."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_diary.cli import main
from otel_diary.index.lessons import lesson_id
from tests.support.kb import PY_STDERR, TS_STDERR, kb_pipeline, task_record, write


@pytest.fixture
def kb(tmp_path: Path) -> tuple[Path, list[str]]:
    """Two TS2345 runs and one ValueError run; the TS2345 diary ids."""
    pipeline = kb_pipeline(tmp_path)
    ts = [write(pipeline, task_record(n, f"T-{n}", stderr=TS_STDERR)).id for n in (1, 2)]
    write(pipeline, task_record(3, "T-3", stderr=PY_STDERR))
    pipeline.close()
    return tmp_path, ts


def test_lessons_lists_one_lesson_per_error_newest_first(
        kb: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    """Each error signature has one lesson; --json gives its runs and evidence."""
    root, ts = kb
    assert main(["lessons", "--dir", str(root), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(item["signature"], item["runs"]) for item in listed["lessons"]] == [
        ("exception:ValueError", 1), ("code:TS2345", 2)]
    assert listed["lessons"][1]["evidence"] == ts
    assert main(["lessons", "--dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"{lesson_id('code:TS2345')}  2 run(s)" in out
    assert "\n    Seen: src/orders/api.ts(42,17): error TS2345: " in out  # what the error said
    assert "\n    What worked: The build passed on attempt 3. (2 vote(s))\n" in out
    assert listed["lessons"][1]["seen"][0].startswith("src/orders/api.ts(42,17): error TS2345")


def test_lessons_with_a_signature_prints_that_lesson_whole(
        kb: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    """--signature prints the one lesson's document; an unknown signature exits 1."""
    root, ts = kb
    assert main(["lessons", "--dir", str(root), "--signature", "code:TS2345"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("---\nid: " + lesson_id("code:TS2345"))
    assert "## What worked" in out and ts[1] in out
    assert main(["lessons", "--dir", str(root), "--signature", "code:TS9999"]) == 1
    assert "no lessons for code:TS9999" in capsys.readouterr().err


@pytest.mark.parametrize(("asked", "signature"), [
    ("TS2345", "code:TS2345"), ("ValueError", "exception:ValueError")])
def test_a_signature_given_without_its_kind_finds_its_lesson(
        kb: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str], asked: str,
        signature: str) -> None:
    """A code or an exception name as a person types it, without ``code:``: its lesson."""
    root, _ = kb
    assert main(["lessons", "--dir", str(root), "--signature", asked]) == 0
    assert capsys.readouterr().out.startswith("---\nid: " + lesson_id(signature))
    assert main(["lessons", "--dir", str(root), "--signature", asked, "--json"]) == 0
    assert [item["signature"] for item in json.loads(capsys.readouterr().out)["lessons"]] \
        == [signature]
    assert main(["lessons", "--dir", str(root), "--signature", "TS9999"]) == 1
    assert "no lessons for TS9999" in capsys.readouterr().err


def test_search_lists_the_lesson_above_its_diaries(
        kb: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    """`search TS2345` prints the TS2345 lesson, with what worked, before the diaries that
    met the error."""
    root, ts = kb
    assert main(["search", "TS2345", "--dir", str(root)]) == 0
    out = capsys.readouterr().out
    lesson = lesson_id("code:TS2345")
    assert out.index(f"{lesson}  lesson") < out.index(ts[0]) and ts[1] in out
    assert "\n    What worked: The build passed on attempt 3.\n" in out
    assert main(["search", "TS2345", "--dir", str(root), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert [item["id"] for item in answer["lessons"]] == [lesson]
    assert {item["id"] for item in answer["results"]} == set(ts)


def test_a_filtered_search_leaves_lessons_out(
        kb: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    """A filter on diaries (here --agent) lists diaries only."""
    root, _ = kb
    assert main(["search", "TS2345", "--agent", "coder", "--dir", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lessons"] == []
