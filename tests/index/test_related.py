"""Related diaries in the local index, against a plain model of the ranking: ties, cut
candidate lists, re-written diaries, signatures shared by some candidates only."""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_diary.errors import IndexUnavailable
from otel_diary.index import related as related_module
from otel_diary.index.documents import MAX_SIGNATURES, Entry
from otel_diary.index.related import CANDIDATES, KEPT, Candidates
from otel_diary.index.related import related as find_related
from otel_diary.index.store import DiaryIndex
from tests.support.kb import PY_STDERR, TS_STDERR, kb_pipeline, task_record, write


@dataclass(frozen=True)
class Row:
    order: int  # when it was indexed: the later, the larger
    id: str
    task: str
    trigger: str | None
    created: str
    signatures: tuple[str, ...]


def newest(rows: list[Row], count: int) -> list[Row]:
    return sorted(rows, key=lambda row: (row.created, row.order), reverse=True)[:count]


def model(rows: list[Row], exclude: str, task: str | None, trigger: str | None,
          signatures: list[str], before: str, limit: int) -> list[str]:
    """Signature 3 for each shared, task 2, trigger 1, among the newest candidates of each;
    best score, then newest, then id."""
    alive = [row for row in rows if row.created <= before]
    scores: Counter[Row] = Counter()
    for value, weight, field in ((task, 2, "task"), (trigger, 1, "trigger")):
        if value:
            for row in newest([r for r in alive if getattr(r, field) == value
                               and r.id != exclude], CANDIDATES):
                scores[row] += weight
    wanted = list(dict.fromkeys(signatures))[:MAX_SIGNATURES]
    found = {row for signature in wanted for row in newest(
        [r for r in alive if signature in r.signatures], CANDIDATES + 1) if row.id != exclude}
    shared = {row: len(set(wanted) & set(row.signatures)) for row in found}
    kept = sorted(found, key=lambda row: row.order)
    kept.sort(key=lambda row: row.created, reverse=True)
    kept.sort(key=shared.__getitem__, reverse=True)
    for row in kept[:CANDIDATES]:
        scores[row] += 3 * shared[row]
    ranked = sorted(scores, key=lambda row: row.id)
    ranked.sort(key=lambda row: row.created, reverse=True)
    ranked.sort(key=scores.__getitem__, reverse=True)
    return [row.id for row in ranked[:limit]]


@settings(max_examples=25, deadline=None)
@given(size=st.sampled_from([3, 40, 160]), days=st.integers(1, 12),
       kinds=st.sampled_from([1, 2, 3, 6, 40]), seed=st.integers(0, 2**32))
def test_related_ranks_as_the_model_does(tmp_path_factory: pytest.TempPathFactory,
                                         size: int, days: int, kinds: int, seed: int) -> None:
    """Many diaries on few days (ties everywhere), some re-written under the same id, each
    with some of a few signatures, so that candidate lists are cut and candidates share
    different signatures; lookups with repeated, empty and more than 32 signatures, empty
    tasks and triggers: every lookup answers as the model."""
    rng = random.Random(seed)
    stamps = [f"2026-01-{day:02d}T00:00:00.000Z" for day in range(1, days + 1)]
    pool = [f"code:E{n}" for n in range(kinds)]
    rows: dict[str, Row] = {}
    root = tmp_path_factory.mktemp("kb")
    with DiaryIndex(root) as index:
        index.hold()
        for order in range(size):
            ident = rng.choice(list(rows)) if rows and rng.random() < 0.1 else f"kh-{order:04d}"
            row = Row(order, ident, rng.choice(["T-1", "T-2"]), rng.choice([None, "ci", "cron"]),
                      rng.choice(stamps), tuple(rng.sample(pool, rng.randint(0, kinds))))
            rows.pop(ident, None)
            rows[ident] = row
            index.add(Entry(id=ident, path=f"diaries/agents/a/{order}.md", title="t",
                            agent="a", task=row.task, outcome="recovered", trigger=row.trigger,
                            workflow=None, trace_id="0" * 32, span_id="0" * 16,
                            created=row.created, body="b", meta="m", summary="s",
                            signatures=row.signatures))
        index.release()
        for _ in range(30):
            exclude = rng.choice([*rows, "kh-none"])
            task = rng.choice([None, "", "T-1", "T-2", "T-9"])
            trigger = rng.choice([None, "", "ci", "cron"])
            signatures = rng.sample([*pool, "code:none", ""], rng.randint(0, kinds + 2))
            signatures += rng.choices(signatures, k=2) if signatures else []  # repeated
            before = rng.choice([*stamps, "2000", "2100"])
            limit = rng.choice([0, 1, 5, 5, 200])
            expected = model(list(rows.values()), exclude, task, trigger, signatures, before,
                             limit)
            assert index.related(exclude=exclude, task=task, trigger=trigger,
                                 signatures=signatures, before=before,
                                 limit=limit) == expected, (exclude, task, trigger, signatures,
                                                            before, limit)


