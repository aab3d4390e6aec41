"""The PostgreSQL store's schema: made once however many replicas start at once."""

from __future__ import annotations

import threading

import psycopg

from otel_diary.index.pgschema import SCHEMA_VERSION, schema_version
from otel_diary.index.postgres import PostgresStore


def test_two_replicas_migrating_at_once_make_one_schema(postgres_url: str) -> None:
    """Four stores migrating one new database at the same moment all succeed, and the
    schema is made once, at the current version."""
    stores = [PostgresStore(postgres_url) for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    results: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def start(store: PostgresStore) -> None:
        barrier.wait()
        try:
            results.append(store.migrate())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    assert errors == []
    assert sorted(results) == [(0, SCHEMA_VERSION)] + [(SCHEMA_VERSION, SCHEMA_VERSION)] * 3
    with psycopg.connect(postgres_url) as conn:
        assert schema_version(conn) == SCHEMA_VERSION
