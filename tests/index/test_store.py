"""The local index: error signatures, related diaries, rebuilding, concurrency, bad queries."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

from otel_diary import DiarySpanProcessor
from otel_diary.errors import IndexUnavailable, SearchError
from otel_diary.index.documents import (
    Entry,
    entry_from_diary,
    entry_from_document,
    error_signatures,
    scan_entries,
    sections,
)
from otel_diary.index.lessons import lesson_id
from otel_diary.index.query import fts_terms
from otel_diary.index.schema import SCHEMA_VERSION
from otel_diary.index.store import INDEX_FILE, DiaryIndex
from otel_diary.pipeline.reflect import StubReflector
from otel_diary.pipeline.render import parse_front_matter, render
from tests.pipeline.test_render import RECOVERED
from tests.support.forking import in_forked_child, needs_fork
from tests.support.kb import PY_STDERR, TS_STDERR, kb_pipeline, task_record, write


@pytest.mark.parametrize(("text", "expected"), [
    (TS_STDERR, {"code:TS2345"}),
    ("error[E0308]: mismatched types", {"code:E0308"}),
    ("Program.cs(3,5): error CS0103: The name 'x' does not exist", {"code:CS0103"}),
    ("Exception in thread \"main\" java.lang.NullPointerException\n\tat App.main",
     {"exception:NullPointerException"}),
    (PY_STDERR, {"exception:ValueError", "test:tests/test_parse.py::test_numbers"}),
    ("FAIL: test_totals (billing.tests.TestInvoice)", {"test:test_totals"}),
    ("--- FAIL: TestParseOrder (0.00s)", {"test:TestParseOrder"}),
    ("FAIL src/orders/api.test.ts", {"test:src/orders/api.test.ts"}),
])
def test_error_signatures_name_codes_exceptions_and_tests(text: str,
                                                          expected: set[str]) -> None:
    """Compiler codes, exception class names and failing test names become signatures."""
    assert set(error_signatures(text)) == expected


def test_error_signatures_ignore_plain_error_words() -> None:
    """Generic words ("Error", "ERROR: relation") and lowercase codes are not signatures."""
    text = ("Error: build failed\nERROR: relation \"invoices\" does not exist\n"
            "error: exit status 2 at line 1234, ts2345 in lower case")
    assert error_signatures(text) == ()


def test_sections_ignore_headings_inside_fences() -> None:
    """A `## ` line inside a fenced stderr tail does not start a new section."""
    body = "# T\n\n## Error encountered\nbad\n```text\n## not a heading\n```\n\n## Related\n- x\n"
    found = sections(body)
    assert list(found) == ["Error encountered", "Related"]
    assert "## not a heading" in found["Error encountered"]


def test_recovered_run_relates_to_earlier_diary_with_the_same_error_code(
        tmp_path: Path) -> None:
    """In-process, a recovered TS2345 run lists the earlier TS2345 diary in Related, and not
    an unrelated earlier diary."""
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, dir=tmp_path)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("tests")
    for task_id, stderr in (("T-1", TS_STDERR), ("T-2", PY_STDERR), ("T-3", "tsc\n" + TS_STDERR)):
        with tracer.start_as_current_span("task", attributes={
                "orchestrator.task.id": task_id, "orchestrator.agent.name": "coder",
                "orchestrator.build_verify.attempts": 2,
                "orchestrator.build_verify.stderr_tail": stderr}):
            pass
    assert processor.force_flush(10_000)
    provider.shutdown()
    fronts = {front["task"]: front for front in (
        parse_front_matter(path.read_text())
        for path in (tmp_path / "diaries" / "agents").rglob("*.md"))}
    lesson = lesson_id("code:TS2345")
    assert fronts["T-3"]["related"] == [lesson, fronts["T-1"]["id"]]
    third = next(tmp_path.rglob("*T-3.md")).read_text()
    assert f"## Related\n- {lesson}\n- {fronts['T-1']['id']}\n" in third
    assert fronts["T-2"]["id"] not in third
    assert processor.stats.index_errors == 0


def test_related_prefers_shared_errors_then_newest_and_stops_at_five(tmp_path: Path) -> None:
    """Same task, same trigger or shared signature: at most five, the error's lesson first,
    then shared errors, then newest; diaries created after the run are not listed."""
    pipeline = kb_pipeline(tmp_path)
    same_task = [write(pipeline, task_record(n, "T-9")) for n in range(1, 7)]
    shared_error = write(pipeline, task_record(7, "T-8", stderr=TS_STDERR))
    same_trigger = write(pipeline, task_record(8, "T-7", trigger="ci-red"))
    later = write(pipeline, task_record(30, "T-9"))
    run = write(pipeline, task_record(20, "T-9", stderr=TS_STDERR, trigger="ci-red"))
    assert list(run.related) == [lesson_id("code:TS2345"), shared_error.id] + [
        d.id for d in same_task[::-1][:3]]
    assert later.id not in run.related and same_trigger.id not in run.related


def test_span_named_related_ids_are_kept_beside_found_ones(tmp_path: Path) -> None:
    """Ids the span names in orchestrator.related stay first, beside up to five found ones."""
    pipeline = kb_pipeline(tmp_path)
    found = [write(pipeline, task_record(n, "T-5")) for n in range(1, 7)]
    run = write(pipeline, task_record(10, "T-5", extra={"orchestrator.related": ["kh-manual"]}))
    assert list(run.related) == ["kh-manual"] + [d.id for d in found[::-1][:5]]


def test_a_redelivered_diary_does_not_relate_to_itself(tmp_path: Path) -> None:
    """Writing the same task span twice keeps one entry and never lists the diary itself."""
    pipeline = kb_pipeline(tmp_path)
    first = write(pipeline, task_record(1, "T-1", stderr=TS_STDERR))
    again = write(pipeline, task_record(1, "T-1", stderr=TS_STDERR))
    assert first.id == again.id and again.related == ()
    with DiaryIndex(tmp_path) as index:
        assert index.count() == 1


def test_the_index_kept_by_the_pipeline_ranks_exactly_as_a_rebuilt_one(tmp_path: Path) -> None:
    """Diaries indexed one by one, a redelivery included, rank and score as after a rebuild."""
    pipeline = kb_pipeline(tmp_path)
    for n in range(5):
        write(pipeline, task_record(n, f"T-{n}", stderr=TS_STDERR if n % 2 else PY_STDERR))
    write(pipeline, task_record(1, "T-1", stderr=TS_STDERR))
    pipeline.close()
    queries = ("TS2345", "ValueError", "paid model", "task")
    with DiaryIndex(tmp_path) as index:
        before = [index.search(query).hits for query in queries]
        assert index.rebuild().indexed == 5
        assert [index.search(query).hits for query in queries] == before
    assert [len(hits) for hits in before] == [2, 3, 5, 5]


def test_missing_database_is_built_from_the_folder_on_first_use(tmp_path: Path) -> None:
    """Diaries written with the index off are found once an index is opened."""
    pipeline = kb_pipeline(tmp_path, index=False)
    diary = write(pipeline, task_record(1, "T-1", stderr=TS_STDERR))
    assert not (tmp_path / INDEX_FILE).exists()
    with DiaryIndex(tmp_path) as index:
        assert [hit.id for hit in index.search("TS2345").hits] == [diary.id]


def test_index_can_be_switched_off_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    """OTEL_DIARY_INDEX=0 writes diaries without an index; the default keeps one."""
    monkeypatch.setenv("OTEL_DIARY_INDEX", "0")
    write(kb_pipeline(tmp_path / "off"), task_record(1, "T-1"))
    monkeypatch.delenv("OTEL_DIARY_INDEX")
    write(kb_pipeline(tmp_path / "on"), task_record(1, "T-1"))
    assert not (tmp_path / "off" / INDEX_FILE).exists()
    assert (tmp_path / "on" / INDEX_FILE).is_file()


def test_database_deleted_while_open_is_reopened(tmp_path: Path) -> None:
    """A writer whose database file was deleted and rebuilt writes to the new file."""
    pipeline = kb_pipeline(tmp_path)
    write(pipeline, task_record(1, "T-1"))
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp_path / INDEX_FILE}{suffix}").unlink(missing_ok=True)
    with DiaryIndex(tmp_path) as reader:
        assert reader.rebuild().indexed == 1
        later = write(pipeline, task_record(2, "T-2", title="Quarterly ledger export"))
        assert [hit.id for hit in reader.search("ledger").hits] == [later.id]
    pipeline.close()


def test_corrupted_database_is_reported_then_repaired_by_rebuild(tmp_path: Path) -> None:
    """A damaged database gives a clear IndexUnavailable naming reindex; rebuild fixes it."""
    diary = write(kb_pipeline(tmp_path, index=False), task_record(1, "T-1", stderr=TS_STDERR))
    (tmp_path / INDEX_FILE).write_bytes(b"this is not a database" * 100)
    with DiaryIndex(tmp_path) as index:
        with pytest.raises(IndexUnavailable, match="reindex"):
            index.search("TS2345")
    with DiaryIndex(tmp_path) as index:
        assert index.rebuild().indexed == 1
        assert [hit.id for hit in index.search("TS2345").hits] == [diary.id]


def test_a_rebuild_waiting_too_long_for_another_writer_fails_and_deletes_nothing(
        tmp_path: Path) -> None:
    """An index locked by another writer past the busy timeout, or by this thread's own
    held transaction, is not damaged: the rebuild says so, and the held work stays."""
    diary = write(kb_pipeline(tmp_path, index=False), task_record(1, "T-1", stderr=TS_STDERR))
    with DiaryIndex(tmp_path) as other, DiaryIndex(tmp_path, busy_timeout_s=0.1) as index:
        assert index.rebuild().indexed == 1
        other.hold()
        other.add(replace(scan_entries(tmp_path, other.folder)[0][0], id="kh-held",
                          path="diaries/held.md"))
        with pytest.raises(IndexUnavailable, match="another connection is writing"):
            index.rebuild()
        with pytest.raises(IndexUnavailable, match="within a transaction"):
            other.rebuild()  # on the thread holding the transaction
        other.release()
        assert sorted(hit.id for hit in index.search("TS2345").hits) == sorted(
            [diary.id, "kh-held"])


def test_a_rebuild_keeps_a_diary_an_app_wrote_while_it_scanned(tmp_path: Path) -> None:
    """A diary written and indexed by a running app after the rebuild listed the folder is
    still in the index the rebuild leaves; a file deleted by then stays out of it."""
    pipeline = kb_pipeline(tmp_path)
    first = write(pipeline, task_record(1, "T-1", stderr=TS_STDERR))
    (tmp_path / "diaries" / "agents" / "coder" / "zz-notes.md").write_text("# Notes\n")
    late: list[str] = []

    def meanwhile(path: str, why: str) -> None:  # the scan is past every diary by now
        late.append(write(pipeline, task_record(2, "T-2", stderr=TS_STDERR)).id)
        gone = write(pipeline, task_record(3, "T-3", stderr=TS_STDERR))
        (tmp_path / gone.path).unlink()

    with DiaryIndex(tmp_path) as index:
        assert index.rebuild(meanwhile).indexed == 2
        assert sorted(hit.id for hit in index.search("TS2345").hits) == sorted(
            [first.id, *late])
    pipeline.close()


def test_a_rebuild_that_cannot_open_the_database_says_so_and_deletes_nothing(
        tmp_path: Path) -> None:
    """Only a damaged database is recreated: one that cannot be opened (here a folder in
    its place) is an error, and stays."""
    (tmp_path / INDEX_FILE).mkdir()
    with DiaryIndex(tmp_path) as index, pytest.raises(IndexUnavailable, match="unable to open"):
        index.rebuild()
    assert (tmp_path / INDEX_FILE).is_dir()


def test_index_failures_are_counted_logged_once_and_never_fatal(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """With an unusable index every diary is still written; failures are counted, and the
    listener and the related finder each log one error."""
    (tmp_path / INDEX_FILE).mkdir()
    pipeline = kb_pipeline(tmp_path)
    with caplog.at_level(logging.DEBUG, logger="otel_diary"):
        diaries = [write(pipeline, task_record(n, f"T-{n}")) for n in range(3)]
    assert all((tmp_path / d.path).is_file() for d in diaries)
    assert pipeline.stats.diaries == 3 and pipeline.stats.index_errors == 6
    assert pipeline.stats.sink_errors == 0 and pipeline.stats.pipeline_errors == 0
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 2
    assert all("cannot" in r.getMessage() and r.exc_info is None for r in errors)


def test_a_reader_and_a_writer_work_at_the_same_time(tmp_path: Path) -> None:
    """A thread indexing diaries and another searching never fail or see half a diary."""
    with DiaryIndex(tmp_path) as index:
        errors: list[BaseException] = []
        done = threading.Event()

        def writer() -> None:
            try:
                pipeline = kb_pipeline(tmp_path)
                for n in range(60):
                    write(pipeline, task_record(n, f"T-{n}", title=f"Ledger run {n}"))
                pipeline.close()
            except BaseException as exc:  # reported below
                errors.append(exc)
            finally:
                done.set()

        thread = threading.Thread(target=writer)
        thread.start()
        seen = 0
        while not done.is_set():
            hits = index.search("ledger", limit=1000).hits
            assert all(hit.title.startswith("Ledger run") for hit in hits)
            assert len(hits) >= seen
            seen = len(hits)
        thread.join()
        assert errors == []
        assert len(index.search("ledger", limit=1000).hits) == 60


def test_fts_terms_turn_operators_into_plain_words() -> None:
    """FTS5 operators and punctuation in a query become quoted words, phrases or prefixes."""
    assert fts_terms('NEAR(a b) OR "x y* AND orders* -z ^q col:v ((') == [
        '"NEAR"', '"a"', '"b"', '"OR"', '"x y AND orders z q col v"']
    assert fts_terms("orders* TS2345: tests/test_x.py::test_y") == [
        '"orders"*', '"TS2345"', '"tests test_x py test_y"']
    assert fts_terms('*** "" ( ) : ^ _') == []


def test_every_word_must_match_else_any_word_is_ranked(tmp_path: Path) -> None:
    """Words are ANDed; when nothing has them all, diaries with some of them are ranked."""
    pipeline = kb_pipeline(tmp_path)
    ledger = write(pipeline, task_record(1, "T-1", title="Ledger export"))
    orders = write(pipeline, task_record(2, "T-2", title="Orders export"))
    with DiaryIndex(tmp_path) as index:
        both = index.search("ledger export")
        some = index.search("ledger orders")
    assert [hit.id for hit in both.hits] == [ledger.id] and both.match == "all"
    assert {hit.id for hit in some.hits} == {ledger.id, orders.id} and some.match == "any"


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DiaryIndex]:
    root = tmp_path_factory.mktemp("kb")
    pipeline = kb_pipeline(root)
    write(pipeline, task_record(1, "T-1", stderr=TS_STDERR, title='NEAR "quoted" (title)*'))
    write(pipeline, task_record(2, "T-2", stderr=PY_STDERR))
    pipeline.close()
    with DiaryIndex(root) as index:
        yield index


@settings(max_examples=400, deadline=None)
@given(query=st.text(max_size=60) | st.lists(st.sampled_from(
    ['"', "(", ")", "*", "NEAR", "NEAR(", "AND", "OR", "NOT", ":", "^", "+", "-", "TS2345",
     "title:", "{", "}", ",", "\x00", "a"]), max_size=8).map(" ".join), raw=st.booleans())
def test_any_query_returns_results_or_a_clear_message(small_index: DiaryIndex, query: str,
                                                      raw: bool) -> None:
    """Whatever the query (FTS syntax included, raw or not), search returns hits or raises
    SearchError with a message; nothing else escapes."""
    try:
        result = small_index.search(query, raw=raw)
    except SearchError as exc:
        assert str(exc)
    else:
        assert result.match in ("all", "any", "recent")
        assert all(hit.id.startswith("kh-") for hit in result.hits)


@settings(max_examples=80, deadline=None)
@given(title=st.text(max_size=60), task=st.text(min_size=1, max_size=40),
       agent=st.text(max_size=30), trigger=st.none() | st.text(max_size=30),
       stderr=st.text(max_size=200), learned=st.text(max_size=200), recovered=st.booleans())
def test_live_entry_equals_entry_parsed_from_the_file(title: str, task: str, agent: str,
                                                      trigger: str | None, stderr: str,
                                                      learned: str, recovered: bool) -> None:
    """Indexing a fresh diary from the values in hand (its front matter, body and run) gives
    the same entry as reading the file back (so live indexing and `reindex` agree)."""
    run = replace(RECOVERED, title=title or "t", task_id=task, agent=agent, trigger=trigger,
                  stderr_tail=stderr or None, outcome="recovered" if recovered else "completed")
    diary = render(run, learned or StubReflector().reflect(run))
    assert entry_from_diary(diary.path, diary, run) == \
        entry_from_document(diary.path, diary.content)


@pytest.mark.parametrize("front", [
    "task: 0x1F", "task: 012", "task: yes", "task: ~", "task: 1_000", "title: 1.50",
    "created: 2026-01-01 10:00:00", "tags: [a, 'b c']", "agent: >\n  folded\n  text",
    "title: 'it''s'", "title: x #not a comment", "title: \"double \\u00e9\"", "trigger:",
    "workflow: 'a: b'", "workflow: a:b", "model: -x", "route: \"\"", "tokens: 12\nlatency_ms: 3",
    "title: 'two\u2028lines'", "tags:\n- a\n- 'b'\n- c d",
])
def test_front_matter_is_read_as_yaml_reads_it(front: str) -> None:
    """Whatever the front matter holds (typed values, quoting, flow lists, folded text), the
    entry read from a file is the one YAML's reading of its front matter gives."""
    content = f"---\nid: kh-1\n{front}\n---\n\n# T\n\n## What was learned\nx\n"
    assert entry_from_document("p.md", content) == \
        _entry_from_yaml("p.md", content)


