"""The store contract, pinned on both stores: the folder + SQLite default and PostgreSQL."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_diary import ORCHESTRATOR, ChildSummary, Diary, Settings, SpanRecord
from otel_diary.errors import SearchError
from otel_diary.index.base import DiaryStore
from otel_diary.index.documents import entry_from_parts, primary_signature
from otel_diary.index.folder import FolderStore
from otel_diary.index.lessons import lesson_id, lesson_path, sighting
from otel_diary.index.related import CANDIDATES
from otel_diary.pipeline.core import MAX_RELATED
from otel_diary.testing import InMemorySink
from otel_diary.wiring import build_pipeline
from tests.support.kb import PY_STDERR, TS_STDERR, task_record


@pytest.fixture(params=["folder", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DiaryStore]:
    """Each store, empty."""
    opened: DiaryStore
    if request.param == "postgres":
        from otel_diary.index.postgres import PostgresStore  # psycopg: the pg extra

        opened = PostgresStore(request.getfixturevalue("postgres_url"))
    else:
        opened = FolderStore(tmp_path / "kb")
    yield opened
    opened.close()


def render(record: SpanRecord) -> Diary:
    """The diary the pipeline renders for ``record`` (no store involved)."""
    sink = InMemorySink()
    pipeline = build_pipeline(Settings(enabled=True, index=False), ORCHESTRATOR, sinks=[sink])
    diary = pipeline.handle((record, ChildSummary()))
    assert diary is not None
    return diary


def keep(store: DiaryStore, diary: Diary, path: str | None = None) -> None:
    """What delivering ``diary`` does: the document and its lesson."""
    where = path or diary.alternate_path
    kept = store.add_diary(entry_from_parts(where, diary.front_matter, diary.content),
                           diary.content)
    found = sighting(kept, diary.front_matter, diary.content)
    if found is not None:
        store.add_lesson(*found)


def test_the_same_diary_twice_is_one_diary(store: DiaryStore) -> None:
    """Keeping one diary id twice leaves one diary, with the newer text, and one lesson run."""
    diary = render(task_record(1, "T-1", stderr=TS_STDERR))
    keep(store, diary)
    keep(store, diary)
    assert store.count() == 1
    assert store.by_id(diary.id) is not None
    assert store.document(diary.alternate_path) == diary.content
    assert store.lesson("code:TS2345").runs == 1


def test_search_ranks_a_title_match_first_and_falls_back_to_any_word(
        store: DiaryStore) -> None:
    """A word in the title ranks above the same word in the body only; when no diary has
    every word, diaries with some of them come back as ``any``; no words: the newest."""
    in_body = render(task_record(1, "T-1", title="Tidy the report builder",
                                 stderr="zanzibar quokka failed"))
    in_title = render(task_record(2, "T-2", title="Zanzibar quokka export"))
    other = render(task_record(3, "T-3", title="Something else entirely", agent="docs"))
    for diary in (in_body, in_title, other):
        keep(store, diary)
    result = store.search("zanzibar")
    assert [hit.id for hit in result.hits] == [in_title.id, in_body.id]
    assert result.match == "all"
    assert result.hits[0].title == "Zanzibar quokka export"
    either = store.search("zanzibar entirely")
    assert either.match == "any"
    assert {hit.id for hit in either.hits} == {in_body.id, in_title.id, other.id}
    recent = store.search("")
    assert recent.match == "recent"
    assert [hit.id for hit in recent.hits] == [other.id, in_title.id, in_body.id]
    assert [hit.id for hit in store.search("", agent="docs").hits] == [other.id]
    assert [hit.id for hit in store.search("zanzibar", outcome="recovered").hits] == \
        [in_body.id]
    assert "**" in store.search("quokka").hits[0].snippet


def test_an_agent_is_found_by_its_name_or_its_folder_in_any_case(store: DiaryStore) -> None:
    """``--agent coder-bot`` finds the diaries of "Coder Bot", filed under
    ``diaries/agents/Coder-Bot/``, as ``--agent "coder bot"`` does. A ``_`` in a folder is
    no wildcard, and another agent is not found."""
    bot = render(task_record(1, "PROJ-12", agent="Coder Bot"))
    snake = render(task_record(2, "T-2", agent="my_agent"))
    other = render(task_record(3, "T-3", agent="myXagent"))
    for diary in (bot, snake, other):
        keep(store, diary)
    assert bot.path.startswith("diaries/agents/Coder-Bot/")
    for agent in ("Coder Bot", "coder bot", "coder-bot", "CODER-BOT"):
        for query in ("", "PROJ-12"):
            assert [hit.id for hit in store.search(query, agent=agent).hits] == [bot.id]
    assert [hit.id for hit in store.search("", agent="MY_AGENT").hits] == [snake.id]
    assert store.search("", agent="coder").hits == []


def test_a_search_for_some_words_leaves_the_stop_words_out(store: DiaryStore) -> None:
    """When no diary has every word of a question, its stop words (how, did, an, the, …)
    are left out: a diary sharing only those with it is not listed, however rare they are
    in the knowledge base."""
    asked = render(task_record(1, "T-1", title="Zanzibar quokka export"))
    noise = render(task_record(2, "T-2", title="An index for the report", agent="docs"))
    for diary in (asked, noise):
        keep(store, diary)
    some = store.search("how did an export of zanzibar go")
    assert some.match == "any"
    assert [hit.id for hit in some.hits] == [asked.id]
    none = store.search("when did the zebra escape")
    assert (none.match, none.hits) == ("any", [])
    assert [hit.id for hit in store.search("the an").hits] == [noise.id]  # only stop words



@pytest.mark.parametrize("query", ["password=hunter2xyz (((", "'Bearer Zq7xW2mK9pL4vN8r'!!:"])
def test_a_broken_raw_query_is_refused_without_its_secret(store: DiaryStore, query: str) -> None:
    """A raw full-text query the engine refuses is named in the error, redacted as a diary
    is: the error goes to the agent that asked and to logs."""
    keep(store, render(task_record(1, "T-1")))
    with pytest.raises(SearchError) as refused:
        store.search(query, raw=True)
    assert "hunter2xyz" not in str(refused.value) and "Zq7xW2mK9pL4vN8r" not in str(refused.value)
    assert "[REDACTED:" in str(refused.value)

WORDS = ("see os.path.join and v1.2.3 at https://ci.example.com/run/7, mail dev@example.com; "
         "node_modules/left-pad snake_case_name kebab-case réseau connection timeouts")


@pytest.mark.parametrize("query", [
    "the", "is not", '"is not assignable"', "api.ts", "src/orders/api.ts", "orders",
    "os.path.join", "os.path", "v1.2.3", "ci.example.com", "dev@example.com",
    "https://ci.example.com/run/7", "left-pad", "node_modules/left-pad", "snake_case_name",
    "case", "kebab-case", "reseau", "réseau", "connect*", "timeout", "TS2345*", "zanzibar"])
def test_both_stores_find_the_same_diaries(query: str, tmp_path: Path,
                                           postgres_url: str) -> None:
    """A path, a dotted name, an address, a stop word or a word with an accent finds the
    same diaries in both stores (PostgreSQL kept a path or a host as one word and left
    out stop words: ``api.ts`` or ``the`` found nothing there)."""
    from otel_diary.index.postgres import PostgresStore

    diaries = [render(task_record(n, f"T-{n}", stderr=f"{TS_STDERR}\n{WORDS}"))
               for n in range(2)]
    diaries.append(render(task_record(2, "T-2", stderr=PY_STDERR)))
    found = {}
    for name, store in (("folder", FolderStore(tmp_path / "kb")),
                        ("postgres", PostgresStore(postgres_url))):
        with store:
            for diary in diaries:
                keep(store, diary)
            result = store.search(query)
            found[name] = (result.match, {hit.id for hit in result.hits})
    assert found["folder"] == found["postgres"]
    if query != "zanzibar":
        assert found["folder"][1]


def test_error_signatures_are_looked_up_exactly(store: DiaryStore) -> None:
    """Related finds earlier diaries sharing an error signature, most recent first, not the
    diary itself nor later ones; an unrelated error is not related."""
    first = render(task_record(1, "T-1", stderr=TS_STDERR))
    second = render(task_record(2, "T-2", stderr=TS_STDERR))
    unrelated = render(task_record(3, "T-3", stderr=PY_STDERR))
    later = render(task_record(9, "T-9", stderr=TS_STDERR))
    for diary in (first, second, unrelated, later):
        keep(store, diary)
    found = store.related(exclude=second.id, task=None, trigger=None,
                          signatures=["code:TS2345"], before=second.created)
    assert found == [first.id]
    assert store.related(exclude="", task=None, trigger=None, signatures=["code:TS2345"],
                         before="9999") == [later.id, second.id, first.id]
    same_task = store.related(exclude=later.id, task="T-1", trigger=None, signatures=[],
                              before=later.created)
    assert same_task == [first.id]
    by_trigger = render(task_record(5, "T-5", trigger="ci-red"))
    keep(store, by_trigger)
    assert store.related(exclude=later.id, task="T-9", trigger="ci-red", signatures=[],
                         before=later.created) == [by_trigger.id]
    assert store.related(exclude=later.id, task="T-1", trigger="ci-red",
                         signatures=["code:TS2345"], before=later.created) == \
        [first.id, second.id, by_trigger.id]



def test_a_diary_counts_every_error_it_shares(store: DiaryStore) -> None:
    """An older diary that met both of a run's errors ranks above the many newer ones that
    met one, even when those fill one error's candidates (its score counts every error it
    shares, not only those whose newest diaries it is among)."""
    both = render(task_record(0, "T-0", stderr=TS_STDERR + "\nsrc/a.ts(1,1): error TS2322: x"))
    keep(store, both)
    for n in range(1, CANDIDATES + 10):
        keep(store, render(task_record(n, f"T-{n}", stderr=TS_STDERR)))
    signatures = entry_from_parts(both.path, both.front_matter, both.content).signatures
    assert "code:TS2322" in signatures and "code:TS2345" in signatures
    found = store.related(exclude="", task=None, trigger=None, signatures=signatures,
                          before="9999")
    assert found[0] == both.id and len(found) == MAX_RELATED


@pytest.mark.parametrize("seed", [1, 2])
def test_related_is_the_same_in_both_stores(seed: int, tmp_path: Path,
                                            postgres_url: str) -> None:
    """The same diaries, kept in the folder store and in PostgreSQL, give the same related
    diaries for runs sharing their tasks, triggers and errors (many of one error, so that
    its candidates are cut)."""
    from otel_diary.index.postgres import PostgresStore

    rng = random.Random(seed)
    codes = ["TS2345"] * 6 + ["TS2322", "TS7006", "TS2339"]
    diaries = []
    for n in range(200):
        chosen = sorted(set(rng.sample(codes, rng.randint(0, 3))))
        stderr = "\n".join(f"src/a.ts(1,1): error {code}: x" for code in chosen) or None
        diaries.append(render(task_record(n, f"T-{rng.randint(1, 4)}", stderr=stderr,
                                          trigger=rng.choice([None, "ci", "cron"]))))
    stores: list[DiaryStore] = [FolderStore(tmp_path / "kb"), PostgresStore(postgres_url)]
    try:
        for diary in diaries:
            for store in stores:
                keep(store, diary)
        found = 0
        for diary in rng.sample(diaries, 60):
            entry = entry_from_parts(diary.path, diary.front_matter, diary.content)
            folder, postgres = (store.related(
                exclude=diary.id, task=entry.task, trigger=entry.trigger,
                signatures=entry.signatures, before=diary.created) for store in stores)
            assert folder == postgres, entry
            found += len(folder) == MAX_RELATED
        assert found > 40
    finally:
        for store in stores:
            store.close()


def test_lessons_are_the_same_files_in_both_stores(tmp_path: Path, postgres_url: str) -> None:
    """The same runs, kept in the folder store and in PostgreSQL (which keeps a lesson's
    state as JSON), give the same lessons, down to the bytes of each lesson's document."""
    from otel_diary.index.postgres import PostgresStore

    rng = random.Random(7)
    errors = [TS_STDERR, PY_STDERR, "src/b.ts(2,3): error TS2322: Type 'y: \"q\"' is wrong"]
    stores: list[DiaryStore] = [FolderStore(tmp_path / "kb"), PostgresStore(postgres_url)]
    try:
        for n in range(40):
            extra = {"orchestrator.escalation_count": rng.randint(0, 2),
                     "orchestrator.route": rng.choice(["paid_model", "local", "a: b"])}
            diary = render(task_record(n, f"T-{n % 5}", stderr=rng.choice(errors),
                                       agent=rng.choice(["coder", "fixer"]), extra=extra))
            for store in stores:
                keep(store, diary)
        folder, postgres = (store.lessons() for store in stores)
        assert folder == postgres and len(folder) == 3
        for lesson in folder:
            path = lesson_path(lesson.signature)
            assert stores[0].document(path) == stores[1].document(path) is not None
    finally:
        for store in stores:
            store.close()


