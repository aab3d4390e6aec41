"""The PostgreSQL store on its own: forks, and what it does when the server misbehaves.
What both stores must do alike is pinned in ``test_store_contract``."""

from __future__ import annotations

import gc

import psycopg
import pytest

from otel_diary.index.postgres import PostgresStore
from tests.index.test_store_contract import keep, render
from tests.support.forking import in_forked_child, needs_fork
from tests.support.kb import TS_STDERR, task_record


@pytest.fixture
def store(postgres_url: str) -> PostgresStore:
    """A store holding three diaries, its pool opened by using it."""
    opened = PostgresStore(postgres_url, max_connections=2)
    for n in range(3):
        keep(opened, render(task_record(n, f"T-{n}", stderr=TS_STDERR)))
    assert opened.count() == 3
    return opened


@needs_fork
def test_a_forked_child_has_connections_of_its_own(store: PostgresStore) -> None:
    """Children forked from a process that used the store answer right, each on its own
    connections; closing every connection the child holds (what ending it does) leaves the
    parent's sessions as they were, so the parent goes on answering without an error."""

    def child() -> bool:
        answers = [(store.count(), store.by_id("kh-none"), len(store.search("task").hits))
                   for _ in range(30)]
        for found in gc.get_objects():
            if isinstance(found, psycopg.Connection):
                found.close()
        return set(answers) == {(3, None, 3)}

    try:
        assert [in_forked_child(child, limit_s=30) for _ in range(3)] == [0, 0, 0]
        assert store.count() == 3
        assert len(store.search("task").hits) == 3
    finally:
        store.close()