def test_a_reindex_committed_during_a_lookup_does_not_change_its_answer(tmp_path: Path) -> None:
    """Related reads row numbers in one statement and their ids in another: a reindex
    (which numbers every diary again) committed in between does not make it name other
    diaries than those it found."""
    root = tmp_path
    pipeline = kb_pipeline(root)
    for n in [*range(1, 20, 2), *range(0, 20, 2)]:  # written out of order: reindexing
        stderr = TS_STDERR if n % 2 == 0 else PY_STDERR  # numbers them differently
        write(pipeline, task_record(n, f"T-{n % 2}", stderr=stderr))
    pipeline.close()
    # The writer gives up the checkpoint that waits for the reader's snapshot (this thread).
    reader, writer = DiaryIndex(root), DiaryIndex(root, busy_timeout_s=0.1)
    query = {"exclude": "kh-none", "task": "T-0", "trigger": None,
             "signatures": ["code:TS2345"], "before": "2100", "limit": 5}
    expected = reader.related(**query)  # type: ignore[arg-type]
    numbered = dict(writer._ready().execute("SELECT id, doc FROM diaries"))
    renumbered: list[dict[str, int]] = []

    def reindex_before_the_ids_are_read(statement: str) -> None:
        if statement.startswith("SELECT doc, id FROM diaries") and not renumbered:
            writer.rebuild()  # an exception here would be swallowed: checked below
            renumbered.append(dict(writer._ready().execute("SELECT id, doc FROM diaries")))

    reader._ready().set_trace_callback(reindex_before_the_ids_are_read)
    assert reader.related(**query) == expected  # type: ignore[arg-type]
    assert renumbered and renumbered[0].keys() == numbered.keys()
    assert renumbered[0] != numbered  # the reindex did number the diaries differently
    reader._ready().set_trace_callback(None)
    assert reader.related(**query) == expected  # type: ignore[arg-type]
    reader.close()
    writer.close()


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32), candidates=st.sampled_from([2, 5, CANDIDATES]),
       lists=st.sampled_from([1, 3, related_module.LISTS]))