@pytest.mark.parametrize("path", ["../../etc/evil.md", "diaries/agents/../../x.md",
                                  "/etc/evil.md", "diaries/lessons/x.md"])
def test_a_diary_path_outside_the_diary_folder_is_refused(store: DiaryStore, path: str) -> None:
    """A diary kept under a path that leaves ``diaries/agents`` is refused by both (the
    store kept it, and answered it when fetched)."""
    diary = render(task_record(1, "T-1"))
    with pytest.raises(ValueError, match="leaves the diary folder"):
        store.add_diary(entry_from_parts(path, diary.front_matter, diary.content),
                        diary.content)
    assert store.count() == 0


def test_a_nul_in_a_lookup_finds_nothing(store: DiaryStore) -> None:
    """A NUL, which no kept text holds, finds nothing and raises nothing."""
    keep(store, render(task_record(1, "T-1", stderr=TS_STDERR)))
    assert store.by_id("kh-\x00") is None
    assert store.search("task", agent="a\x00b").hits == []
    assert store.lesson("code:\x00").runs == 0
    assert store.related(exclude="", task="T\x00", trigger=None, signatures=["\x00"],
                         before="9999") == []


def test_lookups_by_trace_and_id(store: DiaryStore) -> None:
    """A diary is found by its trace id and by its id; unknown ones are not."""
    diary = render(task_record(1, "T-1"))
    keep(store, diary)
    assert [hit.id for hit in store.by_trace(diary.trace_id.upper())] == [diary.id]
    found = store.by_id(diary.id)
    assert found is not None and found.path == diary.alternate_path
    assert store.by_id("kh-nope") is None
    assert store.by_trace("0" * 32) == []
    assert store.document("diaries/agents/none.md") is None


