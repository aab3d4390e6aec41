"""`otel-diary search`, `show` and `reindex` on a small knowledge base written by the pipeline."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_diary import ORCHESTRATOR, Diary, TaskRun
from otel_diary.cli import main
from otel_diary.index.store import INDEX_FILE
from otel_diary.settings import Settings
from otel_diary.text import parse_since
from otel_diary.wiring import build_pipeline
from tests.support.kb import PY_STDERR, TS_STDERR, plant_unreadable, task_record, write

NOTES = {
    "T-101": "Cursor pagination beats offsets on large tables.",
    "T-102": "Narrow optional strings before passing them to typed helpers.",
    "T-201": "Parse integers defensively from user input.",
}


class Notes:
    """A reflector with a fixed insight per task, so tests can search for its words."""

    def reflect(self, run: TaskRun) -> str:
        return NOTES.get(run.task_id, "Nothing special happened.")


@pytest.fixture(scope="module")
def kb_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Diary]]:
    root = tmp_path_factory.mktemp("kb")
    pipeline = build_pipeline(Settings(enabled=True, dir=root), ORCHESTRATOR, reflector=Notes())
    diaries = {
        "pagination": write(pipeline, task_record(1, "T-101", title="Add pagination to orders")),
        "types": write(pipeline, task_record(2, "T-102", stderr=TS_STDERR,
                                             title="Tighten types in orders")),
        "parsing": write(pipeline, task_record(3, "T-201", stderr=PY_STDERR, agent="reviewer",
                                               title="Harden the parser")),
        "late": write(pipeline, task_record(60 * 24 * 3, "T-101", title="Paginate invoices")),
    }
    pipeline.close()
    return root, diaries


@pytest.fixture
def kb(kb_template: tuple[Path, dict[str, Diary]],
       tmp_path: Path) -> tuple[Path, dict[str, Diary]]:
    """A private copy of the knowledge base, free to damage."""
    root, diaries = kb_template
    copy = tmp_path / "kb"
    shutil.copytree(root, copy)
    return copy, diaries


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def search_ids(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> list[str]:
    """The ids ``search --json`` finds; its exit status says whether it found any."""
    code, out, err = cli(capsys, "search", "--dir", str(root), "--json", *argv)
    ids = [hit["id"] for hit in json.loads(out)["results"]]
    assert code == (0 if ids else 1), err
    return ids


def test_search_finds_a_diary_by_a_word_of_its_reflection(
        capsys: pytest.CaptureFixture[str], kb: tuple[Path, dict[str, Diary]]) -> None:
    """A word of "What was learned" (stemmed: "defensive") finds that diary."""
    root, diaries = kb
    assert search_ids(capsys, root, "defensive") == [diaries["parsing"].id]
    code, out, _ = cli(capsys, "search", "--dir", str(root), "narrow")
    assert code == 0
    assert "Tighten types in orders" in out and str(root / diaries["types"].path) in out
    assert "**Narrow**" in out


def test_search_finds_a_diary_by_its_error_code(
        capsys: pytest.CaptureFixture[str], kb: tuple[Path, dict[str, Diary]]) -> None:
    """An error code or exception name from the stderr tail finds the diary that met it."""
    root, diaries = kb
    assert search_ids(capsys, root, "TS2345") == [diaries["types"].id]
    assert search_ids(capsys, root, "ValueError") == [diaries["parsing"].id]


def test_search_lists_the_lesson_of_a_diary_it_finds(
        capsys: pytest.CaptureFixture[str], kb: tuple[Path, dict[str, Diary]]) -> None:
    """A question no lesson has every word of lists the lesson of the diary it finds
    first, saying whose it is (with --json, in "matched"); a filter lists no lesson."""
    root, diaries = kb
    question = "how should optional strings be narrowed quickly"
    code, out, _ = cli(capsys, "search", "--dir", str(root), question)
    assert code == 0
    lesson = out.split("\n\n", 1)[0].splitlines()
    assert lesson[0].split()[1] == "lesson"
    assert lesson[-1] == f"    The lesson of {diaries['types'].id}, listed below"
    heads = [line.split()[:2] for line in out.splitlines() if line.startswith("kh-")]
    assert next(ident for ident, kind in heads if kind != "lesson") == diaries["types"].id
    found = json.loads(cli(capsys, "search", "--dir", str(root), "--json", question)[1])
    assert found["match"] == "any"
    assert found["lessons"][0]["matched"] == [diaries["types"].id]
    assert found["lessons"][0]["file"] == str(root / "diaries/lessons/code-TS2345.md")
    filtered = cli(capsys, "search", "--dir", str(root), "--json", "--agent", "coder", question)
    assert json.loads(filtered[1])["lessons"] == []


@pytest.mark.parametrize(("filters", "expected"), [
    (["--agent", "reviewer"], ["parsing"]),
    (["--outcome", "recovered"], ["parsing", "types"]),
    (["--outcome", "completed"], ["late", "pagination"]),
    (["--task", "T-101"], ["late", "pagination"]),
    (["--since", "2026-07-27"], ["late"]),
    (["--task", "T-101", "--since", "2026-07-27T00:00Z"], ["late"]),
    (["--limit", "1"], ["late"]),
    (["--agent", "nobody"], []),
])
def test_filters_narrow_the_results(capsys: pytest.CaptureFixture[str],
                                    kb: tuple[Path, dict[str, Diary]], filters: list[str],
                                    expected: list[str]) -> None:
    """--agent, --outcome, --task, --since and --limit each narrow an empty query's listing
    (newest first)."""
    root, diaries = kb
    assert search_ids(capsys, root, *filters) == [diaries[name].id for name in expected]


def test_filters_apply_to_word_searches(capsys: pytest.CaptureFixture[str],
                                        kb: tuple[Path, dict[str, Diary]]) -> None:
    """Filters combine with words: "orders" is in two diaries, one of them recovered."""
    root, diaries = kb
    assert set(search_ids(capsys, root, "orders")) == {diaries["pagination"].id,
                                                      diaries["types"].id}
    assert search_ids(capsys, root, "orders", "--outcome", "recovered") == [diaries["types"].id]


def test_search_exits_like_grep(capsys: pytest.CaptureFixture[str],
                                kb: tuple[Path, dict[str, Diary]]) -> None:
    """search exits 0 when diaries match, 1 when none does (text or JSON), as --help says."""
    root, _ = kb
    assert cli(capsys, "search", "--dir", str(root), "TS2345")[0] == 0
    code, out, _ = cli(capsys, "search", "--dir", str(root), "zebra")
    assert (code, out) == (1, "No diaries match.\n")
    code, out, _ = cli(capsys, "search", "--dir", str(root), "--json", "zebra")
    assert code == 1 and json.loads(out)["count"] == 0
    assert cli(capsys, "search", "--dir", str(root), "--json", "--agent", "nobody")[0] == 1
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    assert "1 when none does" in " ".join(capsys.readouterr().out.split())


def test_json_says_how_results_matched(capsys: pytest.CaptureFixture[str],
                                       kb: tuple[Path, dict[str, Diary]]) -> None:
    """"match" is all, any or recent for results found that way, and none with no results."""
    root, _ = kb
    for argv, match in ((["TS2345"], "all"), (["TS2345 zebra"], "any"), ([], "recent"),
                        (["zebra"], "none"), (["zebra quagga"], "none")):
        code, out, _ = cli(capsys, "search", "--dir", str(root), "--json", *argv)
        document = json.loads(out)
        assert (document["match"], code) == (match, 1 if match == "none" else 0), argv
        assert (document["count"] == 0) == (match == "none")


def test_json_output_is_one_valid_document(capsys: pytest.CaptureFixture[str],
                                           kb: tuple[Path, dict[str, Diary]]) -> None:
    """--json prints one JSON document with each hit's id, title, path, outcome, snippet."""
    root, diaries = kb
    code, out, _ = cli(capsys, "search", "--dir", str(root), "--json", "TS2345")
    document = json.loads(out)
    assert code == 0 and document["count"] == 1 and document["match"] == "all"
    [hit] = document["results"]
    types = diaries["types"]
    assert (hit["id"], hit["title"], hit["path"], hit["outcome"]) == (
        types.id, types.title, types.path, "recovered")
    assert "**TS2345**" in hit["snippet"] and hit["file"] == str(root / types.path)
    assert hit["trace_id"] == types.trace_id and hit["score"] > 0


