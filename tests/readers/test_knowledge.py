"""KnowledgeBase: search, fetch and error matching over a knowledge base the pipeline wrote."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from otel_diary import Diary
from otel_diary.cli import main
from otel_diary.index.documents import MAX_DOCUMENT_BYTES
from otel_diary.index.store import INDEX_FILE, DiaryIndex
from otel_diary.pipeline.render import parse_front_matter
from otel_diary.readers.knowledge import KnowledgeBase, ReadError, error_line
from tests.support.fifo import finishes, needs_fifos
from tests.support.kb import kb_pipeline, task_record, write
from tests.support.knowledge import (
    NEW_TS_ERROR,
    build_knowledge_base,
    snapshot,
    write_lesson,
)

KB = tuple[Path, dict[str, Diary]]


@pytest.fixture(scope="module")
def kb_template(tmp_path_factory: pytest.TempPathFactory) -> KB:
    root = tmp_path_factory.mktemp("kb")
    return root, build_knowledge_base(root)


@pytest.fixture
def kb(kb_template: KB, tmp_path: Path) -> KB:
    """A private copy of the knowledge base."""
    root, diaries = kb_template
    copy = tmp_path / "kb"
    shutil.copytree(root, copy)
    return copy, diaries


def test_search_finds_a_diary_by_an_error_code_and_by_a_word_of_its_reflection(kb: KB) -> None:
    """An error code of the stderr tail and a stemmed word of "What was learned" both find it."""
    root, diaries = kb
    with KnowledgeBase(root) as base:
        assert [f.id for f in base.search("TS2345").results] == [diaries["types"].id]
        assert [f.id for f in base.search("defensive").results] == [diaries["parsing"].id]
        assert base.search("defensive").match == "all"
        nothing = base.search("defensive", agent="coder")
        assert (nothing.results, nothing.match) == ([], "none")  # as search --json says


def test_lessons_come_first_in_a_search_and_filters_leave_them_out(kb: KB) -> None:
    """A lesson matching the query is listed before the diaries; an agent filter drops it."""
    root, diaries = kb
    lesson = write_lesson(root, "code:TS2345", "Narrow optional values before the call",
                          [diaries["types"].id])
    with KnowledgeBase(root) as base:
        answer = base.search("TS2345")
        assert [(f.kind, f.id) for f in answer.results] == [
            ("lesson", lesson), ("diary", diaries["types"].id)]
        assert [f.kind for f in base.search("TS2345", agent="coder").results] == ["diary"]


def test_a_search_lists_the_lessons_of_the_diaries_it_finds(kb: KB) -> None:
    """Words no lesson has all of still list the lessons gathering the diaries found, in
    their order, before them, each naming its diary; a search with no words lists none."""
    root, diaries = kb
    types = write_lesson(root, "code:TS2345", "Narrow optional values before the call",
                         [diaries["types"].id])
    parsing = write_lesson(root, "exception:ValueError", "Check the input first",
                           [diaries["parsing"].id])
    with KnowledgeBase(root) as base:
        for words, match in (("tighten types in orders", "all"),
                             ("how did we tighten the types in the orders api", "any")):
            answer = base.search(words)
            assert answer.match == match
            found = [(f.kind, f.id) for f in answer.results]
            assert found[0] == ("lesson", types)
            assert answer.results[0].matched == [diaries["types"].id]
            assert found.index(("diary", diaries["types"].id)) > 0
        assert [f.kind for f in base.search("").results] == ["diary"] * 3
        assert [f.kind for f in base.search("orders", outcome="recovered").results] == ["diary"]
        both = base.search("harden parser tighten types", limit=4)
        order = [f.id for f in both.results if f.kind == "diary"]
        gathers = {types: diaries["types"].id, parsing: diaries["parsing"].id}
        assert [f.id for f in both.results[:2]] == sorted(
            gathers, key=lambda lesson: order.index(gathers[lesson]))
        assert [f.matched for f in both.results[:2]] == [[ident] for ident in order]


def test_fetch_returns_the_whole_document_by_id_or_path(kb: KB) -> None:
    """A kh- id and the diary's relative path give the same front matter and body."""
    root, diaries = kb
    diary = diaries["types"]
    with KnowledgeBase(root) as base:
        by_id = base.fetch(diary.id)
        by_path = base.fetch(diary.path)
        by_absolute = base.fetch(str(root / diary.path))
    assert by_id == by_path == by_absolute
    assert by_id.front_matter["trace_id"] == diary.trace_id
    assert by_id.body == diary.body
    assert by_id.uri == f"diary://{diary.id}"


