"""`otel-diary store import` / `migrate`, and the readers (search, show, lessons, context,
the MCP server's knowledge base) on a PostgreSQL store, answering as they do on the folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_diary import ORCHESTRATOR, ChildSummary, Diary, Settings
from otel_diary.cli import main
from otel_diary.index.documents import Entry, entry_from_document, entry_from_parts
from otel_diary.index.lessons import MAX_EVIDENCE, Sighting, lesson_from_document, sighting
from otel_diary.index.pgschema import SCHEMA, SCHEMA_VERSION
from otel_diary.index.postgres import PostgresStore
from otel_diary.readers.knowledge import KnowledgeBase
from otel_diary.readers.shared import StoreKnowledgeBase
from otel_diary.testing import InMemorySink
from otel_diary.wiring import build_pipeline
from tests.support.kb import PY_STDERR, TS_STDERR, plant_unreadable, task_record, write
from tests.support.postgres import PostgresCluster


def folder_kb(root: Path) -> dict[str, Diary]:
    """Four diaries (two meeting TS2345, one a ValueError) with their index and lessons."""
    pipeline = build_pipeline(Settings(enabled=True, dir=root), ORCHESTRATOR)
    diaries = {
        "plain": write(pipeline, task_record(1, "T-1", title="Add pagination to orders")),
        "ts1": write(pipeline, task_record(2, "T-2", stderr=TS_STDERR, title="Tighten types")),
        "py": write(pipeline, task_record(3, "T-3", stderr=PY_STDERR, agent="reviewer",
                                          title="Harden the parser")),
        "ts2": write(pipeline, task_record(4, "T-4", stderr=TS_STDERR, title="Types again")),
    }
    pipeline.close()
    return diaries


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_import_copies_a_folder_once_and_readers_answer_alike(
        postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`store import` copies every diary and grows the same lessons; run again it adds
    nothing; search, show and lessons with --store list what they list with --dir."""
    root = tmp_path / "kb"
    diaries = folder_kb(root)
    code, out, _ = run(capsys, "store", "import", "--dir", str(root), "--store", postgres_url)
    assert code == 0
    assert "imported 4 diaries" in out
    code, out, _ = run(capsys, "store", "import", "--dir", str(root), "--store", postgres_url)
    assert code == 0 and "imported 0 diaries" in out and "4 already there" in out
    with PostgresStore(postgres_url) as store:
        assert store.count() == 4
        assert store.lesson("code:TS2345").runs == 2

    def listed(*argv: str) -> dict[str, Any]:
        code, out, _ = run(capsys, *argv, "--json")
        assert code in (0, 1)
        return dict(json.loads(out))

    for query in ("pagination", "types", "TS2345", "", "parser hardened quickly"):
        on_folder = listed("search", query, "--dir", str(root))
        on_store = listed("search", query, "--store", postgres_url)
        assert [hit["id"] for hit in on_store["results"]] == \
            [hit["id"] for hit in on_folder["results"]]
        assert [(hit["id"], hit["matched"]) for hit in on_store["lessons"]] == \
            [(hit["id"], hit["matched"]) for hit in on_folder["lessons"]]
    # Words no lesson has: the lesson gathering the diary found is listed, naming it.
    assert on_folder["match"] == "any" and on_folder["results"][0]["id"] == diaries["py"].id
    assert on_folder["lessons"][0]["matched"] == [diaries["py"].id]
    rule = lesson_from_document((root / "diaries" / "lessons" / "code-TS2345.md").read_text(
        encoding="utf-8")).rules[0].text
    for where in ("--dir", str(root)), ("--store", postgres_url):  # its most voted rule
        assert [hit["worked"] for hit in listed("search", "TS2345", *where)["lessons"]] == [rule]
    trace = diaries["ts1"].trace_id
    shown = listed("show", "--trace", trace, "--store", postgres_url)
    assert [d["id"] for d in shown["diaries"]] == [diaries["ts1"].id]
    code, out, _ = run(capsys, "show", "--id", diaries["py"].id, "--store", postgres_url)
    assert code == 0 and out == diaries["py"].content
    lesson = listed("search", "TS2345", "--store", postgres_url)["lessons"][0]["id"]
    code, out, _ = run(capsys, "show", "--id", lesson, "--store", postgres_url)
    assert (code, out) == run(capsys, "show", "--id", lesson, "--dir", str(root))[:2]
    assert code == 0 and "source_type: lesson" in out
    on_folder = listed("lessons", "--dir", str(root))
    on_store = listed("lessons", "--store", postgres_url)
    assert [(item["signature"], item["runs"]) for item in on_store["lessons"]] == \
        [(item["signature"], item["runs"])
         for item in on_folder["lessons"]]
    code, out, _ = run(capsys, "lessons", "--signature", "code:TS2345", "--store", postgres_url)
    assert code == 0 and "Met in 2 run(s)" in out