def test_show_by_trace_and_by_id_prints_the_diary(capsys: pytest.CaptureFixture[str],
                                                  kb: tuple[Path, dict[str, Diary]]) -> None:
    """show --trace and show --id print the stored diary of that trace or id."""
    root, diaries = kb
    types = diaries["types"]
    code, out, _ = cli(capsys, "show", "--dir", str(root), "--trace", types.trace_id.upper())
    assert code == 0 and out == (root / types.path).read_text()
    code, out, _ = cli(capsys, "show", "--dir", str(root), "--id", diaries["late"].id)
    assert code == 0 and out == (root / diaries["late"].path).read_text()
    code, out, _ = cli(capsys, "show", "--dir", str(root), "--json", "--trace", types.trace_id)
    [shown] = json.loads(out)["diaries"]
    assert code == 0 and shown["id"] == types.id
    assert shown["front_matter"]["trace_id"] == types.trace_id
    assert shown["body"] == types.body


def test_show_takes_an_id_with_or_without_its_prefix(
        capsys: pytest.CaptureFixture[str], kb: tuple[Path, dict[str, Diary]]) -> None:
    """show --id finds a diary by kh-<hex>, by <hex> alone, and in capitals."""
    root, diaries = kb
    types = diaries["types"]
    expected = (root / types.path).read_text()
    bare = types.id.removeprefix("kh-")
    for ident in (types.id, bare, bare.upper(), f" {types.id} "):
        assert cli(capsys, "show", "--dir", str(root), "--id", ident)[:2] == (0, expected)


