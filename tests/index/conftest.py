"""Fixtures of the index tests."""

from __future__ import annotations

import pytest

from otel_diary.index.postgres import PostgresStore
from tests.index.test_store_contract import keep, render
from tests.support.kb import TS_STDERR, task_record


@pytest.fixture
def filled_store(postgres_url: str) -> PostgresStore:
    """A PostgreSQL store holding three diaries, its pool opened by using it."""
    opened = PostgresStore(postgres_url, max_connections=2)
    for n in range(3):
        keep(opened, render(task_record(n, f"T-{n}", stderr=TS_STDERR)))
    assert opened.count() == 3
    return opened