def test_kept_candidate_lists_answer_as_fresh_reads(tmp_path_factory: pytest.TempPathFactory,
                                                    seed: int, candidates: int,
                                                    lists: int) -> None:
    """A connection keeps the candidate lists it read. Between its lookups: diaries added
    by it (one at a time, or many in a held transaction), re-written (removed, then
    added), added by another connection, added in a transaction that fails or that SQLite
    ends by itself, and a rebuild; lookups for older times than the lists hold (with few
    candidates per list, so that lists are cut often, and few lists kept). Every lookup
    answers as one that keeps no list, on the same connection."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(related_module, "CANDIDATES", candidates)
        patch.setattr(related_module, "KEPT", 3 * candidates + 2)
        patch.setattr(related_module, "LISTS", lists)
        kept_lists_answer_as_fresh_reads(tmp_path_factory.mktemp("kb"), random.Random(seed))


def kept_lists_answer_as_fresh_reads(root: Path, rng: random.Random) -> None:
    stamps = [f"2026-01-{day:02d}T00:00:00.000Z" for day in range(1, 9)]
    stamps += [stamps[4] + "-" + "x" * 20, stamps[5] + "é"]  # not kept: past 32, not ASCII
    tasks = ["T-1", "T-2", "T-" + "x" * 250]
    pool = ["code:E1", "code:E2", "code:E3"]
    index, other = DiaryIndex(root), DiaryIndex(root)
    ids: list[str] = []
    held = lost = False

    def entry(ident: str, signatures: tuple[object, ...] | None = None) -> Entry:
        return Entry(id=ident, path=f"diaries/agents/a/{ident}.md", title="t", agent="a",
                     task=rng.choice(tasks), outcome="recovered",
                     trigger=rng.choice([None, "ci"]), workflow=None, trace_id="0" * 32,
                     span_id="0" * 16, created=rng.choice(stamps), body="b", meta="m",
                     summary="s", signatures=signatures if signatures is not None else
                     tuple(rng.sample(pool, rng.randint(0, 3))))  # type: ignore[arg-type]

    def lookup() -> None:
        conn = index._ready()
        query = {"exclude": rng.choice([*ids, "kh-none"]) if ids else "kh-none",
                 "task": rng.choice([None, *tasks]), "trigger": rng.choice([None, "ci"]),
                 "signatures": rng.sample(pool, rng.randint(0, 3)),
                 "before": rng.choice([*stamps[2:], "2100", "2100", "2100"]),
                 "limit": rng.choice([1, 5, 200])}
        fresh = find_related(conn, Candidates(), **query)  # type: ignore[arg-type]
        assert index.related(**query) == fresh, query  # type: ignore[arg-type]
        candidates = index._candidates(conn)
        assert len(candidates._lists) <= related_module.LISTS
        kept = candidates._lists.items()
        assert all(len(rows) <= related_module.KEPT and len(key[1]) <= 200
                   and all(len(created) <= 32 and created.isascii() for created, _ in rows)
                   for key, rows in kept)
        assert all(len(rows) == related_module.KEPT for key, rows in kept
                   if key not in candidates._whole)

    for step in range(400):
        action = rng.random()
        if action < 0.35:
            ident = rng.choice(ids) if ids and rng.random() < 0.1 else f"kh-{step:04d}"
            index.add(entry(ident))
            ids.append(ident)
        elif action < 0.45 and not held:
            other.add(entry(f"kh-other-{step:04d}"))
        elif action < 0.5:
            with pytest.raises(IndexUnavailable):  # a signature SQLite cannot store
                index.add(entry(f"kh-bad-{step:04d}", signatures=("code:E1", object())))
        elif action < 0.53 and held and index._ready().in_transaction:
            index._ready().execute("ROLLBACK")  # as SQLite does after some errors
            lost = True  # told by release(); the next add may begin another transaction
        elif action < 0.6:
            if held:
                with contextlib.suppress(IndexUnavailable) if lost else contextlib.nullcontext():
                    index.release()
            else:
                index.hold()
            held, lost = not held, False
        elif action < 0.605 and not held:
            index.rebuild()  # from the folder, which holds no files here
            ids.clear()
        else:
            lookup()
    with contextlib.suppress(IndexUnavailable) if lost else contextlib.nullcontext():
        index.release()
    lookup()
    index.close()
    other.close()


def test_a_connection_reads_a_long_candidate_list_once(tmp_path: Path) -> None:
    """A connection keeps the lists its lookups fill (once no other connection has written
    since its lookup before), and reads them no more while it adds diaries to them, alone
    or held. Another connection's commit, or a transaction that did not commit, makes it
    read them again; a lookup for a run older than a list of more than ``KEPT`` diaries
    holds reads without dropping it. The answers are those of lookups that keep no list."""
    index, other = DiaryIndex(tmp_path), DiaryIndex(tmp_path)
    conn = index._ready()
    reads: list[str] = []
    conn.set_trace_callback(lambda statement: reads.append(statement)
                            if "ORDER BY created DESC, doc DESC LIMIT" in statement else None)
    query = {"exclude": "kh-none", "task": "T-1", "trigger": "ci",
             "signatures": ["code:E1"], "before": "2100", "limit": 5}

    def add(into: DiaryIndex, ident: str, day: int) -> None:
        into.add(Entry(id=ident, path=f"diaries/agents/a/{ident}.md", title="t", agent="a",
                       task="T-1", outcome="recovered", trigger="ci", workflow=None,
                       trace_id="0" * 32, span_id="0" * 16,
                       created=f"2026-02-{day:02d}T00:00:00.000Z", body="b", meta="m",
                       summary="s", signatures=("code:E1",)))

    def lookup() -> tuple[str, int]:
        """The first id found, and how many lists were read."""
        reads.clear()
        found = index.related(**query)  # type: ignore[arg-type]
        read = len(reads)
        assert found == find_related(conn, Candidates(), **query)  # type: ignore[arg-type]
        return found[0], read

    for n in range(KEPT):
        add(index, f"kh-{n:03d}", 1 + n % 9)
    assert lookup()[1] == 3  # task, trigger, signature
    assert lookup()[1] == 6  # and the lists to keep
    assert lookup()[1] == 0
    add(index, "kh-new", 20)
    assert lookup() == ("kh-new", 0)
    index.hold()
    add(index, "kh-held", 21)
    assert lookup() == ("kh-held", 0)
    index.release()
    assert lookup() == ("kh-held", 0)
    query["before"] = "2026-02-10T00:00:00.000Z"  # before the two newest
    assert lookup() == ("kh-008", 0)
    query["before"] = "2026-02-01T12:00:00.000Z"
    assert lookup()[1] == 3
    query["before"] = "2100"
    assert lookup() == ("kh-held", 0)
    add(other, "kh-other", 22)
    assert lookup() == ("kh-other", 3)
    assert lookup() == ("kh-other", 6)
    index.hold()
    add(index, "kh-rolled-back", 23)
    assert lookup() == ("kh-rolled-back", 0)
    conn.execute("ROLLBACK")  # as SQLite does after some errors
    with pytest.raises(IndexUnavailable):
        index.release()  # one diary lost
    add(index, "kh-after", 21)  # a transaction of its own, before the next lookup
    assert lookup() == ("kh-other", 6)
    assert lookup() == ("kh-other", 0)
    index.close()
    other.close()


def test_a_kept_list_of_every_diary_answers_older_lookups_until_it_is_cut(
        tmp_path: Path) -> None:
    """A list kept whole (fewer than ``KEPT`` diaries) answers a lookup for any time
    without reading; once diaries added to it push the oldest out, it no longer does."""
    index = DiaryIndex(tmp_path)
    conn = index._ready()
    reads: list[str] = []
    conn.set_trace_callback(lambda statement: reads.append(statement)
                            if "ORDER BY created DESC, doc DESC LIMIT" in statement else None)

    def add(ident: str, day: int) -> None:
        index.add(Entry(id=ident, path=f"diaries/agents/a/{ident}.md", title="t", agent="a",
                        task="", outcome="recovered", trigger=None, workflow=None,
                        trace_id="0" * 32, span_id="0" * 16,
                        created=f"2026-03-{day:02d}T00:00:00.000Z", body="b", meta="m",
                        summary="s", signatures=("code:E1",)))

    def lookup(before: str) -> int:
        """How many lists the lookup read; its answer is that of one keeping no list."""
        query = {"exclude": "kh-none", "task": None, "trigger": None,
                 "signatures": ["code:E1"], "before": before, "limit": 200}
        reads.clear()
        found = index.related(**query)  # type: ignore[arg-type]
        read = len(reads)
        assert found == find_related(conn, Candidates(), **query)  # type: ignore[arg-type]
        return read

    for n in range(KEPT - 10):
        add(f"kh-{n:03d}", 1 + n // 12)
    assert lookup("2100") + lookup("2100") == 1 + 2  # read, then read and kept whole
    assert lookup("2026-03-01T12:00:00.000Z") == 0
    for n in range(15):
        add(f"kh-new-{n:02d}", 20)
    assert lookup("2100") == 0
    assert lookup("2026-03-01T12:00:00.000Z") == 1  # its oldest are no longer kept
    index.close()