def test_fetch_gives_a_documents_secrets_back_redacted(kb: KB) -> None:
    """A document another tool put in the knowledge base, with a password in its front
    matter and a token in its body: the front matter, the body and the text come back
    without them, each secret's place marked."""
    root, _ = kb
    file = root / "diaries" / "notes" / "deploy.md"
    file.parent.mkdir(parents=True)
    file.write_text("---\nid: kh-deploy-notes\nsource_type: diary\ntitle: Deploy notes\n"
                    "password: hunter2xyz\nhosts:\n- db.internal\n---\n\n# Deploy notes\n\n"
                    "Log in with ghp_" + "Ab1" * 12 + " first.\n", encoding="utf-8")
    with KnowledgeBase(root) as base:
        document = base.fetch("diaries/notes/deploy.md")
    assert document.front_matter == {
        "id": "kh-deploy-notes", "source_type": "diary", "title": "Deploy notes",
        "password": "[REDACTED:password]", "hosts": ["db.internal"]}
    assert document.body == "# Deploy notes\n\nLog in with [REDACTED:github_token] first.\n"
    for text in (document.content, str(document.front_matter)):
        assert "hunter2" not in text and "Ab1Ab1" not in text
    assert document.title == "Deploy notes"


def test_fetch_and_show_take_out_a_key_a_quoted_value_escapes(
        kb: KB, capsys: pytest.CaptureFixture[str]) -> None:
    """``"\\r\\ngsk_…"`` reads as a line break and a key, but as text the key is glued to
    an ``n``: the document's text comes back written again from its values, redacted."""
    root, _ = kb
    key = "gsk_" + "0" * 52
    file = root / "diaries" / "agents" / "coder" / "escaped.md"
    file.write_text("---\nid: kh-escaped-notes\nsource_type: diary\ntitle: Escaped\n"
                    f'note: "\\r\\n{key} "\n---\n\n# Escaped\n', encoding="utf-8")
    with KnowledgeBase(root) as base:
        document = base.fetch("diaries/agents/coder/escaped.md")
    assert main(["reindex", "--dir", str(root)]) == 0
    capsys.readouterr()
    assert main(["show", "--id", "kh-escaped-notes", "--dir", str(root)]) == 0
    shown = capsys.readouterr().out
    for text in (document.content, shown):
        assert key not in text
        assert parse_front_matter(text)["note"] == "\r\n[REDACTED:groq_api_key] "


@pytest.mark.parametrize("wanted", ["../outside.md", "/etc/passwd", "diaries/../index.sqlite3",
                                    "kh-00000000000000000000", "diaries/agents/none.md"])
def test_fetch_refuses_what_is_not_a_document_of_the_knowledge_base(kb: KB, wanted: str) -> None:
    """Paths leaving ``<root>/diaries``, unknown ids and missing files are a ReadError."""
    root, _ = kb
    (root / "outside.md").write_text("---\nid: kh-x\n---\n", encoding="utf-8")
    with KnowledgeBase(root) as base, pytest.raises(ReadError):
        base.fetch(wanted)