def test_lessons_gather_every_run_of_an_error(store: DiaryStore) -> None:
    """Runs meeting one error grow one lesson (counted once each), listed newest first; a
    lesson lists others than a diary once another run met it."""
    first = render(task_record(1, "T-1", stderr=TS_STDERR))
    keep(store, first)
    assert not store.lists_others("code:TS2345", first.id)
    second = render(task_record(2, "T-2", stderr=TS_STDERR))
    keep(store, second)
    keep(store, render(task_record(3, "T-3", stderr=PY_STDERR)))
    lesson = store.lesson("code:TS2345")
    assert lesson.runs == 2
    assert lesson.evidence == [first.id, second.id]
    assert store.lists_others("code:TS2345", first.id)
    assert [item.signature for item in store.lessons()] == \
        ["exception:ValueError", "code:TS2345"]
    assert store.lesson("code:TS9999").runs == 0
    assert lesson.id == lesson_id("code:TS2345")


def test_concurrent_lesson_updates_lose_no_run(store: DiaryStore) -> None:
    """Eight threads each counting five runs into one lesson leave it with forty runs."""
    diaries = [render(task_record(n, f"T-{n}", stderr=TS_STDERR)) for n in range(40)]
    sightings = [sighting(d.alternate_path, d.front_matter, d.content) for d in diaries]
    assert all(found is not None and found[0] == "code:TS2345" for found in sightings)
    barrier = threading.Barrier(8)

    def worker(part: int) -> None:
        barrier.wait()
        for found in sightings[part::8]:
            assert found is not None
            store.add_lesson(*found)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lesson = store.lesson("code:TS2345")
    assert lesson.runs == 40
    assert sorted(lesson.evidence) == sorted(d.id for d in diaries)
    assert primary_signature(["code:TS2345"]) == "code:TS2345"


def test_two_runs_kept_under_one_path_are_both_kept(store: DiaryStore) -> None:
    """Two runs of one task on one day, each delivered under the same path (two replicas'
    folders): the first keeps it, the second takes its span's path; both are found, and the
    lesson points at each where it is."""
    first = render(task_record(1, "T-1", stderr=TS_STDERR))
    second = render(task_record(2, "T-1", stderr=TS_STDERR))
    assert first.path == second.path and first.id != second.id
    keep(store, first, first.path)
    keep(store, second, second.path)
    keep(store, second, second.path)  # delivered again: still one diary, where it was
    assert store.count() == 2
    assert store.document(first.path) == first.content
    assert store.document(second.alternate_path) == second.content
    found = store.by_id(second.id)
    assert found is not None and found.path == second.alternate_path
    lesson = store.lesson("code:TS2345")
    assert lesson.runs == 2
    assert {item["id"]: item["path"] for item in lesson.newest} == {
        first.id: first.path, second.id: second.alternate_path}