def test_import_names_each_file_it_cannot_read_and_counts_it_refused(
        postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Files in the diary folder that are no diary are each named on stderr with the
    reason and counted as refused; a second copy of a diary counts as already there."""
    root = tmp_path / "kb"
    diaries = folder_kb(root)
    planted = plant_unreadable(root, diaries["ts1"])
    code, out, err = run(capsys, "store", "import", "--dir", str(root), "--store", postgres_url)
    assert code == 0
    assert "imported 4 diaries" in out and "(1 already there, 4 refused)" in out
    told = dict(line.removeprefix("otel-diary store: skipped ").split(": ", 1)
                for line in err.splitlines() if line.startswith("otel-diary store: skipped "))
    del planted["diaries/agents/coder/copy.md"]
    assert sorted(told) == sorted(planted)
    for path, why in planted.items():
        assert told[path].startswith(why), (path, told[path])


def test_the_knowledge_base_answers_alike_on_both(
        postgres_url: str, tmp_path: Path) -> None:
    """The MCP server's and context's knowledge base gives the same search, lessons and
    fetch answers on the store as on the folder it was imported from."""
    root = tmp_path / "kb"
    diaries = folder_kb(root)
    assert main(["store", "import", "--dir", str(root), "--store", postgres_url]) == 0
    with KnowledgeBase(root) as on_folder, StoreKnowledgeBase(
            PostgresStore(postgres_url, migrate=False)) as on_store:
        for query in ("types", "parser", "parser hardened quickly"):
            assert [(f.id, f.matched) for f in on_store.search(query).results] == \
                [(f.id, f.matched) for f in on_folder.search(query).results]
        assert [f.kind for f in on_store.search("parser hardened quickly").results][:1] \
            == ["lesson"]
        # A lesson answers with its most voted rule, and a snippet of its markdown.
        rule = on_folder.fetch("diaries/lessons/code-TS2345.md").front_matter["rules"][0]
        for kb in (on_folder, on_store):
            found = kb.search("tighten types").results[0]
            assert found.kind == "lesson" and found.learned == rule["text"]
            assert "**tighten**" in found.snippet.lower()
            assert not any(key in found.snippet for key in ("created:", "path:", "evidence:"))
        asked = "src/x.ts(1,2): error TS2345: Argument of type 'x' is not assignable"
        store_answer = on_store.lessons(asked)
        folder_answer = on_folder.lessons(asked)
        assert [f.id for f in store_answer.results] == [f.id for f in folder_answer.results]
        assert store_answer.results[0].kind == "lesson"
        words = "Build log\nerror: Argument of type is not assignable"  # no code: by words
        assert [(f.id, f.matched) for f in on_store.lessons(words).results] == \
            [(f.id, f.matched) for f in on_folder.lessons(words).results]
        assert on_store.lessons(words).results[0].kind == "lesson"
        assert on_store.fetch(diaries["ts2"].id).content == diaries["ts2"].content
        lesson = store_answer.results[0].id
        assert on_store.fetch(lesson).front_matter["runs"] == 2


def test_the_environment_names_the_store(
        postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_DIARY_STORE_URL is the readers' default; `store migrate` reports the version."""
    monkeypatch.setenv("OTEL_DIARY_STORE_URL", postgres_url)
    code, out, _ = run(capsys, "store", "migrate")
    assert code == 0 and f"schema version {SCHEMA_VERSION} (was 0)" in out
    code, out, _ = run(capsys, "store", "migrate")
    assert code == 0 and "(current)" in out
    code, _, err = run(capsys, "search", "anything")
    assert code == 1
    (tmp_path / "error.txt").write_text("error TS2345: Argument of type 'x'\n")
    code, _, err = run(capsys, "context", "--error-file", str(tmp_path / "error.txt"))
    assert (code, err) == (0, "")


def test_a_wrong_password_is_a_clear_error_naming_the_host(
        postgres_cluster: PostgresCluster, capsys: pytest.CaptureFixture[str]) -> None:
    """A reader given a URL with a wrong password exits 2 saying the password failed, at
    which host, and shows no password."""
    wrong = "N0t-The-Pa55word"
    url = postgres_cluster.url("postgres", password=wrong)
    code, _, err = run(capsys, "search", "x", "--store", url)
    assert code == 2
    assert f"127.0.0.1:{postgres_cluster.port}" in err
    assert "password authentication failed" in err
    assert wrong not in err and postgres_cluster.password not in err


def test_two_folders_with_a_path_in_common_are_both_imported(
        postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two replicas' folders each hold a run of one task on one day at the same path:
    importing both keeps both runs, and their lesson counts both."""
    roots = [tmp_path / "a", tmp_path / "b"]
    for n, root in enumerate(roots, 1):
        pipeline = build_pipeline(Settings(enabled=True, dir=root), ORCHESTRATOR)
        write(pipeline, task_record(n, "T-1", stderr=TS_STDERR))
        pipeline.close()
    [path_a] = [p.relative_to(roots[0]) for p in (roots[0] / "diaries" / "agents").rglob("*.md")]
    [path_b] = [p.relative_to(roots[1]) for p in (roots[1] / "diaries" / "agents").rglob("*.md")]
    assert path_a == path_b
    for root in roots:
        code, out, _ = run(capsys, "store", "import", "--dir", str(root), "--store", postgres_url)
        assert code == 0 and "imported 1 diaries" in out
    with PostgresStore(postgres_url) as store:
        assert store.count() == 2
        assert store.lesson("code:TS2345").runs == 2


def test_an_interrupted_import_counts_every_run_when_run_again(
        postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An import stopped after keeping diaries but before growing their lessons: run again,
    it keeps nothing twice and the lessons count every run, once."""
    root = tmp_path / "kb"
    folder_kb(root)
    with PostgresStore(postgres_url) as store:  # what the first import kept before it stopped
        store.add_diaries([(entry_from_document(str(path.relative_to(root)), path.read_text()),
                            path.read_text())
                           for path in sorted((root / "diaries" / "agents").rglob("*.md"))[:3]])
        assert store.lesson("code:TS2345").runs == 0
    code, out, _ = run(capsys, "store", "import", "--dir", str(root), "--store", postgres_url)
    assert code == 0 and "imported 1 diaries" in out and "3 already there" in out
    code, out, _ = run(capsys, "store", "import", "--dir", str(root), "--store", postgres_url)
    assert code == 0 and "imported 0 diaries" in out
    with PostgresStore(postgres_url) as store:
        assert store.count() == 4
        assert store.lesson("code:TS2345").runs == 2
        assert store.lesson("exception:ValueError").runs == 1


def test_a_run_is_counted_once_however_late_it_comes_again(postgres_url: str) -> None:
    """A run delivered again after more runs than a lesson lists as evidence is still
    counted once (the store remembers every run it counted)."""
    diaries = [build_sighting(n) for n in range(MAX_EVIDENCE + 2)]
    with PostgresStore(postgres_url) as store:
        for signature, seen in diaries:
            store.add_lesson(signature, seen)
        assert diaries[0][1].id not in store.lesson("code:TS2345").evidence
        store.add_lesson(*diaries[0])  # out of the evidence list by now
        assert store.lesson("code:TS2345").runs == MAX_EVIDENCE + 2


def build_sighting(n: int) -> tuple[str, Sighting]:
    return "code:TS2345", Sighting(id=f"kh-{n:020d}", path=f"diaries/agents/a/{n}.md",
                                   title="t", agent="a", created=f"2026-01-01T00:{n:04d}",
                                   recovered=True, error_line="error TS2345", recovery="",
                                   learned="")


def test_a_version_1_store_migrates_and_keeps_counting_each_run_once(
        postgres_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A store of schema version 1 (no table of counted runs) is migrated by `store migrate`,
    which takes the runs its lessons list: one of them delivered again is not counted again."""
    import psycopg

    runs = MAX_EVIDENCE + 50  # more than a lesson lists as evidence
    diaries = [render_diary(n) for n in range(runs)]
    with PostgresStore(postgres_url) as store:
        store.add_diaries([(entry, content) for entry, content, _ in diaries])
        for _, _, found in diaries:
            store.add_lesson(*found)
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # back to version 1
        conn.execute(f"DROP TABLE {SCHEMA}.lesson_runs")
        conn.execute(f"DROP TEXT SEARCH CONFIGURATION {SCHEMA}.words")
        conn.execute(f"DROP TEXT SEARCH DICTIONARY {SCHEMA}.english_stem")
        conn.execute(f"UPDATE {SCHEMA}.meta SET value = '1' WHERE key = 'schema_version'")
    code, out, _ = run(capsys, "store", "migrate", "--store", postgres_url)
    assert code == 0 and f"schema version {SCHEMA_VERSION} (was 1)" in out
    with PostgresStore(postgres_url) as store:
        for _, _, found in diaries:  # every run again, the oldest out of the evidence list
            store.add_lesson(*found)
        extra = render_diary(runs)
        store.add_diary(*extra[:2])
        store.add_lesson(*extra[2])
        assert store.lesson("code:TS2345").runs == runs + 1


def render_diary(n: int) -> tuple[Entry, str, tuple[str, Sighting]]:
    """Run ``n`` meeting TS2345, as delivery keeps it: its entry, its text, its sighting."""
    diary = build_pipeline(Settings(enabled=True, index=False), ORCHESTRATOR,
                           sinks=[InMemorySink()]).handle(
        (task_record(n, f"T-{n}", stderr=TS_STDERR), ChildSummary()))
    assert diary is not None
    found = sighting(diary.alternate_path, diary.front_matter, diary.content)
    assert found is not None
    return (entry_from_parts(diary.alternate_path, diary.front_matter, diary.content),
            diary.content, found)