def _entry_from_yaml(path: str, content: str) -> Entry:
    from otel_diary.index.documents import _entry, section_signatures
    body = content[content.find("\n---\n", 3) + 5:].lstrip("\n")
    parts = sections(body)
    return _entry(path, parse_front_matter(content), body, parts.get("What was learned", ""),
                  section_signatures(parts.get("Error encountered", "")))


@needs_fork
def test_a_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    """A child forked from a process using the index never touches the inherited SQLite
    connection: it opens its own, and both processes keep searching and writing."""
    pipeline = kb_pipeline(tmp_path)
    write(pipeline, task_record(1, "T-1", stderr=TS_STDERR))
    pipeline.close()
    with DiaryIndex(tmp_path) as index:
        assert len(index.search("TS2345").hits) == 1
        inherited = index._connection()

        def child() -> bool:
            fresh = index._connection() is not inherited
            found = len(index.search("TS2345").hits) == 1
            index.add(replace(scan_entries(tmp_path, index.folder)[0][0], id="kh-child",
                              path="diaries/child.md"))
            return fresh and found

        assert in_forked_child(child) == 0
        assert index._connection() is inherited
        assert index.by_id("kh-child") is not None


_SCHEMA_1 = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE diaries (doc INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, path TEXT NOT NULL,"
    " title TEXT NOT NULL, agent TEXT NOT NULL, task TEXT NOT NULL, outcome TEXT NOT NULL,"
    " task_trigger TEXT, workflow TEXT, trace_id TEXT NOT NULL, span_id TEXT NOT NULL,"
    " created TEXT NOT NULL, summary TEXT NOT NULL)",
    "CREATE TABLE signatures (signature TEXT NOT NULL, doc INTEGER NOT NULL,"
    " PRIMARY KEY (signature, doc)) WITHOUT ROWID",
    "CREATE VIRTUAL TABLE diaries_fts USING fts5 (title, body, meta)",
    "INSERT INTO meta VALUES ('filled', '1')",
    "PRAGMA user_version = 1",
)