def test_fetch_refuses_a_symlink_that_points_out_of_the_knowledge_base(kb: KB) -> None:
    """A link inside the diary folder to a file outside it is refused, not followed."""
    root, _ = kb
    secret = root.parent / "secret.md"
    secret.write_text("---\nid: kh-secret\nsource_type: diary\n---\n\nsecret\n", encoding="utf-8")
    link = root / "diaries" / "agents" / "coder" / "link.md"
    link.symlink_to(secret)
    with KnowledgeBase(root) as base, pytest.raises(ReadError, match="outside"):
        base.fetch("diaries/agents/coder/link.md")


def test_search_and_lessons_show_nothing_a_planted_link_points_to_outside(kb: KB) -> None:
    """A lesson and a diary planted as links to documents outside the knowledge base are
    listed by neither search nor lessons, whether the folder is scanned (no index) or
    indexed again, as fetch refuses them: what they point to is not the knowledge base's."""
    root, diaries = kb
    outside = root.parent / "outside"
    write_lesson(outside, "code:TS2345", "Private topsecret rule", [diaries["types"].id])
    private = (root / diaries["types"].path).read_text(encoding="utf-8").replace(
        diaries["types"].id, "kh-0123456789abcdef0123").replace("Tighten", "topsecret")
    (outside / "diary.md").write_text(private, encoding="utf-8")
    (root / "diaries" / "lessons").mkdir(exist_ok=True)
    (root / "diaries" / "lessons" / "planted.md").symlink_to(
        outside / "diaries" / "lessons" / "code-TS2345.md")
    (root / "diaries" / "agents" / "coder" / "planted.md").symlink_to(outside / "diary.md")
    (root / INDEX_FILE).unlink()
    for rebuilt in (False, True):
        if rebuilt:
            with DiaryIndex(root) as index:
                index.rebuild()
        with KnowledgeBase(root) as base:
            assert base.search("topsecret").results == []
            found = base.lessons(NEW_TS_ERROR).results
            assert found and all(f.kind == "diary" for f in found)
            assert "kh-0123456789abcdef0123" not in {f.id for f in found}
            with pytest.raises(ReadError, match="outside"):
                base.fetch("diaries/lessons/planted.md")


def _alias_bomb(levels: int) -> str:
    """Front matter of a few hundred bytes whose aliases nest into 10**levels values."""
    nested = "".join(f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]\n"
                     for n in range(1, levels + 1))
    return ("---\nid: kh-aliasbomb00000000000\nsource_type: diary\n"
            f"a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n{nested}tags: [*a{levels}]\n---\n\nbomb\n")


def test_hand_written_front_matter_is_read_safely_or_refused(kb: KB) -> None:
    """Aliases nesting into a billion values, or into themselves, are refused at once
    (fetch says so, a scan passes the file over); keys YAML reads as dates or numbers
    are given as strings; a link that leads to itself, or a file larger than a diary
    can be, is refused."""
    root, diaries = kb
    folder = root / "diaries" / "agents" / "coder"
    (folder / "bomb.md").write_text(_alias_bomb(9), encoding="utf-8")
    (folder / "loop.md").write_text(
        "---\nid: kh-aliasloop00000000000\nsource_type: diary\nloop: &a [*a]\n---\n\nx\n",
        encoding="utf-8")
    (folder / "dates.md").write_text(
        "---\nid: kh-datekeys00000000000\nsource_type: diary\n2026-01-01: x\n"
        "runs: {1: [a, {2: b}]}\n---\n\nbody\n", encoding="utf-8")
    (folder / "circle.md").symlink_to(folder / "circle.md")
    (folder / "huge.md").write_text(_alias_bomb(1) + "x" * MAX_DOCUMENT_BYTES, encoding="utf-8")
    (root / INDEX_FILE).unlink()  # the scan reads every file's front matter too
    with KnowledgeBase(root) as base:
        for name in ("bomb", "loop"):
            with pytest.raises(ReadError, match="not a diary or lesson"):
                base.fetch(f"diaries/agents/coder/{name}.md")
        with pytest.raises(ReadError, match="cannot read"):
            base.fetch("diaries/agents/coder/circle.md")
        with pytest.raises(ReadError, match="larger than a diary can be"):
            base.fetch("diaries/agents/coder/huge.md")
        dated = base.fetch("diaries/agents/coder/dates.md").front_matter
        found = [f.id for f in base.search("TS2345").results]
    assert dated["2026-01-01"] == "x"
    assert dated["runs"] == {"1": ["a", {"2": "b"}]}
    assert found == [diaries["types"].id]