def test_show_prints_a_lesson_by_its_id(capsys: pytest.CaptureFixture[str],
                                        kb: tuple[Path, dict[str, Diary]]) -> None:
    """The ids search (and context) list are lessons' too: show --id prints the lesson."""
    root, _ = kb
    [lesson] = json.loads(cli(capsys, "search", "--dir", str(root), "--json",
                              "TS2345")[1])["lessons"]
    code, out, err = cli(capsys, "show", "--dir", str(root), "--id", lesson["id"])
    assert code == 0, err
    assert out == (root / "diaries" / "lessons" / "code-TS2345.md").read_text()
    code, out, _ = cli(capsys, "show", "--dir", str(root), "--json", "--id", lesson["id"])
    [shown] = json.loads(out)["diaries"]
    assert (shown["path"], shown["front_matter"]["source_type"]) == (
        "diaries/lessons/code-TS2345.md", "lesson")


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["--trace", "0" * 32], 1, "no diary for trace"),
    (["--trace", "not-a-trace"], 2, "not a trace id"),
    (["--id", "kh-unknown"], 1, "no diary or lesson for id"),
])
def test_show_explains_what_it_could_not_find(capsys: pytest.CaptureFixture[str],
                                              kb: tuple[Path, dict[str, Diary]],
                                              argv: list[str], code: int, message: str) -> None:
    """Unknown or malformed ids give a one-line message and a non-zero exit code."""
    root, _ = kb
    result, out, err = cli(capsys, "show", "--dir", str(root), *argv)
    assert (result, out) == (code, "") and message in err


QUERIES = [["TS2345"], ["orders"], ["defensive"], ["--outcome", "recovered"], ["ledger orders"],
           ["pagina*"]]


def snapshot(capsys: pytest.CaptureFixture[str], root: Path) -> list[str]:
    outputs = []
    for query in QUERIES:
        code, out, _ = cli(capsys, "search", "--dir", str(root), "--json", *query)
        assert code == (0 if json.loads(out)["count"] else 1)
        outputs.append(out)
    return outputs


def test_reindex_after_deleting_the_database_restores_identical_results(
        capsys: pytest.CaptureFixture[str], kb: tuple[Path, dict[str, Diary]]) -> None:
    """Deleting the database and running reindex gives byte-identical search output."""
    root, _ = kb
    before = snapshot(capsys, root)
    assert any(json.loads(out)["count"] for out in before)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{root / INDEX_FILE}{suffix}").unlink(missing_ok=True)
    code, out, _ = cli(capsys, "reindex", "--dir", str(root))
    assert code == 0 and out.startswith("indexed 4 diaries")
    assert snapshot(capsys, root) == before


