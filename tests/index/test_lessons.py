"""Lessons: one document per error signature, counted in as diaries are written."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_diary.errors import UnsafePathError
from otel_diary.index.documents import scan_diaries
from otel_diary.index.lessons import (
    Lesson,
    LessonBook,
    Sighting,
    lesson_from_document,
    lesson_id,
    lesson_path,
    lesson_slug,
)
from otel_diary.index.rules import vote
from otel_diary.pipeline.render import parse_front_matter
from otel_diary.pipeline.revise import parse_operations
from tests.support.fifo import finishes, needs_fifos
from tests.support.kb import TS_STDERR, kb_pipeline, task_record, write
from tests.support.loopback import ChatServer, serve_asgi

REPO = Path(__file__).resolve().parents[2]
TS_SIGNATURE = "code:TS2345"


def lesson_front(root: Path, signature: str = TS_SIGNATURE) -> dict[str, Any]:
    return parse_front_matter((root / lesson_path(signature)).read_text(encoding="utf-8"))


def ts_run(n: int, **settings: Any) -> Any:
    return task_record(n, f"T-{n}", stderr=TS_STDERR.replace("(42,17)", f"({n},3)"),
                       agent=f"agent-{n % 2}", **settings)


def test_a_lesson_after_three_runs_counts_three_with_their_evidence(tmp_path: Path) -> None:
    """Three runs of one error make one lesson with runs: 3 and the three diary ids."""
    pipeline = kb_pipeline(tmp_path)
    diaries = [write(pipeline, ts_run(n)) for n in (1, 2, 3)]
    pipeline.close()
    front = lesson_front(tmp_path)
    assert front["id"] == lesson_id(TS_SIGNATURE)
    assert (front["source_type"], front["signature"]) == ("lesson", TS_SIGNATURE)
    assert (front["runs"], front["recovered"]) == (3, 3)
    assert front["evidence"] == [d.id for d in diaries]
    assert front["first_seen"] == diaries[0].created
    assert front["last_seen"] == diaries[2].created
    assert front["agents"] == ["agent-1", "agent-0"]
    assert [rule["votes"] for rule in front["rules"]] == [3]
    assert list((tmp_path / "diaries" / "lessons").glob("*.md")) == [
        tmp_path / lesson_path(TS_SIGNATURE)]


def test_the_lesson_body_shows_the_error_what_worked_and_the_newest_diaries(
        tmp_path: Path) -> None:
    """The body holds the error lines as seen, voted rules with evidence, newest diaries."""
    pipeline = kb_pipeline(tmp_path)
    diaries = [write(pipeline, ts_run(1)),
               write(pipeline, ts_run(2, extra={"orchestrator.build_verify.attempts": 5}))]
    pipeline.close()
    text = (tmp_path / lesson_path(TS_SIGNATURE)).read_text(encoding="utf-8")
    body = text.split("\n---\n", 1)[1]
    assert "## The error as seen\n- `src/orders/api.ts(1,3): error TS2345" in body
    assert "## What worked\n- The build passed on attempt 3-5. (2 vote(s); " in body
    assert body.index(diaries[1].id, body.index("## Newest diaries")) < body.rindex(
        diaries[0].id)


def test_a_diary_written_twice_is_counted_once(tmp_path: Path) -> None:
    """Redelivering one task span does not count its run twice."""
    pipeline = kb_pipeline(tmp_path)
    write(pipeline, ts_run(1))
    write(pipeline, ts_run(1))
    pipeline.close()
    assert lesson_front(tmp_path)["runs"] == 1


def test_runs_without_a_recognisable_error_make_no_lesson(tmp_path: Path) -> None:
    """A completed run and a recovery with no stderr give no lesson file."""
    pipeline = kb_pipeline(tmp_path)
    write(pipeline, task_record(1, "T-1"))
    pipeline.close()
    assert not (tmp_path / "diaries" / "lessons").exists()


def test_lesson_slugs_are_readable_and_distinct() -> None:
    """A code gives a readable name; two templates alike in their first words differ."""
    assert lesson_slug("code:TS2345") == "code-TS2345"
    first = lesson_slug("template:" + "x " * 40 + "a")
    second = lesson_slug("template:" + "x " * 40 + "b")
    assert first != second and len(first) <= 80


WORKER = """
import sys
from otel_diary.index.lessons import LessonBook, Sighting
root, worker = sys.argv[1], int(sys.argv[2])
book = LessonBook(root)
for n in range(5):
    ident = f"kh-{worker:02d}{n:02d}"
    book.add("code:TS2345", Sighting(ident, f"diaries/agents/a/{ident}.md", "t", f"a{worker}",
             f"2026-07-25T17:{worker:02d}:{n:02d}.000Z", True, "error TS2345", "Passed.", ""))