@needs_fifos
def test_a_fifo_in_the_knowledge_base_is_never_waited_on(kb: KB) -> None:
    """A FIFO among the diaries is refused by fetch at once."""
    root, _ = kb
    fifo = root / "diaries" / "agents" / "coder" / "pipe.md"
    os.mkfifo(fifo)
    with KnowledgeBase(root) as base:
        with pytest.raises(ReadError, match="not a regular file"):
            finishes(lambda: base.fetch("diaries/agents/coder/pipe.md"), fifo)


def test_lessons_match_a_new_error_by_signature_lesson_first(kb: KB) -> None:
    """The same compiler code in another file finds the lesson, then the diary that met it."""
    root, diaries = kb
    lesson = write_lesson(root, "code:TS2345", "Narrow optional values before the call",
                          [diaries["types"].id])
    with KnowledgeBase(root) as base:
        answer = base.lessons(NEW_TS_ERROR)
    assert answer.signatures == ["code:TS2345"]
    assert [(f.kind, f.id, f.matched) for f in answer.results] == [
        ("lesson", lesson, ["code:TS2345"]),
        ("diary", diaries["types"].id, ["code:TS2345"])]



def test_the_error_line_a_lesson_answer_gives_back_is_redacted(kb: KB) -> None:
    """A pasted stderr tail can hold a key: the first line the answer echoes has it out,
    and the error is still matched by its signature."""
    root, diaries = kb
    key = "gsk_" + "Zq7xW2mK9pL4vN8rT3yB6cH1jD5fG0sQaE" * 2
    error = NEW_TS_ERROR.replace("error TS2345:", f"error TS2345: (key {key})", 1)
    with KnowledgeBase(root) as base:
        answer = base.lessons(error)
    assert key not in answer.first_line and "[REDACTED:groq_api_key]" in answer.first_line
    assert answer.signatures == ["code:TS2345"]
    assert diaries["types"].id in [found.id for found in answer.results]


def test_a_lesson_an_older_version_grew_with_a_key_gives_no_part_of_it_back(kb: KB) -> None:
    """A lesson file holding a key the redactor has learnt since: a search for a word of
    it, or next to it, gives a snippet with the key's place marked, never its body (the
    snippet was cut or highlighted inside the key before it was redacted)."""
    root, diaries = kb
    key = "ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c"
    write_lesson(root, "code:TS2345", f"Export {key} before the release step",
                 [diaries["types"].id])
    with KnowledgeBase(root) as base:
        answers = [base.search(query).results for query in ("ghp", "release", key[4:])]
    assert [found.kind for found in answers[1]][:1] == ["lesson"]
    assert "[REDACTED:github_token]" in answers[1][0].snippet
    assert key[4:16] not in str(answers)


def test_lessons_without_lesson_documents_match_diaries_and_fall_back_to_text(kb: KB) -> None:
    """With no lessons, diaries sharing a signature come first; an error without one is
    matched by the words of its first error line."""
    root, diaries = kb
    with KnowledgeBase(root) as base:
        by_code = base.lessons(NEW_TS_ERROR)
        by_text = base.lessons("Build log\nerror: Argument of type is not assignable")
        unknown = base.lessons("segmentation fault in the frobnicator")
    assert [f.id for f in by_code.results] == [diaries["types"].id]
    assert by_text.signatures == []
    assert by_text.first_line == "error: Argument of type is not assignable"
    assert [(f.id, f.matched) for f in by_text.results] == [(diaries["types"].id, ["text"])]
    assert unknown.results == []