def test_an_index_of_the_first_schema_is_rebuilt_from_the_folder_when_opened(
        tmp_path: Path) -> None:
    """A database left by the first schema (its own copy of the texts, filled but stale) is
    replaced by the current schema holding what the folder has."""
    diary = write(kb_pipeline(tmp_path, index=False), task_record(1, "T-1", stderr=TS_STDERR))
    conn = sqlite3.connect(tmp_path / INDEX_FILE)
    for statement in _SCHEMA_1:
        conn.execute(statement)
    conn.commit()
    conn.close()
    with DiaryIndex(tmp_path) as index:
        assert [hit.id for hit in index.search("TS2345").hits] == [diary.id]
        assert index._connection().execute("PRAGMA user_version").fetchone()[0] == \
            SCHEMA_VERSION > 1


def test_the_index_keeps_diary_texts_only_compressed(tmp_path: Path) -> None:
    """The database does not hold a second plain copy of a diary: a sentence of its body is
    in the file, not in the index, and the index still finds and quotes it."""
    pipeline = kb_pipeline(tmp_path)
    record = task_record(1, "T-1", title="Reconcile the quarterly ledger")
    diary = write(pipeline, record)
    pipeline.close()
    sentence = "Route: paid_model via model-a."
    assert sentence in (tmp_path / diary.path).read_text(encoding="utf-8")
    with DiaryIndex(tmp_path) as index:
        hit, = index.search("paid_model").hits
        assert "**paid_model**" in hit.snippet and hit.summary
    files = [Path(f"{tmp_path / INDEX_FILE}{suffix}") for suffix in ("", "-wal")]
    stored = b"".join(file.read_bytes() for file in files if file.exists())
    assert sentence.encode() not in stored