"""


def test_ten_processes_updating_one_lesson_lose_no_run(tmp_path: Path) -> None:
    """Ten processes adding five runs each to one lesson at once leave runs: 50."""
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), str(worker)],
                                cwd=REPO) for worker in range(10)]
    assert [worker.wait(timeout=120) for worker in workers] == [0] * 10
    front = lesson_front(tmp_path)
    assert front["runs"] == 50
    assert sorted(front["evidence"]) == sorted(f"kh-{w:02d}{n:02d}" for w in range(10)
                                               for n in range(5))
    assert front["rules"][0]["votes"] == 50
    assert list((tmp_path / "diaries" / "lessons").glob(".*.tmp")) == []


@pytest.fixture
def chat() -> Iterator[tuple[ChatServer, str]]:
    server = ChatServer()
    with serve_asgi(server) as url:
        yield server, url + "/v1"


def test_a_model_answering_garbage_leaves_the_lesson_valid(
        chat: tuple[ChatServer, str], tmp_path: Path) -> None:
    """Unparseable, wrong-shaped and out-of-range answers change no rule; counts go on."""
    server, url = chat
    server.script = ["not json at all", '[{"op": "AGREE", "n": 7}, {"op": "EDIT"}, 3]',
                     '{"op": "ADD"}', "[" * 50]
    pipeline = kb_pipeline(tmp_path, reflection_url=url)
    diaries = [write(pipeline, ts_run(n)) for n in (1, 2, 3, 4)]
    pipeline.close()
    lesson = lesson_from_document((tmp_path / lesson_path(TS_SIGNATURE)).read_text("utf-8"))
    assert lesson.runs == 4 and lesson.evidence == [d.id for d in diaries]
    assert [(rule.text, rule.votes) for rule in lesson.rules] == [
        ("The build passed on attempt 3.", 4)]
    revisions = [r for r in server.requests if "Current rules" in str(r.json())]
    assert len(revisions) == 4


def test_model_operations_add_agree_edit_and_remove_rules_with_votes(
        chat: tuple[ChatServer, str], tmp_path: Path) -> None:
    """ADD, AGREE, EDIT and REMOVE answers are applied to the lesson's rules with votes."""
    server, url = chat
    add = '[{"op": "ADD", "rule": "Narrow optional strings before the call."}]'
    # Each diary makes two calls: its reflection, then the lesson revision.
    server.script = ["Insight.", add, "Insight.", '[{"op": "AGREE", "n": 2}]', "Insight.",
                     '[{"op": "EDIT", "n": 2, "rule": "Narrow optional values first."}]',
                     "Insight.", '[{"op": "REMOVE", "n": 1}]']
    pipeline = kb_pipeline(tmp_path, reflection_url=url, reflection_concurrency=1)
    diaries = [write(pipeline, ts_run(n)) for n in (1, 2, 3, 4)]
    pipeline.close()
    rules = {rule["text"]: rule for rule in lesson_front(tmp_path)["rules"]}
    assert rules["Narrow optional values first."]["votes"] == 3
    assert rules["Narrow optional values first."]["evidence"] == [d.id for d in diaries[:3]]
    assert rules["The build passed on attempt 3."]["votes"] == 3


def test_parse_operations_keeps_only_valid_operations() -> None:
    """Unknown ops, missing texts and numbers naming no rule are dropped."""
    answer = ('Sure: [{"op": "add", "rule": "Pin the peer."}, {"op": "AGREE", "n": 1}, '
              '{"op": "AGREE", "n": 0}, {"op": "EDIT", "n": 1}, {"op": "DANCE"}]')
    assert parse_operations(answer, ["Retry once."]) == [("ADD", "", "Pin the peer."),
                                                        ("AGREE", "Retry once.", "")]
    assert parse_operations("[true]", []) == []