def test_an_error_without_the_lessons_signature_gets_it_through_the_diary_that_met_it(
        kb: KB) -> None:
    """An error text without the code an earlier run's output had still gets that run's
    lesson, through the diary its words find: first, naming the diary."""
    root, diaries = kb
    lesson = write_lesson(root, "code:TS2345", "Narrow optional values before the call",
                          [diaries["types"].id])
    with KnowledgeBase(root) as base:
        answer = base.lessons("Build log\nerror: Argument of type is not assignable")
    assert answer.signatures == []
    assert [(f.kind, f.id, f.matched) for f in answer.results] == [
        ("lesson", lesson, [diaries["types"].id]), ("diary", diaries["types"].id, ["text"])]


def test_error_line_skips_the_traceback_header() -> None:
    """The line a full-text match uses is the first that looks like an error."""
    assert error_line("Traceback (most recent call last):\n  File x\nKeyError: 'a'") == \
        "KeyError: 'a'"
    assert error_line("\n\nplain words\nmore") == "plain words"


def test_error_line_is_the_line_a_lesson_records() -> None:
    """Go's ``undefined:``, after the package line it prints first, is the error line, as
    the lesson of that error lists it as seen; past the lines a lesson reads, a line that
    says error still counts."""
    assert error_line("# example.com/shop/cmd\n./cmd/main.go:88:14: undefined: cfg\n") == \
        "./cmd/main.go:88:14: undefined: cfg"
    assert error_line("compiling\n" * 300 + "error: out of memory\n") == "error: out of memory"


@pytest.mark.parametrize("call", ["search-huge", "lessons-huge", "lessons-empty", "limit",
                                  "no-words"])
def test_bad_requests_are_read_errors_with_a_message(kb: KB, call: str) -> None:
    """Oversized text, empty errors, limits out of range and queries with no words are refused."""
    root, _ = kb
    with KnowledgeBase(root) as base, pytest.raises(ReadError) as raised:
        if call == "search-huge":
            base.search("word " * 10_000)
        elif call == "lessons-huge":
            base.lessons("x" * 100_000)
        elif call == "lessons-empty":
            base.lessons("   ")
        elif call == "limit":
            base.search("orders", limit=0)
        else:
            base.search('"(" ")"')
    assert str(raised.value)


def test_text_utf_8_cannot_hold_is_answered_not_raised(kb: KB) -> None:
    """A lone surrogate (a JSON request can carry one) or a NUL in a query, a filter or an
    id is answered like any text no document holds, never with UnicodeEncodeError."""
    root, diaries = kb
    with KnowledgeBase(root) as base:
        assert [f.id for f in base.search("TS2345 \ud800").results] == [diaries["types"].id]
        assert base.search("TS2345", agent="\udc80").results == []
        assert base.search("TS2345", agent="a\x00b").results == []
        assert base.search("TS2345", since="\ud800").results == []
        assert base.lessons("error TS2345 \ud800").results
        for ident in ("kh-\udc80", "diaries/\ud800.md"):
            with pytest.raises(ReadError, match="no d"):
                base.fetch(ident)


def test_reading_writes_nothing_to_the_knowledge_base(kb: KB) -> None:
    """After searches, fetches and error matches, every file under the root is unchanged."""
    root, diaries = kb
    write_lesson(root, "code:TS2345", "Narrow optional values", [diaries["types"].id])
    before = snapshot(root)
    with KnowledgeBase(root) as base:
        base.search("orders")
        base.search("")
        base.fetch(diaries["types"].id)
        base.lessons(NEW_TS_ERROR)
    assert snapshot(root) == before


