"""The PostgreSQL store's schema: made once however many replicas start at once, and
migrated with what it holds."""

from __future__ import annotations

import threading

import psycopg
import pytest

from otel_diary.errors import IndexUnavailable
from otel_diary.index.pgschema import SCHEMA, SCHEMA_VERSION, schema_version
from otel_diary.index.postgres import PostgresStore
from tests.index.test_store_contract import keep, render
from tests.support.kb import TS_STDERR, task_record


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


def test_a_version_2_store_is_searched_by_words_once_migrated(postgres_url: str) -> None:
    """A store of schema version 2 (vectors made by PostgreSQL's English parser alone) is
    migrated: its diaries and lessons are found by a path's parts and by stop words."""
    diaries = [render(task_record(n, f"T-{n}", stderr=TS_STDERR)) for n in range(3)]
    with PostgresStore(postgres_url) as store:
        for diary in diaries:
            keep(store, diary)
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # back to version 2
        conn.execute(f"UPDATE {SCHEMA}.diaries SET search = to_tsvector('english', content)")
        conn.execute(f"UPDATE {SCHEMA}.lessons SET search = to_tsvector('english', content)")
        conn.execute(f"DROP TEXT SEARCH CONFIGURATION {SCHEMA}.words")
        conn.execute(f"DROP TEXT SEARCH DICTIONARY {SCHEMA}.english_stem")
        conn.execute(f"UPDATE {SCHEMA}.meta SET value = '2' WHERE key = 'schema_version'")
    with PostgresStore(postgres_url, migrate=False) as old:
        with pytest.raises(IndexUnavailable, match="schema version 2"):
            old.search("api.ts")
    with PostgresStore(postgres_url) as store:
        assert store.migrate() == (2, SCHEMA_VERSION)
        for query in ("api.ts", "orders", "is not"):
            assert {hit.id for hit in store.search(query).hits} == \
                {diary.id for diary in diaries}
        assert store.lesson_rows(terms=['"orders"'])[0][3] == "code:TS2345"


def test_a_key_an_older_import_kept_is_redacted_once_migrated(postgres_url: str) -> None:
    """A version 3 store holding a key in a diary (its title and error line) and in the
    lesson counted from it, as an import of an older otel-diary left them: once migrated,
    neither its rows nor a search give it back; a diary without one is left byte for byte."""
    key = "gsk_" + "q7Rk2Vx9" * 6 + "Zp4W"
    diaries = [render(task_record(n, f"T-{n}", stderr=TS_STDERR)) for n in range(2)]
    with PostgresStore(postgres_url) as store:
        for diary in diaries:
            keep(store, diary)
    planted = diaries[0].content.replace("Argument of type", f"Argument of type {key}") \
        .replace(f"title: {diaries[0].title}", f"title: {key}")
    assert planted.count(key) == 3  # the title, the error line and what was learned
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # back to version 3
        conn.execute(f"UPDATE {SCHEMA}.diaries SET content = %s, title = %s WHERE id = %s",
                     (planted, key, diaries[0].id))
        conn.execute(f"UPDATE {SCHEMA}.lessons SET state = replace(state::text, "
                     "'Argument of type', %s)::jsonb, content = replace(content, "
                     "'Argument of type', %s)", (f"Argument of type {key}",) * 2)
        conn.execute(f"UPDATE {SCHEMA}.meta SET value = '3' WHERE key = 'schema_version'")
        assert key in str(conn.execute(f"SELECT state FROM {SCHEMA}.lessons").fetchone())
    with PostgresStore(postgres_url) as store:
        assert store.migrate() == (3, SCHEMA_VERSION)
        assert store.search("gsk").hits == []
        hits = store.search("argument").hits
        assert len(hits) == 2 and key[4:16] not in str(hits)
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(f"SELECT id, title, summary, content FROM {SCHEMA}.diaries "
                            "ORDER BY id").fetchall()
        lessons = conn.execute(f"SELECT state::text, content FROM {SCHEMA}.lessons").fetchall()
    assert key[:12] not in str(rows) and key[:12] not in str(lessons)
    kept = {ident: content for ident, _, _, content in rows}
    assert kept[diaries[0].id] == planted.replace(key, "[REDACTED:groq_api_key]").replace(
        "title: [REDACTED:groq_api_key]", "title: '[REDACTED:groq_api_key]'")
    assert kept[diaries[1].id] == diaries[1].content
    assert "Argument of type [REDACTED:groq_api_key]" in lessons[0][1]