def test_reindex_repairs_a_corrupted_database(capsys: pytest.CaptureFixture[str],
                                              kb: tuple[Path, dict[str, Diary]]) -> None:
    """A damaged database makes search say so and name reindex; reindex repairs it."""
    root, _ = kb
    before = snapshot(capsys, root)
    with (root / INDEX_FILE).open("r+b") as handle:
        handle.write(b"\x00garbage" * 64)
    code, out, err = cli(capsys, "search", "--dir", str(root), "TS2345")
    assert code == 2 and out == "" and "otel-diary reindex" in err
    code, out, _ = cli(capsys, "reindex", "--dir", str(root), "--json")
    assert code == 0 and json.loads(out)["indexed"] == 4
    assert snapshot(capsys, root) == before


def test_reindex_names_each_file_it_skips_and_why(
        capsys: pytest.CaptureFixture[str], kb: tuple[Path, dict[str, Diary]]) -> None:
    """Files in the diary folder that are no diary (too large, broken or bombing YAML, no
    front matter, a second copy) are each named on stderr with the reason; the rest is
    indexed as before."""
    root, diaries = kb
    planted = plant_unreadable(root, diaries["types"])
    code, out, err = cli(capsys, "reindex", "--dir", str(root))
    assert code == 0 and out.startswith("indexed 4 diaries") and "(5 other file(s) skipped)" in out
    told = dict(line.removeprefix("otel-diary reindex: skipped ").split(": ", 1)
                for line in err.splitlines())
    assert sorted(told) == sorted(planted)
    for path, why in planted.items():
        assert told[path].startswith(why), (path, told[path])
    assert "diaries/agents/coder/" in told["diaries/agents/coder/copy.md"]


@pytest.mark.parametrize("query", ['"', "NEAR(", "a NEAR/2 b", "*", "(((", '"unbalanced', "AND",
                                   "OR NOT", "title:x", "^start", "-", "+", "TS2345)", "{}"])
def test_search_syntax_characters_never_raise(capsys: pytest.CaptureFixture[str],
                                              kb: tuple[Path, dict[str, Diary]],
                                              query: str) -> None:
    """Queries made of FTS5 syntax return results (exit 0), none (exit 1) or a one-line
    message (exit 2)."""
    root, _ = kb
    code, out, err = cli(capsys, "search", "--dir", str(root), "--", query)
    assert ((code == 0 and "kh-" in out) or (code == 1 and out == "No diaries match.\n")
            or (code == 2 and err.startswith("otel-diary search:")))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=40), raw=st.booleans())
def test_any_query_on_the_command_line_returns_results_or_a_message(
        capsys: pytest.CaptureFixture[str], kb_template: tuple[Path, dict[str, Diary]],
        query: str, raw: bool) -> None:
    """For arbitrary query text, with or without --fts, search exits 0 with results, 1 with
    none or 2 with a message: never a traceback. "match" and "count" agree."""
    root, _ = kb_template
    argv = ["search", "--dir", str(root), "--json"] + (["--fts"] if raw else []) + ["--", query]
    code, out, err = cli(capsys, *argv)
    if code in (0, 1):
        document = json.loads(out)
        assert document["count"] == len(document["results"])
        assert (code == 1) == (document["count"] == 0) == (document["match"] == "none")
    else:
        assert code == 2 and err.startswith("otel-diary search:") and "Traceback" not in err


def test_bad_fts_syntax_gives_a_clear_message(capsys: pytest.CaptureFixture[str],
                                              kb: tuple[Path, dict[str, Diary]]) -> None:
    """With --fts the query is FTS5 syntax: valid ones work, broken ones are explained."""
    root, diaries = kb
    assert set(search_ids(capsys, root, "--fts", "TS2345 OR defensive")) == {
        diaries["parsing"].id, diaries["types"].id}
    code, out, err = cli(capsys, "search", "--dir", str(root), "--fts", "--", "NEAR(")
    assert (code, out) == (2, "") and "invalid FTS5 query" in err