def test_without_an_index_the_folder_is_scanned_privately_and_kept_current(kb: KB) -> None:
    """No index: answers come from a scan, none is created, and a diary added later is found."""
    root, diaries = kb
    (root / INDEX_FILE).unlink()
    with KnowledgeBase(root) as base:
        assert [f.id for f in base.search("TS2345").results] == [diaries["types"].id]
        copy = (root / diaries["types"].path).read_text(encoding="utf-8")
        added = copy.replace(diaries["types"].id, "kh-0123456789abcdef0123")
        target = root / "diaries" / "agents" / "newcomer" / "2026-07-26-T-9.md"
        target.parent.mkdir()
        target.write_text(added, encoding="utf-8")
        found = {f.id for f in base.search("TS2345").results}
    assert found == {diaries["types"].id, "kh-0123456789abcdef0123"}
    assert not (root / INDEX_FILE).exists()


def test_a_diary_the_app_indexes_while_serving_is_found(kb: KB) -> None:
    """A reader open on the index sees diaries a live app writes after it started."""
    root, _ = kb
    with KnowledgeBase(root) as base:
        assert base.search("frobnicator").results == []
        pipeline = kb_pipeline(root)
        late = write(pipeline, task_record(9, "T-900", title="Polish the frobnicator"))
        pipeline.close()
        assert [f.id for f in base.search("frobnicator").results] == [late.id]


def test_a_lesson_is_fetched_by_its_id_and_matched_by_the_words_of_an_error(kb: KB) -> None:
    """A lesson id gives the lesson document; an error without a signature finds a lesson
    whose text has every word of its error line."""
    root, diaries = kb
    lesson = write_lesson(root, "template:connection refused to <host>",
                          "Connection refused by the payments sandbox", [diaries["types"].id])
    with KnowledgeBase(root) as base:
        document = base.fetch(lesson)
        answer = base.lessons("payments sandbox: connection refused (10.0.0.7:443)")
    assert (document.kind, document.id) == ("lesson", lesson)
    assert document.front_matter["signature"] == "template:connection refused to <host>"
    assert [(f.kind, f.id, f.matched) for f in answer.results] == [("lesson", lesson, ["text"])]


@pytest.mark.parametrize("damage", ["garbage", "other-schema"])
def test_an_index_it_cannot_read_is_left_alone_and_the_folder_answers(kb: KB,
                                                                      damage: str) -> None:
    """A damaged index, or one of another schema version, is not touched: answers come from
    a scan of the folder."""
    root, diaries = kb
    index = root / INDEX_FILE
    for suffix in ("-wal", "-shm"):
        Path(f"{index}{suffix}").unlink(missing_ok=True)
    if damage == "garbage":
        index.write_bytes(b"this is not a database" * 100)
    else:
        with sqlite3.connect(index) as conn:
            conn.execute("PRAGMA user_version = 99")
        conn.close()
    before = index.read_bytes()
    with KnowledgeBase(root) as base:
        assert [f.id for f in base.search("TS2345").results] == [diaries["types"].id]
        assert base.fetch(diaries["parsing"].id).id == diaries["parsing"].id
    assert index.read_bytes() == before


def test_the_readers_public_surface_works_without_the_mcp_sdk() -> None:
    """``otel_diary.readers`` exports the knowledge base and its answers, and imports (as
    does ``otel-diary context``) where the MCP SDK cannot be imported."""
    import otel_diary.readers as readers

    assert sorted(readers.__all__) == ["Document", "Found", "KnowledgeBase", "LessonsAnswer",
                                       "ReadError", "SearchAnswer"]
    code = ("import sys; sys.modules['mcp'] = None\n"
            "import otel_diary.readers, otel_diary.readers.context, otel_diary.cli.context\n"
            "print('mcp' in sys.modules and sys.modules['mcp'] is not None)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


def test_a_lesson_whose_signature_yaml_escapes_is_still_matched(kb: KB) -> None:
    """A test id with non-ASCII text, written escaped in a lesson's front matter, still
    finds that lesson for a failure of that test."""
    root, _ = kb
    folder = root / "diaries" / "lessons"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "menu.md").write_text(
        '---\nid: kl-menu\nsource_type: lesson\n'
        'signature: "test:tests/test_caf\\xE9.py::test_menu"\n---\n\n# Sort the menu first\n',
        encoding="utf-8")
    with KnowledgeBase(root) as base:
        answer = base.lessons("FAILED tests/test_caf\u00e9.py::test_menu - AssertionError")
    assert "test:tests/test_caf\u00e9.py::test_menu" in answer.signatures
    assert [(f.kind, f.id, f.matched) for f in answer.results][:1] == [
        ("lesson", "kl-menu", ["test:tests/test_caf\u00e9.py::test_menu"])]