def test_every_hit_has_its_snippet_among_other_matches_and_other_diaries(
        tmp_path: Path) -> None:
    """Snippets are read for the hits kept only, over the range of their rows: hits far
    apart, with diaries that do not match and matches that are not kept between them,
    each get their own snippet, with or without filters."""
    pipeline = kb_pipeline(tmp_path)
    titles = ["Close the ledger", "Rotate the keys", "Audit the ledger twice, ledger",
              "Tidy the docs", "Ledger export", "Rename the module", "Ledger ledger fix"]
    diaries = [write(pipeline, task_record(n, f"T-{n}", agent="reviewer" if n % 2 else "coder",
                                           title=title)) for n, title in enumerate(titles, 1)]
    pipeline.close()
    matching = {d.id: d.title for d in diaries if "ledger" in d.title.lower()}
    with DiaryIndex(tmp_path) as index:
        for kept in (2, 4):
            hits = index.search("ledger", limit=kept).hits
            assert len(hits) == kept and {hit.id for hit in hits} <= set(matching)
            for hit in hits:
                assert "**Ledger**" in hit.snippet or "**ledger**" in hit.snippet, hit
                assert matching[hit.id].split()[0] in hit.snippet
        filtered = index.search("ledger", agent="reviewer").hits
        assert {hit.id for hit in filtered} == {d.id for d in diaries[0::2]
                                                if d.id in matching}
        assert all("ledger**" in hit.snippet.lower() for hit in filtered)