SECRET = "gsk_" + "Zq7xW2mK9pL4vN8rT3yB6cH1jD5fG0sQaE" * 2
"""A key as a pasted error or a query may hold it."""


def test_a_secret_in_the_query_is_not_echoed(capsys: pytest.CaptureFixture[str],
                                             kb: tuple[Path, dict[str, Diary]]) -> None:
    """What search prints back of a query (its JSON's "query", a broken FTS5 query's
    message) is redacted as a diary is: its output goes to agents and their logs."""
    root, _ = kb
    code, out, _ = cli(capsys, "search", "--dir", str(root), "--json", f"TS2345 {SECRET}")
    assert code == 0 and SECRET not in out
    assert json.loads(out)["query"] == "TS2345 [REDACTED:groq_api_key]"
    code, out, err = cli(capsys, "search", "--dir", str(root), "--fts", "--",
                         f"password={SECRET[:20]} NEAR(")
    assert code == 2 and "invalid FTS5 query" in err and SECRET[:20] not in out + err
    code, _, err = cli(capsys, "lessons", "--dir", str(root), "--signature", SECRET)
    assert code == 1 and "no lessons for [REDACTED:groq_api_key]" in err

@pytest.mark.parametrize(("text", "expected"), [
    ("2026-11-30", "2026-11-30T00:00:00.000Z"),
    ("2026-11-30T12:30:00Z", "2026-11-30T12:30:00.000Z"),
    ("2026-11-30T12:30:00+02:00", "2026-11-30T10:30:00.000Z"),
    ("7d", "2026-11-23T00:00:00.000Z"),
    ("12h", "2026-11-29T12:00:00.000Z"),
    ("2w", "2026-11-16T00:00:00.000Z"),
    ("999999w", "0001-01-01T00:00:00.000Z"),  # before the year 1: every diary
])
def test_since_accepts_dates_times_and_ages(text: str, expected: str) -> None:
    """--since takes a date, a time with or without offset, or an age before now."""
    now = datetime(2026, 11, 30, tzinfo=timezone.utc)
    assert parse_since(text, now) == expected


def test_bad_since_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An unreadable --since stops with argparse's usage message naming the forms accepted."""
    with pytest.raises(SystemExit) as stopped:
        main(["search", "--dir", str(tmp_path), "--since", "yesterday"])
    assert stopped.value.code == 2
    assert "age (30m, 12h, 7d, 2w)" in capsys.readouterr().err


@pytest.mark.parametrize("since", ["0001-01-01T00:00+01:00", "9999-12-31T23:00-02:00"])
def test_since_out_of_range_is_a_usage_error(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, since: str) -> None:
    """A time that is no UTC time (before the year 1 or after 9999 once converted) stops
    with a usage error, not a traceback."""
    with pytest.raises(SystemExit) as stopped:
        main(["search", "--dir", str(tmp_path), "--since", since])
    assert stopped.value.code == 2
    assert "out of range" in capsys.readouterr().err


def test_search_without_a_knowledge_base_creates_nothing(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Searching a root that holds no diaries says so, finds nothing (exit 1), writes no file."""
    root = tmp_path / "empty"
    code, out, err = cli(capsys, "search", "--dir", str(root), "anything")
    assert (code, out) == (1, "") and "no diaries under" in err
    code, out, _ = cli(capsys, "search", "--dir", str(root), "--json", "anything")
    document = json.loads(out)
    assert code == 1 and document["results"] == [] and document["match"] == "none"
    assert not root.exists()


def test_index_is_current_after_each_diary(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    """Each diary the pipeline writes is searchable at once, without a reindex."""
    pipeline = build_pipeline(Settings(enabled=True, dir=tmp_path), ORCHESTRATOR)
    first = write(pipeline, task_record(1, "T-1", title="Rotate the signing keys"))
    assert search_ids(capsys, tmp_path, "signing") == [first.id]
    second = write(pipeline, task_record(2, "T-2", title="Rotate the session keys"))
    assert search_ids(capsys, tmp_path, "session") == [second.id]
    pipeline.close()
