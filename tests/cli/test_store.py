"""`otel-diary store import` / `migrate`, and the readers (search, show, lessons, context,
the MCP server's knowledge base) on a PostgreSQL store, answering as they do on the folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_diary import ORCHESTRATOR, Diary, Settings
from otel_diary.cli import main
from otel_diary.index.postgres import PostgresStore
from otel_diary.readers.knowledge import KnowledgeBase
from otel_diary.readers.shared import open_knowledge_base
from otel_diary.wiring import build_pipeline
from tests.support.kb import PY_STDERR, TS_STDERR, task_record, write
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

    for query in ("pagination", "types", "TS2345", ""):
        on_folder = listed("search", query, "--dir", str(root))
        on_store = listed("search", query, "--store", postgres_url)
        assert [hit["id"] for hit in on_store["results"]] == \
            [hit["id"] for hit in on_folder["results"]]
        assert [hit["id"] for hit in on_store["lessons"]] == \
            [hit["id"] for hit in on_folder["lessons"]]
    trace = diaries["ts1"].trace_id
    shown = listed("show", "--trace", trace, "--store", postgres_url)
    assert [d["id"] for d in shown["diaries"]] == [diaries["ts1"].id]
    code, out, _ = run(capsys, "show", "--id", diaries["py"].id, "--store", postgres_url)
    assert code == 0 and out == diaries["py"].content
    on_folder = listed("lessons", "--dir", str(root))
    on_store = listed("lessons", "--store", postgres_url)
    assert [(item["signature"], item["runs"]) for item in on_store["lessons"]] == \
        [(item["signature"], item["runs"])
         for item in on_folder["lessons"]]
    code, out, _ = run(capsys, "lessons", "--signature", "code:TS2345", "--store", postgres_url)
    assert code == 0 and "Met in 2 run(s)" in out


def test_the_knowledge_base_answers_alike_on_both(
        postgres_url: str, tmp_path: Path) -> None:
    """The MCP server's and context's knowledge base gives the same search, lessons and
    fetch answers on the store as on the folder it was imported from."""
    root = tmp_path / "kb"
    diaries = folder_kb(root)
    assert main(["store", "import", "--dir", str(root), "--store", postgres_url]) == 0
    with KnowledgeBase(root) as on_folder, open_knowledge_base(root, postgres_url) as on_store:
        for query in ("types", "parser"):
            assert [f.id for f in on_store.search(query).results] == \
                [f.id for f in on_folder.search(query).results]
        asked = "src/x.ts(1,2): error TS2345: Argument of type 'x' is not assignable"
        store_answer = on_store.lessons(asked)
        folder_answer = on_folder.lessons(asked)
        assert [f.id for f in store_answer.results] == [f.id for f in folder_answer.results]
        assert store_answer.results[0].kind == "lesson"
        assert on_store.fetch(diaries["ts2"].id).content == diaries["ts2"].content
        lesson = store_answer.results[0].id
        assert on_store.fetch(lesson).front_matter["runs"] == 2


def test_the_environment_names_the_store(
        postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_DIARY_STORE_URL is the readers' default; `store migrate` reports the version."""
    monkeypatch.setenv("OTEL_DIARY_STORE_URL", postgres_url)
    code, out, _ = run(capsys, "store", "migrate")
    assert code == 0 and "schema version 1 (was 0)" in out
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