def test_a_diary_indexed_again_with_other_text_leaves_a_sound_full_text_index(
        tmp_path: Path) -> None:
    """Re-indexing a diary whose file changed removes its old words from the full-text index
    (which is told exactly what it indexed before) and adds the new ones."""
    pipeline = kb_pipeline(tmp_path)
    diary = write(pipeline, task_record(1, "T-1", title="Reconcile the quarterly ledger"))
    pipeline.close()
    file = tmp_path / diary.path
    with DiaryIndex(tmp_path) as index:
        changed = file.read_text(encoding="utf-8").replace("ledger", "invoices")
        file.write_text(changed, encoding="utf-8")
        index.add_document(diary.path, changed)
        conn = index._connection()
        conn.execute("INSERT INTO diaries_fts (diaries_fts, rank) VALUES ('integrity-check', 1)")
        assert index.search("ledger").hits == []
        assert [hit.id for hit in index.search("invoices").hits] == [diary.id]
        assert index.count() == 1


def test_a_query_matching_more_diaries_than_are_ranked_ranks_the_newest(
        tmp_path: Path) -> None:
    """When more diaries match than a search ranks, the newest are ranked, even where an
    older one matches better and its file sorts first (a rebuild indexes oldest first)."""
    pipeline = kb_pipeline(tmp_path, index=False)
    oldest = write(pipeline, task_record(1, "T-1", agent="aaa",
                                         title="Ledger ledger ledger ledger"))
    newer = [write(pipeline, task_record(n, f"T-{n}", agent="zzz",
                                         title=f"Close the ledger {n}")) for n in range(2, 6)]
    with DiaryIndex(tmp_path, ranked=3) as index:
        assert index.rebuild().indexed == 5
        assert {hit.id for hit in index.search("ledger").hits} == {d.id for d in newer[1:]}
    with DiaryIndex(tmp_path) as index:
        assert index.search("ledger").hits[0].id == oldest.id