def test_a_damaged_lesson_file_is_started_again(tmp_path: Path) -> None:
    """A lesson file that is not a lesson any more is replaced by a valid one."""
    book = LessonBook(tmp_path)
    path = book.path(TS_SIGNATURE)
    path.parent.mkdir(parents=True)
    path.write_text("---\n: [\n---\n", encoding="utf-8")
    book.add(TS_SIGNATURE, Sighting("kh-1", "p", "t", "a", "2026", True, "e", "", ""))
    assert lesson_front(tmp_path)["runs"] == 1


@needs_fifos
def test_a_fifo_where_a_lesson_goes_is_replaced_by_the_lesson(tmp_path: Path) -> None:
    """A FIFO planted at a lesson's file name never holds up the pipeline: the diary is
    written and the lesson takes the FIFO's place."""
    fifo = tmp_path / lesson_path(TS_SIGNATURE)
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    pipeline = kb_pipeline(tmp_path)
    diary = finishes(lambda: write(pipeline, ts_run(1)), fifo)
    pipeline.close()
    assert lesson_front(tmp_path)["evidence"] == [diary.id]


def test_reindex_rebuilds_lessons_from_the_diaries(tmp_path: Path) -> None:
    """Deleted or damaged lessons come back from the diaries with their counts."""
    pipeline = kb_pipeline(tmp_path)
    for n in (1, 2, 3):
        write(pipeline, ts_run(n))
    pipeline.close()
    before = lesson_front(tmp_path)
    stray = tmp_path / "diaries" / "lessons" / "notes.md"
    stray.write_text("my own notes\n", encoding="utf-8")
    (tmp_path / lesson_path(TS_SIGNATURE)).unlink()
    done = subprocess.run([sys.executable, "-m", "otel_diary.cli", "reindex", "--dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1 lesson" in done.stdout
    after = lesson_front(tmp_path)
    assert {k: after[k] for k in ("id", "runs", "evidence")} == {
        k: before[k] for k in ("id", "runs", "evidence")}
    assert stray.read_text(encoding="utf-8") == "my own notes\n"


def rebuild_by_reindex(root: Path) -> int:
    """``otel-diary reindex``'s way: the lessons from the index's entries, the folder read
    once; how many lessons there are."""
    from otel_diary.cli import main

    assert main(["reindex", "--dir", str(root)]) == 0
    return len(list((root / "diaries" / "lessons").glob("*.md")))


@pytest.mark.parametrize("rebuild", [
    lambda root: LessonBook(root).rebuild(scan_diaries(root)), rebuild_by_reindex],
    ids=["front-matter", "reindex"])
def test_a_rebuild_writes_the_lessons_the_runs_wrote_byte_for_byte(
        tmp_path: Path, rebuild: Callable[[Path], int]) -> None:
    """Rebuilding from the diaries gives each lesson file exactly as the runs left it:
    rules tied in votes in the same order, the same rules let go when more than fit."""
    pipeline = kb_pipeline(tmp_path)
    file = tmp_path / lesson_path(TS_SIGNATURE)
    # Ties after 4 runs; then twelve rules more than fit, and votes for the kept ones.
    for runs in (["", "b", "b", ""], [*(f"r{n}" for n in range(12)), "c", "b", ""]):
        for route in runs:
            n = len(scan_diaries(tmp_path))
            extra = {"orchestrator.escalation_count": 1, "orchestrator.route": route} \
                if route else {}
            write(pipeline, ts_run(n, extra=extra))
        written = file.read_bytes()
        assert rebuild(tmp_path) == 1
        assert file.read_bytes() == written
    pipeline.close()
    assert len(lesson_front(tmp_path)["rules"]) == 10  # some were let go


def test_a_rebuild_keeps_a_diary_written_while_it_scanned(tmp_path: Path) -> None:
    """A run counted in after the rebuild's scan is still in the lesson it writes."""
    pipeline = kb_pipeline(tmp_path)
    write(pipeline, ts_run(1))
    scanned = scan_diaries(tmp_path)
    late = write(pipeline, ts_run(2))
    pipeline.close()
    assert LessonBook(tmp_path).rebuild(scanned) == 1
    front = lesson_front(tmp_path)
    assert front["runs"] == 2 and late.id in front["evidence"]


def test_lesson_revisions_share_the_reflection_budget(
        chat: tuple[ChatServer, str], tmp_path: Path) -> None:
    """With one call a minute, the reflection takes it: no revision call, and the lesson
    is still counted in without a model."""
    server, url = chat
    server.script = ['[{"op": "ADD", "rule": "Never seen."}]']
    pipeline = kb_pipeline(tmp_path, reflection_url=url, reflection_calls_per_minute=1)
    write(pipeline, ts_run(1))
    pipeline.close()
    assert len(server.requests) == 1
    assert "Current rules" not in str(server.requests[0].json())
    front = lesson_front(tmp_path)
    assert front["runs"] == 1
    assert [rule["text"] for rule in front["rules"]] == ["The build passed on attempt 3."]


def sighting_of(ident: str) -> Sighting:
    return Sighting(ident, "p", "t", "a", "2026", True, "e", "", "")


def test_a_planted_lock_link_makes_the_writer_create_nothing_outside(tmp_path: Path) -> None:
    """A lesson's lock planted as a symbolic link to a file outside the knowledge base is
    refused: nothing is created or touched there, and the pipeline still writes the diary
    (the lesson's failure is counted)."""
    root, outside = tmp_path / "kb", tmp_path / "outside"
    outside.mkdir()
    folder = root / "diaries" / "lessons"
    folder.mkdir(parents=True)
    (folder / f".{lesson_slug(TS_SIGNATURE)}.lock").symlink_to(outside / "created")
    with pytest.raises(UnsafePathError, match="symbolic link"):
        LessonBook(root).add(TS_SIGNATURE, sighting_of("kh-1"))
    pipeline = kb_pipeline(root)
    diary = write(pipeline, ts_run(1))
    pipeline.close()
    assert (root / diary.path).is_file() and pipeline.stats.index_errors == 1
    assert list(outside.iterdir()) == []


def test_a_lessons_folder_leading_out_of_the_knowledge_base_is_refused(tmp_path: Path) -> None:
    """With ``diaries/lessons`` a link to a folder outside, no lesson or lock goes there,
    and the lessons found there are not read (a reviser would put their rules in a prompt)."""
    root, outside = tmp_path / "kb", tmp_path / "outside"
    outside.mkdir()
    private = Lesson(TS_SIGNATURE)
    private.add(sighting_of("kh-private"))
    vote(private.rules, "Private rule", "kh-private")
    (outside / Path(lesson_path(TS_SIGNATURE)).name).write_text(private.as_document(),
                                                                encoding="utf-8")
    before = sorted(outside.iterdir())
    (root / "diaries").mkdir(parents=True)
    (root / "diaries" / "lessons").symlink_to(outside, target_is_directory=True)
    book = LessonBook(root)
    assert book.read(TS_SIGNATURE).rules == [] and book.all() == []
    assert not book.lists_others(TS_SIGNATURE, "kh-1")
    with pytest.raises(UnsafePathError, match="leads out"):
        book.add(TS_SIGNATURE, sighting_of("kh-1"))
    assert sorted(outside.iterdir()) == before


def test_a_lesson_file_linked_to_one_outside_is_not_read_but_replaced(tmp_path: Path) -> None:
    """A lesson file planted as a link to a lesson outside: what it points to is neither
    read nor changed; the update writes the lesson in its place, from this run alone."""
    root, outside = tmp_path / "kb", tmp_path / "private.md"
    other = Lesson(TS_SIGNATURE)
    other.add(sighting_of("kh-private"))
    vote(other.rules, "Private rule", "kh-private")
    outside.write_text(other.as_document(), encoding="utf-8")
    before = outside.read_bytes()
    path = root / lesson_path(TS_SIGNATURE)
    path.parent.mkdir(parents=True)
    path.symlink_to(outside)
    book = LessonBook(root)
    assert book.read(TS_SIGNATURE).evidence == [] and book.all() == []
    assert book.add(TS_SIGNATURE, sighting_of("kh-1")).evidence == ["kh-1"]
    assert not path.is_symlink() and "Private rule" not in path.read_text(encoding="utf-8")
    assert outside.read_bytes() == before


def test_a_diary_counted_late_keeps_the_newest_diaries_the_newest() -> None:
    """A diary older than every one a lesson lists, counted after them (a run that ended
    earlier and was delivered later), leaves the list of newest diaries as a rebuild in
    time order gives it: the newest, newest first."""
    lesson = Lesson(TS_SIGNATURE)
    for day in (2, 3, 4, 5, 6, 1):
        lesson.add(Sighting(f"kh-{day}", "p", "t", "a", f"2026-01-0{day}T00:00:00Z", True,
                            "e", "", ""))
    assert [item["id"] for item in lesson.newest] == ["kh-6", "kh-5", "kh-4", "kh-3", "kh-2"]
