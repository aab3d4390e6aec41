"""The PostgreSQL store on its own; what both stores must do alike is pinned in
``test_store_contract``, its connections in ``test_pgpool``."""

from __future__ import annotations

import random

import psycopg
import pytest

from otel_diary.errors import IndexUnavailable
from otel_diary.index.documents import entry_from_parts
from otel_diary.index.lessons import sighting
from otel_diary.index.postgres import PostgresStore
from tests.index.test_store_contract import render
from tests.support.kb import TS_STDERR, task_record


def test_a_diary_whose_words_pass_the_search_limit_is_kept(filled_store: PostgresStore) -> None:
    """A diary of 1.2 MB whose distinct long words would make a search vector over
    PostgreSQL's 1 MB is kept, searched by its first part (it was taken for an outage:
    the store went away and the diary was retried for good)."""
    diary = render(task_record(9, "T-9", stderr=TS_STDERR))
    rng = random.Random(2)
    gothic = [chr(c) for c in range(0x10330, 0x1034A)]  # four bytes each in UTF-8
    words = " ".join("".join(rng.choice(gothic) for _ in range(511)) for _ in range(600))
    content = diary.content[:diary.content.index("\n---\n", 4) + 5] + words  # a body of words
    try:
        kept = filled_store.add_diary(
            entry_from_parts(diary.path, diary.front_matter, content), content)
        assert filled_store.document(kept) == content
        assert filled_store.count() == 4
        assert filled_store.search(words[:511]).hits[0].path == kept
    finally:
        filled_store.close()


def test_a_diary_whose_front_matter_passes_the_search_limit_is_kept(
        filled_store: PostgresStore) -> None:
    """The same of a diary whose front matter (1.2 MB of tags) holds the words: kept,
    searched by its title and its first tags (it was refused)."""
    diary = render(task_record(9, "T-9", stderr=TS_STDERR))
    rng = random.Random(3)
    gothic = [chr(c) for c in range(0x10330, 0x1034A)]
    tags = ["".join(rng.choice(gothic) for _ in range(511)) for _ in range(600)]
    front = {**diary.front_matter, "tags": tags}
    try:
        kept = filled_store.add_diary(entry_from_parts(diary.path, front, diary.content),
                                      diary.content)
        assert filled_store.count() == 4
        assert filled_store.search(tags[0]).hits[0].path == kept
        assert filled_store.search(diary.front_matter["title"]).hits[0].path == kept
    finally:
        filled_store.close()


def test_a_lesson_locked_by_a_stalled_writer_fails_that_lesson_only(
        filled_store: PostgresStore, postgres_url: str) -> None:
    """Another writer stalled while holding a lesson's lock: updating that lesson fails
    (try again), and the store goes on answering everything else."""
    diary = render(task_record(7, "T-7", stderr=TS_STDERR))
    path = filled_store.add_diary(
        entry_from_parts(diary.path, diary.front_matter, diary.content), diary.content)
    found = sighting(path, diary.front_matter, diary.content)
    assert found is not None
    signature, seen = found
    try:
        with psycopg.connect(postgres_url) as stalled:
            stalled.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                            (f"lesson:{signature}",))
            with PostgresStore(postgres_url, timeout_s=0.5) as other, \
                    pytest.raises(IndexUnavailable, match="lock another writer holds"):
                other.add_lesson(signature, seen)
            assert filled_store.count() == 4
            assert filled_store.search("task").hits
            stalled.rollback()
        assert filled_store.add_lesson(signature, seen).runs == 4
    finally:
        filled_store.close()


def test_text_postgresql_cannot_hold_is_looked_up_not_refused(filled_store: PostgresStore) -> None:
    """A NUL or a lone surrogate in what is looked up finds nothing (PostgreSQL refuses
    both: the driver raised DataError or UnicodeEncodeError to the reader)."""
    try:
        assert filled_store.document("diaries/\udc80.md") is None
        assert filled_store.document("diaries/a\x00.md") is None
        assert filled_store.by_trace("\ud800") == []
        assert not filled_store.lists_others("code:\ud800", "x")
        assert filled_store.search("task", task="\ud800").hits == []
    finally:
        filled_store.close()