def test_a_filtered_search_past_its_ranking_bound_reaches_further_back(
        tmp_path: Path) -> None:
    """When the filters leave fewer hits among the newest matches than asked for, the
    search ranks older matches too: an old diary of the filtered agent is still found."""
    pipeline = kb_pipeline(tmp_path, index=False)
    oldest = write(pipeline, task_record(1, "T-1", agent="reviewer", title="Close the ledger"))
    for n in range(2, 12):
        write(pipeline, task_record(n, f"T-{n}", agent="coder", title=f"Close the ledger {n}"))
    with DiaryIndex(tmp_path, ranked=2) as index:
        assert index.rebuild().indexed == 11
        for query in ("ledger", "ledg*"):  # snippets by rowid, and over a range, far back
            hits = index.search(query, agent="reviewer").hits
            assert [hit.id for hit in hits] == [oldest.id]
            assert "**ledger**" in hits[0].snippet.lower()
        assert len(index.search("ledger", agent="coder", limit=3).hits) == 3




HOLD_THE_FOLDER = """
import fcntl, os, sys
handle = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(handle, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.readline()
"""


def test_an_opener_of_a_new_index_waits_while_another_may_be_making_it(
        tmp_path: Path) -> None:
    """An opener that finds no database removes the logs a deleted one left behind. It
    does so only while it holds the folder's lock, so that it never removes the logs
    another process has just made beside a new database (a reader then met "disk I/O
    error")."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_FOLDER, str(tmp_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        opened = threading.Event()
        index = DiaryIndex(tmp_path)

        def open_it() -> None:
            index.count()
            opened.set()

        opener = threading.Thread(target=open_it)
        opener.start()
        assert not opened.wait(0.5)  # waiting for the folder
        holder.stdin.write("done\n")
        holder.stdin.flush()
        assert opened.wait(30)
        opener.join(30)
        index.close()
    finally:
        holder.kill()
        holder.wait(10)