def test_an_error_without_a_code_finds_its_lesson_by_template(tmp_path: Path) -> None:
    """A pasted Go error (no code, no exception) finds the lesson the pipeline wrote for
    the same error in other files and names, then the diary that met it."""
    pipeline = kb_pipeline(tmp_path)
    diary = write(pipeline, task_record(1, "T-1", stderr=(
        "# shop/api\n./pkg/api/config.go:12:3: undefined: parseConfig")))
    pipeline.close()
    with KnowledgeBase(tmp_path) as base:
        answer = base.lessons("./cmd/server/main.go:88:14: undefined: cfg")
    assert (answer.signatures, answer.template) == ([], "template:<*> undefined: <*>")
    assert [(f.kind, f.matched) for f in answer.results] == [
        ("lesson", ["template:<*> undefined: <*>"]),
        ("diary", ["template:<*> undefined: <*>"])]
    assert answer.results[1].id == diary.id


def test_a_pasted_error_holding_a_secret_finds_the_lesson_of_the_same_error(
        tmp_path: Path) -> None:
    """The diaries' templates are read from their redacted tails: a pasted error is
    redacted first too, so the same error with another token finds their lesson (read
    as it was pasted, the token was masked one way and the marker another)."""
    token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.{}"
    pipeline = kb_pipeline(tmp_path)
    diary = write(pipeline, task_record(1, "T-1", stderr=(
        "curl: (22) The requested URL returned error: 401 Authorization: Bearer "
        + token.format("abcdefghijk"))))
    pipeline.close()
    with KnowledgeBase(tmp_path) as base:
        answer = base.lessons("curl: (22) The requested URL returned error: 401 "
                              "Authorization: Bearer " + token.format("zyxwvutsrqp"))
    assert [(f.kind, f.id) for f in answer.results][1:] == [("diary", diary.id)]
    assert answer.results[0].kind == "lesson" and "eyJ" not in answer.first_line


@pytest.mark.parametrize(("rules", "worked"), [
    ("rules:\n- text: Narrow the optional first\n  votes: 2\n", "Narrow the optional first"),
    ("rules:\n- null\n- text: 42\n- text: Narrow the optional first\n",
     "Narrow the optional first"),
    ("rules: Narrow the optional first\n", ""),
    ("", ""),
])
def test_a_lesson_answers_with_its_first_rule_as_the_lessons_command_reads_it(
        tmp_path: Path, rules: str, worked: str) -> None:
    """A lesson's ``learned`` is the first rule ``otel-diary lessons`` would show (a
    hand-edited file's odd rules are passed over), and its snippet is never front matter."""
    folder = tmp_path / "diaries" / "lessons"
    folder.mkdir(parents=True)
    (folder / "code-TS2345.md").write_text(
        f"---\nid: kl-odd\nsource_type: lesson\nsignature: code:TS2345\n{rules}"
        "evidence:\n- zanzibar\n---\n\n# Lesson: code:TS2345\n\nMet in 2 run(s).\n",
        encoding="utf-8")
    with KnowledgeBase(tmp_path) as base:
        found = base.lessons(NEW_TS_ERROR).results[0]
        in_front_matter_only = base.search("zanzibar").results
    assert (found.id, found.learned) == ("kl-odd", worked)
    assert [(f.id, f.snippet) for f in in_front_matter_only] == [
        ("kl-odd", "# Lesson: code:TS2345 Met in 2 run(s).")]
